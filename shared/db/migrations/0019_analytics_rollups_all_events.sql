-- Analytics rollups: each product's hour also gets a row over all its events (event null) in every set, beside the row
-- per event. A query that neither filters nor groups by event (daily active identities, a month's visitors) merges
-- one sketch per hour instead of one per event and hour. docs/analytics.md, "Rollups".
alter table analytics_event_rollups alter column event drop not null;

-- The rows for the hours counted so far. No step may count meanwhile: one holding the watermark waits for this
-- transaction, and so does one backfilling a set (its rows' table is locked against writes until the commit).
select watermark from analytics_rollup_state for update;
lock table analytics_event_rollups in share row exclusive mode;
insert into analytics_event_rollups (product_id, set_id, hour, event, v1, v2, v3, events, identities)
select product_id, set_id, hour, null, v1, v2, v3, sum(events), hll_union_agg(identities)
from analytics_event_rollups
where event is not null
group by product_id, set_id, hour, v1, v2, v3;
