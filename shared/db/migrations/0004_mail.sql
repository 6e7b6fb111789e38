-- Mail: sending domains with their DKIM keys, sending API keys (lmk_), templates, emails with their event timeline,
-- idempotency keys, and the suppression list. docs/mail.md explains each decision.
create table mail_domains (
  id uuid primary key default gen_random_uuid(),
  product_id uuid not null references products (id) on delete cascade,
  name text not null check (name = lower(name) and length(name) between 3 and 253),
  status text not null default 'pending' check (status in ('pending', 'verified', 'failed')),
  dkim_selector text not null,
  -- The p= value of the DKIM record (base64 DER SubjectPublicKeyInfo).
  dkim_public_key text not null,
  -- The DKIM private key (PKCS#8 PEM), sealed under the master key (shared/secrets.ts; re-wrapped on rotation).
  secret_sealed bytea not null,
  -- The value of the ownership TXT record.
  verification_token text not null,
  -- Per-record status from the last check: {dkim, spf, ownership} each 'pending' | 'verified' | 'failed'.
  record_status jsonb not null default '{"dkim": "pending", "spf": "pending", "ownership": "pending"}',
  created_at timestamptz not null default now(),
  checked_at timestamptz,
  verified_at timestamptz,
  unique (product_id, name)
);

create table mail_api_keys (
  id uuid primary key default gen_random_uuid(),
  product_id uuid not null references products (id) on delete cascade,
  name text not null check (length(name) between 1 and 256),
  scope text not null check (scope in ('sending_access', 'full_access')),
  domain_id uuid references mail_domains (id) on delete set null,
  prefix text not null,
  key_hash bytea not null unique,
  created_at timestamptz not null default now(),
  revoked_at timestamptz
);
create index mail_api_keys_product on mail_api_keys (product_id) where revoked_at is null;

create table mail_templates (
  id uuid primary key default gen_random_uuid(),
  product_id uuid not null references products (id) on delete cascade,
  name text not null check (length(name) between 1 and 256),
  subject text not null,
  html text not null,
  text text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (product_id, name)
);

create table emails (
  id uuid primary key default gen_random_uuid(),
  product_id uuid not null references products (id) on delete cascade,
  domain_id uuid references mail_domains (id) on delete set null,
  api_key_id uuid references mail_api_keys (id) on delete set null,
  from_address text not null,
  to_addresses text[] not null,
  cc_addresses text[] not null default '{}',
  bcc_addresses text[] not null default '{}',
  reply_to text[] not null default '{}',
  subject text not null,
  html text,
  text text,
  headers jsonb not null default '{}',
  tags jsonb not null default '[]',
  -- Set at queueing; the same on every delivery attempt (at-least-once: a repeat is recognisable).
  message_id text not null,
  last_event text not null default 'queued',
  last_event_at timestamptz not null default now(),
  -- Delivery bookkeeping for the mailer: attempts so far, when the next may start, and the lease of the mailer holding it.
  attempts integer not null default 0,
  next_attempt_at timestamptz not null default now(),
  lease_until timestamptz,
  created_at timestamptz not null default now()
);
create index emails_product_recent on emails (product_id, created_at desc, id desc);
create index emails_due on emails (next_attempt_at) where last_event in ('queued', 'delivery_delayed');

create table email_events (
  id bigint generated always as identity primary key,
  email_id uuid not null references emails (id) on delete cascade,
  kind text not null check (kind in ('queued', 'sent', 'delivered', 'delivery_delayed', 'bounced', 'failed', 'suppressed')),
  at timestamptz not null default clock_timestamp(),
  detail text
);
create index email_events_email on email_events (email_id, id);

create table mail_idempotency_keys (
  product_id uuid not null references products (id) on delete cascade,
  key text not null check (length(key) between 1 and 256),
  request_hash bytea not null,
  -- Null while the first request is in flight.
  email_id uuid references emails (id) on delete cascade,
  created_at timestamptz not null default now(),
  primary key (product_id, key)
);

create table mail_suppressions (
  product_id uuid not null references products (id) on delete cascade,
  address text not null,
  reason text not null,
  created_at timestamptz not null default now(),
  primary key (product_id, address)
);
