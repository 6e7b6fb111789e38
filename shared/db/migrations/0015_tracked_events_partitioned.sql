-- Tracked events partitioned by calendar month (UTC) of their time, so that reads prune to the months they cover,
-- retention drops whole months, and each month's indexes stay small. docs/analytics.md ("Partitions") explains each
-- decision, and how an existing deployment upgrades.
--
-- The upgrade is a rename and new empty tables, never a copy inside this transaction: the events already stored stay
-- in tracked_events_legacy, which the view tracked_events_all reads beside the partitions, and the aggregator moves
-- them into their months in small transactions (shared/analytics/partitions.ts). A fresh database has no rows to
-- move, and the legacy table is dropped here.
alter table tracked_events rename to tracked_events_legacy;
alter index tracked_events_event_time rename to tracked_events_legacy_event_time;
alter index tracked_events_anonymous rename to tracked_events_legacy_anonymous;
alter index tracked_events_users rename to tracked_events_legacy_users;
alter index tracked_events_email rename to tracked_events_legacy_email;
alter index tracked_events_phone rename to tracked_events_legacy_phone;

-- No primary key: a partitioned table's unique keys must hold the partition key, and nothing refers to an event by id.
-- Ids stay unique because one identity hands them all out; they order events by capture, which the rollups'
-- watermark relies on (shared/analytics/rollups.ts).
create table tracked_events (
  id bigint generated always as identity,
  product_id uuid not null constraint tracked_events_product references products (id) on delete cascade,
  event text not null,
  ts timestamptz not null,
  anonymous_id text,
  users_id text,
  email text,
  phone text,
  properties jsonb not null default '{}',
  received_at timestamptz not null default now(),
  constraint tracked_events_some_identity check (num_nonnulls(anonymous_id, users_id, email, phone) > 0)
) partition by range (ts);

-- Ids continue after the legacy table's, so an id names one event across both while rows move.
do $$
declare next_id bigint;
begin
  select coalesce(max(id), 0) + 1 into next_id from tracked_events_legacy;
  execute format('alter table tracked_events alter column id restart with %s', next_id);
end $$;

-- Metric queries scan one event over a time range; funnels walk each identity's events in time order; rollups and the
-- raw tail past their watermark read a product's events by time.
create index tracked_events_event_time on tracked_events (product_id, event, ts);
create index tracked_events_product_time on tracked_events (product_id, ts);
create index tracked_events_anonymous on tracked_events (product_id, anonymous_id, event, ts) where anonymous_id is not null;
create index tracked_events_users on tracked_events (product_id, users_id, event, ts) where users_id is not null;
create index tracked_events_email on tracked_events (product_id, email, event, ts) where email is not null;
create index tracked_events_phone on tracked_events (product_id, phone, event, ts) where phone is not null;

-- Events of months that have no partition (backdated far into the past, or dated far ahead).
create table tracked_events_default partition of tracked_events default;
-- Ids grow with capture, and rows are appended: a block-range index finds the events captured past a watermark in a
-- few pages, at almost no cost per insert (each month's partition gets the same).
create index tracked_events_default_ids on tracked_events_default using brin (id) with (pages_per_range = 16);
-- The aggregator asks the default partition every minute which months it holds events of.
create index tracked_events_default_time on tracked_events_default (ts);

-- One month's partition, created when missing; the events the default partition holds for that month move into it in
-- the same transaction (PostgreSQL refuses to attach a range the default still has rows of). True when it created one.
create function tracked_events_create_month(month_start date) returns boolean language plpgsql as $$
declare
  name text := format('tracked_events_p%s', to_char(month_start, 'YYYYMM'));
  lower_bound timestamptz := date_trunc('month', month_start)::timestamp at time zone 'UTC';
  upper_bound timestamptz := (date_trunc('month', month_start) + interval '1 month')::timestamp at time zone 'UTC';
begin
  -- Two aggregators making the same month wait for each other; the second finds it made.
  perform pg_advisory_xact_lock(727002);
  if to_regclass(name) is not null then return false; end if;
  -- No statement may be planned with the partitions as they were and read after the commit: it would find the rows
  -- moved out of the default partition in neither place (a rollup step would then never count them). So no reader
  -- or writer runs across the change; the caller bounds the wait (lock_timeout) and tries again later, months ahead.
  lock table tracked_events in access exclusive mode;
  execute format('create table %I (like tracked_events including defaults including constraints)', name);
  execute format('create index %I on %I using brin (id) with (pages_per_range = 16)', name || '_ids', name);
  execute format('with moved as (delete from tracked_events_default where ts >= $1 and ts < $2 returning *) '
    || 'insert into %I select * from moved', name) using lower_bound, upper_bound;
  execute format('alter table tracked_events attach partition %I for values from (%L) to (%L)', name, lower_bound, upper_bound);
  return true;
end $$;

-- The months around now; the aggregator keeps ANALYTICS_PARTITIONS_AHEAD months ahead from here on.
select tracked_events_create_month((date_trunc('month', now() at time zone 'UTC') + make_interval(months => m))::date)
from generate_series(-1, 3) as m;

-- What every reader of events reads: the partitions, and the legacy rows not moved yet. Once none are left the
-- aggregator redefines it over the partitions alone and drops the legacy table.
create view tracked_events_all as
  select id, product_id, event, ts, anonymous_id, users_id, email, phone, properties, received_at from tracked_events
  union all
  select id, product_id, event, ts, anonymous_id, users_id, email, phone, properties, received_at from tracked_events_legacy;

do $$
begin
  if not exists (select 1 from tracked_events_legacy) then
    create or replace view tracked_events_all as
      select id, product_id, event, ts, anonymous_id, users_id, email, phone, properties, received_at from tracked_events;
    drop table tracked_events_legacy;
  end if;
end $$;
