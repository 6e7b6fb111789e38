-- Analytics rollups at five minutes: the same rows as analytics_event_rollups (per product, set, event or all events,
-- and property values), per five-minute slot. A query reads them for the part of its range outside whole hours, so
-- a range that starts or ends mid-hour (every "last 30 days") reads raw events for less than five minutes at each
-- end instead of up to an hour. docs/analytics.md, "Rollups".
create table analytics_event_slots (
  product_id uuid not null references products (id) on delete cascade,
  set_id bigint not null,
  slot timestamptz not null,
  event text,
  v1 text,
  v2 text,
  v3 text,
  events bigint not null,
  identities hll not null,
  constraint analytics_event_slots_key unique nulls not distinct (product_id, set_id, slot, event, v1, v2, v3)
);
-- Retention deletes slots by time, across products.
create index analytics_event_slots_slot on analytics_event_slots (slot);

-- The base set's slots hold every event up to the watermark with an id above slots_from (counted as they come); the
-- aggregator counts the ones at or below it into slots in id order, up to slots_backfilled. Queries read the base
-- set's slots once slots_backfilled reaches slots_from, raw events at the range's ends until then.
alter table analytics_rollup_state
  add column slots_from bigint not null default 0,
  add column slots_backfilled bigint not null default 0;

-- No step may count meanwhile: one holding the watermark waits for the state row, one backfilling a set for the two
-- tables (taken in this order by every step, so no step holds one while waiting for the other here).
select watermark from analytics_rollup_state for update;
lock table analytics_rollup_sets, analytics_event_rollups in exclusive mode;
update analytics_rollup_state set slots_from = watermark, slots_backfilled = 0;
-- Property sets are counted again from scratch, hours and slots together, by the backfill a new set gets: their rows
-- go, and queries read raw events for them until they are ready again.
delete from analytics_event_rollups where set_id <> 0;
update analytics_rollup_sets s set state = 'building', covers_from = st.watermark, backfilled_until = '-infinity'
from analytics_rollup_state st where s.state <> 'too_many_values';
