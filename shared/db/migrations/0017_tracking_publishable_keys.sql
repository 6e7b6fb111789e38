-- Tracking: publishable capture keys (ptk_), made to be embedded in web pages and apps. docs/analytics.md, "Capture
-- from browsers". The key is stored readable: it is public by design (every visitor of a page holding it can read it),
-- and it only appends events to its own product, so the table holds nothing a page's source does not already show.
create table capture_keys (
  id uuid primary key default gen_random_uuid(),
  product_id uuid not null references products (id) on delete cascade,
  -- Keys are per environment, as the other product keys: a key is unknown in every other environment.
  environment text not null,
  name text not null check (length(name) between 1 and 256),
  key text not null unique check (key ~ '^ptk_[A-Za-z0-9_-]{43}$'),
  -- Exact browser origins (scheme://host[:port], lower case); empty: any origin.
  allowed_origins text[] not null default '{}' check (cardinality(allowed_origins) <= 20),
  created_by uuid references users (id) on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  revoked_at timestamptz
);
create index capture_keys_product on capture_keys (product_id, environment) where revoked_at is null;
