-- Analytics rollups per six hours of the UTC day (00:00, 06:00, 12:00, 18:00): the rows of analytics_event_rollups
-- merged six hours at a time. A query reads a part's row instead of its six hour rows wherever no bucket
-- boundary cuts the part: a month of daily active identities merges about a third of the sketches in a zone a whole
-- number of hours off UTC (Berlin: three parts and six hours a day) and a sixth in UTC. docs/analytics.md, "Rollups".
create table analytics_event_day_parts (
  product_id uuid not null references products (id) on delete cascade,
  set_id bigint not null,
  part timestamptz not null,
  event text,
  v1 text,
  v2 text,
  v3 text,
  events bigint not null,
  identities hll not null,
  constraint analytics_event_day_parts_key unique nulls not distinct (product_id, set_id, part, event, v1, v2, v3)
);
-- Retention deletes parts by time, across products.
create index analytics_event_day_parts_part on analytics_event_day_parts (part);

-- The parts of the hours counted so far, from their hour rows (as migration 0019 made the rows over all events). No
-- step may count meanwhile: one holding the watermark waits for the state row, one backfilling a set for the tables.
select watermark from analytics_rollup_state for update;
lock table analytics_rollup_sets, analytics_event_rollups in exclusive mode;
insert into analytics_event_day_parts (product_id, set_id, part, event, v1, v2, v3, events, identities)
select product_id, set_id, date_bin('6 hours', hour, timestamptz '2000-01-01 00:00:00+00'), event, v1, v2, v3, sum(events), hll_union_agg(identities)
from analytics_event_rollups
group by product_id, set_id, date_bin('6 hours', hour, timestamptz '2000-01-01 00:00:00+00'), event, v1, v2, v3;
