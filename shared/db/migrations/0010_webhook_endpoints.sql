-- Webhook endpoints (issue 22, first slice: management only). One table for every area that has webhooks; an endpoint
-- belongs to one product and one area, and is only ever read through that area's routes.
-- Secrets are sealed (shared/secrets.ts) with aad `webhook_endpoints:<id>`; a rotation moves the sealed current secret
-- to previous_secret_sealed unopened, signed with until previous_secret_expires_at (24 h later) by the delivery slice.
create table webhook_endpoints (
  id uuid primary key default gen_random_uuid(),
  product_id uuid not null references products (id) on delete cascade,
  area text not null check (area in ('realtime', 'mail')),
  url text not null check (octet_length(url) between 1 and 2048),
  description text check (char_length(description) <= 256),
  -- Kinds of the area (validated by the API against shared/webhooks/events.ts), or {'*'} for all of them.
  event_kinds text[] not null check (cardinality(event_kinds) between 1 and 32),
  enabled boolean not null default true,
  -- Why the platform disabled the endpoint (the delivery slice sets it); null when enabled or disabled by the product.
  disabled_reason text,
  secret_sealed bytea not null,
  secret_prefix text not null,
  previous_secret_sealed bytea,
  previous_secret_expires_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  constraint webhook_endpoints_previous_secret check ((previous_secret_sealed is null) = (previous_secret_expires_at is null))
);
create index webhook_endpoints_listing on webhook_endpoints (product_id, area, created_at desc, id desc);
