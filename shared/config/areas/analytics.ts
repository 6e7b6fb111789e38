// Analytics: the public capture route, queries and their concurrency, rollups, the read replica and funnel results.
import { area, integer, optionalUrl } from '../variable'

export const analytics = area('Analytics',
  'Capture from browsers, metric queries and funnels on the API workers, rollups, the read replica and kept funnel results. [Analytics](analytics.md).', {
    keyEventsPerSecond: integer('CAPTURE_KEY_EVENTS_PER_SECOND', {
      default: 10_000, min: 1, max: 10_000_000,
      description: 'Events one publishable key may capture per second, across every public worker; beyond: 429.',
    }),
    captureIpRequestsPerMinute: integer('CAPTURE_IP_RATE_LIMIT', {
      default: 600, min: 1, max: 10_000_000,
      description: 'Capture requests per client IP per minute (its own window, apart from `PUBLIC_IP_RATE_LIMIT`).',
    }),
    queryTimeoutMs: integer('ANALYTICS_QUERY_TIMEOUT_MS', {
      default: 10_000, min: 1, max: 600_000,
      description: 'Longest a metric query or funnel may run, in ms; past it 422 `query_timeout`.',
    }),
    maxRows: integer('ANALYTICS_MAX_ROWS', {
      default: 10_000, min: 1, max: 1_000_000,
      description: 'Most rows one query answers; more are cut off and the answer says `truncated`.',
    }),
    maxBuckets: integer('ANALYTICS_MAX_BUCKETS', { default: 1000, min: 1, max: 100_000, description: 'Most time buckets one query spans.' }),
    maxConcurrentPerProduct: integer('ANALYTICS_MAX_CONCURRENT_PER_PRODUCT', {
      default: 2, min: 1, max: 100,
      description: 'Analytics operations one product runs at once on one API worker (its pool holds 4 connections); more: 429.',
    }),
    maxConcurrentPerOrganization: integer('ANALYTICS_MAX_CONCURRENT_PER_ORGANIZATION', {
      default: 3, min: 1, max: 100,
      description: 'Analytics operations the products of one organization run at once on one API worker; more: 429.',
    }),
    maxConcurrentPerWorker: integer('ANALYTICS_MAX_CONCURRENT_PER_WORKER', {
      default: 4, min: 1, max: 100,
      description: 'Analytics operations one API worker runs at once, all organizations together; more: 429 with scope `worker`.',
    }),
    maxRollupSets: integer('ANALYTICS_MAX_ROLLUP_SETS', {
      default: 10, min: 0, max: 100,
      description: 'Most property sets (rollups grouped by saved insights\' property keys) one product has.',
    }),
    rollupMaxValues: integer('ANALYTICS_ROLLUP_MAX_VALUES', {
      default: 1000, min: 10, max: 100_000,
      description: 'Most value combinations of a property set in one hour; a set past it is dropped and its queries read raw events.',
    }),
    replicaUrl: optionalUrl('ANALYTICS_DATABASE_URL', {
      schemes: ['postgres', 'postgresql'],
      description: 'A streaming replica of `DATABASE_URL` that metric queries, funnels and insight runs read from; unset: the primary.',
    }),
    replicaMaxLagMs: integer('ANALYTICS_REPLICA_MAX_LAG_MS', {
      default: 5000, min: 0, max: 300_000,
      description: 'How far behind the primary the replica may be and still answer, in ms; further behind, the primary answers.',
    }),
    funnelResultTtlMs: integer('ANALYTICS_FUNNEL_RESULT_TTL_MS', {
      default: 900_000, min: 1000, max: 86_400_000,
      description: 'How long a funnel insight\'s kept result answers its runs, in ms.',
    }),
    funnelRefreshIntervalMs: integer('ANALYTICS_FUNNEL_REFRESH_INTERVAL_MS', {
      default: 30_000, min: 100, max: 3_600_000,
      description: 'Pause between two rounds of the background refresh of dashboard funnels, in ms.',
    }),
    funnelRefreshBatch: integer('ANALYTICS_FUNNEL_REFRESH_BATCH', {
      default: 20, min: 0, max: 1000,
      description: 'Most funnel insights one background round recomputes (at most one per product); 0: no background refresh.',
    }),
  })
