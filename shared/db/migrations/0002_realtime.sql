-- Realtime control plane: product API keys (rtk_), namespaces with their policy, grants, payload storage, token signing keys.
create table public_keys (
  id uuid primary key default gen_random_uuid(),
  product_id uuid not null references products (id) on delete cascade,
  -- Keys are per environment: the environment is also hashed into key_hash, so a key is unknown elsewhere.
  environment text not null,
  name text not null,
  scope text[] not null,
  prefix text not null,
  key_hash bytea not null unique,
  created_by uuid references users (id) on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  revoked_at timestamptz
);
create index public_keys_product on public_keys (product_id, environment) where revoked_at is null;

create table realtime_namespaces (
  id uuid primary key default gen_random_uuid(),
  product_id uuid not null references products (id) on delete cascade,
  name text not null check (name ~ '^[a-zA-Z0-9._-]{1,64}$'),
  presence boolean not null default false,
  client_events boolean not null default false,
  -- 0 = no history kept; otherwise kept up to this many seconds (30 days at most) and this many entries.
  history_ttl_seconds integer not null default 0 check (history_ttl_seconds between 0 and 2592000),
  history_size integer not null default 0 check (history_size between 0 and 10000),
  archive_days integer not null default 0 check (archive_days between 0 and 3650),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (product_id, name)
);

create table realtime_grants (
  id uuid primary key default gen_random_uuid(),
  product_id uuid not null references products (id) on delete cascade,
  namespace_id uuid not null references realtime_namespaces (id) on delete cascade,
  pattern text not null,
  ops text[] not null,
  created_at timestamptz not null default now(),
  unique (product_id, pattern)
);
create index realtime_grants_namespace on realtime_grants (namespace_id);

create table realtime_payload_storage (
  product_id uuid primary key references products (id) on delete cascade,
  bucket text not null,
  created_at timestamptz not null default now()
);

create table realtime_signing_keys (
  kid text primary key,
  secret bytea not null,
  created_at timestamptz not null default now(),
  retired_at timestamptz
);
