-- Webhook delivery (issue 22, second slice): an outbox. An event is a webhook_messages row, inserted in the transaction
-- of the change that causes it (shared/webhooks/outbox.ts); one webhook_deliveries row per endpoint it goes to; one
-- webhook_attempts row per HTTP attempt. The webhooks process (services/webhooks/) claims due deliveries with a lease.
create table webhook_messages (
  -- `msg_` + random: the `webhook-id` header, the same on every attempt and replay (receivers dedupe on it).
  id text primary key,
  product_id uuid not null references products (id) on delete cascade,
  area text not null check (area in ('realtime', 'mail')),
  -- An event kind of the area (shared/webhooks/events.ts), or `webhook.test`.
  kind text not null,
  -- The body POSTed, as JSON text `{"type", "timestamp", "data"}`: stored as text, so every attempt and replay sends
  -- the same bytes in the documented key order (jsonb would reorder keys, and refuses \u0000 in a string).
  payload text not null,
  -- A producer's own key for the event, so that inserting it twice records it once (null: no deduplication).
  dedupe_key text check (octet_length(dedupe_key) <= 256),
  created_at timestamptz not null default now()
);
create unique index webhook_messages_dedupe on webhook_messages (product_id, area, dedupe_key) where dedupe_key is not null;
create index webhook_messages_age on webhook_messages (created_at);

create table webhook_deliveries (
  id uuid primary key default gen_random_uuid(),
  message_id text not null references webhook_messages (id) on delete cascade,
  endpoint_id uuid not null references webhook_endpoints (id) on delete cascade,
  state text not null default 'pending' check (state in ('pending', 'succeeded', 'failed')),
  -- Attempts recorded so far (counted when recorded, so an attempt cut off by a killed process costs no retry).
  attempts int not null default 0,
  next_attempt_at timestamptz not null default now(),
  -- The claim: a process holds the delivery until locked_until; a lease that ran out is claimed again.
  locked_until timestamptz,
  lease_token uuid,
  -- A replay is a new delivery of the same message to the same endpoint: the one it replays.
  replay_of uuid references webhook_deliveries (id) on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
-- The claim walks each enabled endpoint's due deliveries, oldest first.
create index webhook_deliveries_due on webhook_deliveries (endpoint_id, next_attempt_at) where state = 'pending';
-- In-flight counts per endpoint (the concurrency bound).
create index webhook_deliveries_leased on webhook_deliveries (endpoint_id) where state = 'pending' and locked_until is not null;
create index webhook_deliveries_listing on webhook_deliveries (endpoint_id, created_at desc, id desc);
create index webhook_deliveries_message on webhook_deliveries (message_id);

create table webhook_attempts (
  id bigserial primary key,
  delivery_id uuid not null references webhook_deliveries (id) on delete cascade,
  attempted_at timestamptz not null,
  duration_ms int not null,
  -- The HTTP status, or null when there was no answer (refused address, DNS, timeout, connection error).
  status_code int,
  -- Why it failed without a status, why a 3xx was not followed, or that the answer was cut short.
  error text check (octet_length(error) <= 2048),
  -- The first 1 KiB of the answer.
  response_excerpt text not null default '' check (octet_length(response_excerpt) <= 4096)
);
create index webhook_attempts_delivery on webhook_attempts (delivery_id, id);

-- Since when every attempt to the endpoint has failed (null after a success, and when the product enables it): past
-- WEBHOOK_DISABLE_AFTER_MS of failures the endpoint is disabled, with disabled_reason set.
alter table webhook_endpoints add column failing_since timestamptz;
