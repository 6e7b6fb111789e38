-- Analytics: the last result of each funnel insight, kept so that a dashboard answers without running the funnel
-- again (services/api/analytics/insight-results.ts). docs/analytics.md, "Kept funnel results".
create table analytics_insight_results (
  insight_id uuid primary key references analytics_insights (id) on delete cascade,
  product_id uuid not null references products (id) on delete cascade,
  -- sha256 of the insight's kind and query when the result was computed (insight-results.ts QUERY_HASH): a result of
  -- another query than the insight's current one is never answered. Null, with result, until the first computation.
  query_hash bytea,
  -- The answer of analytics_funnel_run, with its as_of.
  result jsonb,
  -- When it was computed: relative ranges ("-30d") were taken from this instant.
  computed_at timestamptz,
  duration_ms integer check (duration_ms >= 0),
  -- A run computing it now holds it until then (a lease, so a crashed run frees it): other runs wait for its result
  -- instead of computing the same funnel at the same time.
  refreshing_until timestamptz,
  -- When the background refresh last failed to compute it: it then takes up the product's other insights first.
  failed_at timestamptz,
  check ((result is null) = (computed_at is null) and (result is null) = (query_hash is null))
);
create index analytics_insight_results_product on analytics_insight_results (product_id);
