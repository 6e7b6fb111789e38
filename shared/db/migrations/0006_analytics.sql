-- Analytics: captured events (Tracking), saved insights, dashboards with the insights their tiles name, and every
-- version of every dashboard. docs/analytics.md explains each decision.
create table tracked_events (
  id bigint generated always as identity primary key,
  product_id uuid not null references products (id) on delete cascade,
  event text not null,
  ts timestamptz not null,
  anonymous_id text,
  users_id text,
  email text,
  phone text,
  properties jsonb not null default '{}',
  received_at timestamptz not null default now(),
  check (num_nonnulls(anonymous_id, users_id, email, phone) > 0)
);
-- Metric queries scan one event over a time range; funnels walk each identity's events in time order.
create index tracked_events_event_time on tracked_events (product_id, event, ts);
create index tracked_events_anonymous on tracked_events (product_id, anonymous_id, event, ts) where anonymous_id is not null;
create index tracked_events_users on tracked_events (product_id, users_id, event, ts) where users_id is not null;
create index tracked_events_email on tracked_events (product_id, email, event, ts) where email is not null;
create index tracked_events_phone on tracked_events (product_id, phone, event, ts) where phone is not null;

create table analytics_insights (
  id uuid primary key default gen_random_uuid(),
  product_id uuid not null references products (id) on delete cascade,
  name text not null check (length(name) between 1 and 120),
  description text,
  kind text not null check (kind in ('metric', 'funnel')),
  query jsonb not null,
  created_by uuid references users (id) on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index analytics_insights_product on analytics_insights (product_id, created_at desc);

create table analytics_dashboards (
  id uuid primary key default gen_random_uuid(),
  product_id uuid not null references products (id) on delete cascade,
  slug text not null check (slug ~ '^[a-z0-9][a-z0-9-]{1,63}$'),
  name text not null check (length(name) between 1 and 120),
  tags text[] not null default '{}',
  tiles jsonb not null default '[]',
  created_by uuid references users (id) on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (product_id, slug)
);
create index analytics_dashboards_recent on analytics_dashboards (product_id, created_at desc, id desc);

-- The insights a dashboard's tiles name, kept with the dashboard in one transaction: the foreign key makes deleting an
-- insight that a dashboard uses impossible, even when the delete and a dashboard update race.
create table analytics_dashboard_insights (
  dashboard_id uuid not null references analytics_dashboards (id) on delete cascade,
  insight_id uuid not null references analytics_insights (id) on delete restrict,
  primary key (dashboard_id, insight_id)
);
create index analytics_dashboard_insights_insight on analytics_dashboard_insights (insight_id);

create table analytics_dashboard_versions (
  dashboard_id uuid not null references analytics_dashboards (id) on delete cascade,
  version integer not null,
  -- The whole definition as it was saved: name, tags, tiles (the slug never changes).
  definition jsonb not null,
  created_by uuid references users (id) on delete set null,
  created_at timestamptz not null default now(),
  -- What made it: create, update, or restore of an earlier version.
  reason text not null,
  primary key (dashboard_id, version)
);
