-- Rollups of tracked events: per product, UTC hour and event (the base set), and per the property keys that saved
-- insights group or filter by (property sets), the number of events and a HyperLogLog sketch of their distinct
-- identities. Maintained incrementally by the aggregator up to a watermark (an event id); a query reads rollup rows
-- for the whole hours it covers and raw events for the rest and past the watermark. docs/analytics.md ("Rollups").
create extension if not exists hll;

-- How far the rollups go: every event with an id at or below `watermark` is counted in the base set's rows and in
-- the rows of every ready property set. One row.
create table analytics_rollup_state (
  singleton boolean primary key default true check (singleton),
  watermark bigint not null default 0,
  advanced_at timestamptz
);
insert into analytics_rollup_state default values;

-- A property set: the events of one product grouped by up to three property keys (sorted, distinct). Sets are made for
-- the metric insights a product saves, at most ANALYTICS_MAX_ROLLUP_SETS per product.
--   building: counted for events past `covers_from` as they come; the product's events at or below it are being
--             backfilled in time order (`backfilled_until`: every such event up to this time is counted)
--   ready: counted for every event up to the watermark; queries may read it
--   too_many_values: an hour held more than ANALYTICS_ROLLUP_MAX_VALUES value combinations; its rows are gone and
--                    queries read raw events instead
create table analytics_rollup_sets (
  id bigint generated always as identity primary key,
  product_id uuid not null references products (id) on delete cascade,
  keys text[] not null check (cardinality(keys) between 1 and 3),
  state text not null default 'building' check (state in ('building', 'ready', 'too_many_values')),
  covers_from bigint not null,
  backfilled_until timestamptz not null default '-infinity',
  created_at timestamptz not null default now(),
  unique (product_id, keys)
);

-- set_id 0 is the base set (no property values); v1..v3 are the values of a set's keys in its order (null: not set).
create table analytics_event_rollups (
  product_id uuid not null references products (id) on delete cascade,
  set_id bigint not null,
  hour timestamptz not null,
  event text not null,
  v1 text,
  v2 text,
  v3 text,
  events bigint not null,
  identities hll not null,
  constraint analytics_event_rollups_key unique nulls not distinct (product_id, set_id, hour, event, v1, v2, v3)
);
-- Retention deletes rollup rows by hour, across products.
create index analytics_event_rollups_hour on analytics_event_rollups (hour);
