-- Realtime usage for analytics, counted in each public worker and gateway and flushed in batches (one upsert per flush,
-- never one row per message): per product, namespace and minute.
create table realtime_usage (
  product_id uuid not null references products (id) on delete cascade,
  namespace text not null,
  minute timestamptz not null,
  publishes bigint not null default 0,
  deliveries bigint not null default 0,
  bytes bigint not null default 0,
  primary key (product_id, minute, namespace)
);

-- Connections per product, gateway process and minute: how many opened and closed, and the most open at once.
create table realtime_connection_minutes (
  product_id uuid not null references products (id) on delete cascade,
  gateway text not null,
  minute timestamptz not null,
  opened integer not null default 0,
  closed integer not null default 0,
  peak integer not null default 0,
  primary key (product_id, minute, gateway)
);
