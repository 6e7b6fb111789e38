// Typed configuration, read once from the environment; every variable has a working local default.
// The README's configuration table lists the same names and defaults: keep them in step.
import { hostname } from 'node:os'
import { DEFAULT_RETRY_DELAYS_MS, parseRetryDelays } from './webhooks/schedule'

function str(name: string, fallback: string): string {
  const value = process.env[name]
  return value === undefined || value === '' ? fallback : value
}

function int(name: string, fallback: number): number {
  const raw = process.env[name]
  if (raw === undefined || raw === '') return fallback
  const value = Number(raw)
  if (!Number.isInteger(value) || value < 0) throw new Error(`${name} must be a non-negative integer, got "${raw}"`)
  return value
}

/** An integer in [min, max]: a value outside is refused at start-up, naming the bounds. */
function atMost(name: string, fallback: number, min: number, max: number): number {
  const value = int(name, fallback)
  if (value < min || value > max) throw new Error(`${name} must be between ${min} and ${max}, got ${value}`)
  return value
}

function bool(name: string, fallback: boolean): boolean {
  const raw = process.env[name]
  if (raw === undefined || raw === '') return fallback
  return raw === '1' || raw.toLowerCase() === 'true'
}

/** Project-local backing-service ports used by scripts/up and scripts/test when no URL is given. */
export const LOCAL_PORTS = { postgres: 55432, redis: 56379, s3: 59000, smtp: 59025 } as const

function loadConfig() {
  const apiPort = int('API_PORT', 4100)
  const publicPort = int('PUBLIC_PORT', 4200)
  const gatewayPort = int('GATEWAY_PORT', 4300)
  const mailerPort = int('MAILER_PORT', 4400)
  return {
    /** Environment name; part of every product API key's hashed lookup, so keys do not cross environments. */
    environment: str('PLATFORM_ENV', 'development'),
    databaseUrl: str('DATABASE_URL', `postgres://postgres@127.0.0.1:${LOCAL_PORTS.postgres}/platform`),
    redisUrl: str('REDIS_URL', `redis://127.0.0.1:${LOCAL_PORTS.redis}`),
    /** S3 endpoint with credentials in the userinfo part: http://ACCESS:SECRET@host:port */
    s3Url: str('S3_URL', `http://S3RVER:S3RVER@127.0.0.1:${LOCAL_PORTS.s3}`),
    s3Region: str('S3_REGION', 'us-east-1'),
    apiPort,
    publicPort,
    gatewayPort,
    /** Health endpoints of the mailers (reusePort: any mailer answers). */
    mailerPort,
    /** Addresses as clients see them (behind a proxy these differ from the listening ports). */
    apiUrl: str('API_URL', `http://127.0.0.1:${apiPort}`),
    publicUrl: str('PUBLIC_URL', `http://127.0.0.1:${publicPort}`),
    gatewayUrl: str('GATEWAY_URL', `ws://127.0.0.1:${gatewayPort}/connection/websocket`),
    /** Browser origins on the public routes must be https://*.{developerDomain}. */
    developerDomain: str('DEVELOPER_DOMAIN', 'localhost'),
    /** Extra allowed browser origins on the public routes, comma-separated exact origins (e.g. http://localhost:5173). */
    extraAllowedOrigins: str('PUBLIC_EXTRA_ORIGINS', '').split(',').map((o) => o.trim()).filter(Boolean),
    /** Take the client IP from X-Forwarded-For (only behind a proxy that sets it). */
    trustProxy: bool('TRUST_PROXY', false),
    /** Largest request body on the platform API, in bytes. */
    apiBodyLimit: int('API_BODY_LIMIT', 1_048_576),
    sessionTtlSeconds: int('SESSION_TTL_SECONDS', 30 * 24 * 3600),
    /** Sign-ups and logins per client IP per minute (each costs an argon2id hash: brute force and CPU both). */
    authRequestsPerMinute: int('AUTH_RATE_LIMIT', 20),
    logRequests: bool('LOG_REQUESTS', true),
    /**
     * Each worker's Prometheus metrics listener (shared/metrics/serve.ts, docs/metrics.md): its own port, since the
     * workers of a process share their service port and a scrape there would reach any one of them.
     */
    metrics: {
      /** The port `/metrics` is served on; 0: no metrics listener. */
      port: int('METRICS_PORT', 0),
      /**
       * Under foreman, which gives each instance its own PORT: the metrics port is PORT + this (0: not used). So
       * `foreman start -m api=2` gives each api worker its own metrics port with one setting.
       */
      portOffset: int('METRICS_PORT_OFFSET', 0),
      /** The address the metrics listener binds: loopback unless a scraper elsewhere must reach it. */
      host: str('METRICS_HOST', '127.0.0.1'),
      /** When set, a scrape must send `Authorization: Bearer <this>`; otherwise 401. */
      token: str('METRICS_TOKEN', ''),
      /**
       * How long a gauge counted in PostgreSQL at scrape time (the mailer's queue, the webhooks' pending deliveries) is
       * reused: below any sensible scrape interval, far above a scrape's length. Tests shorten it to see changes at once.
       */
      countCacheMs: atMost('METRICS_COUNT_CACHE_MS', 5000, 100, 60_000),
    },
    /**
     * Platform API requests per minute by operation class (services/api/limits.ts), per credential (a platform key, or a
     * user's login sessions together) and per organization (every credential acting on its products together). Beyond
     * either: 429 rate_limited with Retry-After, naming the class and the limit. Fixed windows in Redis across workers.
     */
    platformRates: {
      credential: {
        read: int('PLATFORM_RATE_READS_PER_MINUTE', 1200),
        write: int('PLATFORM_RATE_WRITES_PER_MINUTE', 600),
        expensive: int('PLATFORM_RATE_EXPENSIVE_PER_MINUTE', 30),
        analytics: int('PLATFORM_RATE_ANALYTICS_PER_MINUTE', 120),
      },
      organization: {
        read: int('PLATFORM_ORG_RATE_READS_PER_MINUTE', 3000),
        write: int('PLATFORM_ORG_RATE_WRITES_PER_MINUTE', 1200),
        expensive: int('PLATFORM_ORG_RATE_EXPENSIVE_PER_MINUTE', 60),
        analytics: int('PLATFORM_ORG_RATE_ANALYTICS_PER_MINUTE', 300),
      },
    },
    /**
     * Most items of each kind one product holds (shared/db/ceiling.ts): a create beyond it is 409 limit_reached. Counted
     * under a lock on the product row in the insert's transaction, so concurrent creates cannot pass it.
     */
    ceilings: {
      mailDomains: int('PRODUCT_MAX_MAIL_DOMAINS', 50),
      mailTemplates: int('PRODUCT_MAX_MAIL_TEMPLATES', 1000),
      mailKeys: int('PRODUCT_MAX_MAIL_KEYS', 100),
      publicKeys: int('PRODUCT_MAX_PUBLIC_KEYS', 100),
      captureKeys: int('PRODUCT_MAX_CAPTURE_KEYS', 100),
      platformKeys: int('PRODUCT_MAX_PLATFORM_KEYS', 100),
      namespaces: int('PRODUCT_MAX_NAMESPACES', 200),
      grants: int('PRODUCT_MAX_GRANTS', 1000),
      dashboards: int('PRODUCT_MAX_DASHBOARDS', 500),
      insights: int('PRODUCT_MAX_INSIGHTS', 2000),
      /** Webhook endpoints of one product in one area (Realtime, Mail): each area counts its own. */
      webhookEndpoints: int('PRODUCT_MAX_WEBHOOK_ENDPOINTS', 20),
      /** Products per organization: each product has its own ceilings, so without this they would multiply freely. */
      organizationProducts: int('ORGANIZATION_MAX_PRODUCTS', 100),
    },
    /**
     * Keys of each kind (sending, Realtime API, platform) one product may create in 24 hours, revoked ones included: a
     * revoked key's row stays, so this bounds how fast create-and-revoke churn grows the key tables. Beyond: 429.
     */
    keysCreatedPerDay: int('PRODUCT_MAX_KEYS_CREATED_PER_DAY', 1000),
    /** Show the runtime's own error pages (stack, source lines). Never in production: they disclose paths and code. */
    developmentErrors: bool('DEVELOPMENT_ERRORS', false),
    db: {
      /** Longest a request waits for PostgreSQL per statement or per transaction before answering 503. */
      timeoutMs: int('DB_TIMEOUT_MS', 2000),
      /** After a connection failure, requests needing PostgreSQL get 503 at once for this long, then one probes. */
      coolDownMs: int('DB_COOL_DOWN_MS', 1000),
    },
    /**
     * Master keys for secrets at rest (shared/secrets.ts): the current one seals, older ones (comma-separated) still
     * open during a rotation. Validated where used, so processes that hold no secrets do not need them.
     */
    secretKeys: {
      current: process.env.PLATFORM_SECRET_KEY || null,
      previous: str('PLATFORM_SECRET_KEY_PREVIOUS', '').split(',').map((k) => k.trim()).filter(Boolean),
    },
    redis: {
      /** Longest a request waits for one Redis command before answering 503 (blocking reads are exempt). */
      commandTimeoutMs: int('REDIS_COMMAND_TIMEOUT_MS', 1000),
    },
    /** Per-worker caches dropped by invalidation messages (shared/cache/); the variables keep their first names. */
    cache: {
      /** Longest a worker trusts a cached API key (Realtime or Mail) or namespace policy without an invalidation message. */
      ttlMs: int('REALTIME_CACHE_TTL_MS', 5000),
      /**
       * Most entries one per-worker cache holds (API keys, Mail sending keys, policies; a gateway's answers to "is this
       * API key revoked?"); past it the oldest entry is dropped and read again from PostgreSQL when next needed.
       */
      maxEntries: int('REALTIME_CACHE_MAX_ENTRIES', 10_000),
    },
    realtime: {
      /** Channels hash onto this many shards (Redis Streams); fixed for a deployment's lifetime. */
      shards: int('REALTIME_SHARDS', 16),
      /**
       * How often a verifier re-reads the signing key set (tokens.ts). At most 30 s, what a new key's maturity assumes
       * (KEY_SET_REFRESH_MS); more often only costs one small query (the tests' gateway that waits for it).
       */
      keySetRefreshMs: atMost('REALTIME_KEY_SET_REFRESH_MS', 30_000, 1000, 30_000),
      /** Publish quota per product per fixed window: only crossing burst + 2 x sustained x window is rejected. */
      quotaWindowSeconds: int('REALTIME_QUOTA_WINDOW_SECONDS', 10),
      quotaSustainedPerSecond: int('REALTIME_QUOTA_SUSTAINED', 50),
      quotaBurst: int('REALTIME_QUOTA_BURST', 100),
      /** Public-route requests per client IP per minute, counted apart from the publish quota. */
      ipRequestsPerMinute: int('PUBLIC_IP_RATE_LIMIT', 100),
      /** Largest decompressed body of a gzip-encoded POST /messages (the 256 KiB limit counts wire bytes). */
      maxDecompressedBytes: int('REALTIME_MAX_DECOMPRESSED_BYTES', 8 * 1024 * 1024),
      /** Default bucket for provisioned payload storage. */
      payloadBucket: str('REALTIME_PAYLOAD_BUCKET', 'realtime-payloads'),
      /**
       * Buckets a product may choose (comma-separated); the default bucket is always allowed. Products never name
       * arbitrary buckets: the platform's S3 credentials would otherwise reach any bucket, another tenant's included.
       */
      payloadBucketsAllowed: str('REALTIME_PAYLOAD_BUCKETS', '').split(',').map((b) => b.trim()).filter(Boolean),
      /**
       * How long an entry stays in a shard's fan-out stream (ms). Streams are trimmed by age only (XADD MINID), never by
       * length, so one product's traffic cannot trim entries another product's gateways have not read: a gateway that
       * is less than this far behind never loses continuity. docs/realtime-data-plane.md, "Budgets". Must be the same
       * on every process: every writer trims the shared streams by its own value, and the budget's time slices (a tenth
       * of it) are numbered by it, so mixed values keep entries only the shortest window and count budgets wrongly.
       */
      fanoutRetentionMs: int('REALTIME_FANOUT_RETENTION_MS', 60_000),
      /**
       * Bytes one product may append to one shard's fan-out stream within the retention window (publishes and client
       * events; entry overhead counted). Past it HTTP publish is 429 `fanout_budget_exceeded`, a client event `rate_limited`.
       */
      productFanoutMaxBytes: int('REALTIME_PRODUCT_FANOUT_MAX_BYTES', 32 * 1024 * 1024),
      /**
       * Bytes of history one product may keep on one shard (all its channels there, entry overhead counted). A publish
       * that would pass it, after its own channel's trimming, is 429 `history_budget_exceeded`.
       */
      productHistoryMaxBytes: int('REALTIME_PRODUCT_HISTORY_MAX_BYTES', 64 * 1024 * 1024),
      /** Client events one product may send per second across all its connections and gateways; beyond it `rate_limited`. */
      productClientEventsPerSecond: int('REALTIME_PRODUCT_CLIENT_EVENTS_PER_SECOND', 200),
      /** Most payload bytes one history reply carries (built inside Redis, so it must stay bounded). */
      historyMaxReplyBytes: int('REALTIME_HISTORY_MAX_REPLY_BYTES', 16 * 1024 * 1024),
      /** Most payload bytes one archive page carries (GET /channels/{channel}/archive, realtime_archive_read); at least one entry. */
      archiveMaxReplyBytes: int('REALTIME_ARCHIVE_MAX_REPLY_BYTES', 4 * 1024 * 1024),
      /**
       * Most bytes a gateway holds for one connection that does not read fast enough; past it the connection is closed
       * with 4200 (slow consumer) and recovers through its cursor, rather than silently missing messages.
       */
      gatewayMaxBufferedBytes: int('GATEWAY_MAX_BUFFERED_BYTES', 4 * 1024 * 1024),
      /** How long a new WebSocket connection has to send its `connect` frame before it is closed with 4001. */
      gatewayConnectTimeoutMs: int('GATEWAY_CONNECT_TIMEOUT_MS', 5000),
      /**
       * Abuse bounds, each per gateway process (gateway/limits.ts): WebSocket upgrades and `connect` frames per client
       * IP per minute (the IP as on the public routes: TRUST_PROXY takes the last X-Forwarded-For), beyond which an
       * upgrade is 429 with Retry-After and a `connect` frame closes the socket 4300; open connections per product and
       * token subject, beyond which a `connect` closes 4300.
       */
      gatewayIpUpgradesPerMinute: int('GATEWAY_IP_UPGRADES_PER_MINUTE', 300),
      gatewayIpConnectsPerMinute: int('GATEWAY_IP_CONNECTS_PER_MINUTE', 300),
      gatewayMaxConnectionsPerSubject: int('GATEWAY_MAX_CONNECTIONS_PER_SUBJECT', 100),
      /**
       * Client addresses (IPv6 by /64) each per-IP count holds in one minute, so a flood of addresses cannot grow it
       * without bound (about 100 bytes each); past it, an address not yet counted that minute is refused as if over its
       * limit, until the minute rolls (gateway/limits.ts says why not forget the counts instead).
       */
      gatewayIpTrackedMax: int('GATEWAY_IP_TRACKED_MAX', 100_000),
      /**
       * Reads that cost Redis work (`history`, `subscribe` with a cursor, `presence.read`): a token bucket per connection
       * of this many a second, this burst (a reconnect recovering many channels at once fits); beyond it `rate_limited`.
       */
      gatewayReadsPerSecond: int('GATEWAY_READS_PER_SECOND', 10),
      gatewayReadBurst: int('GATEWAY_READ_BURST', 50),
      /**
       * Presence writes (`presence.enter`, `presence.update`): a token bucket per connection of this many a second, this
       * burst (entering a few rosters at connect fits); beyond it `rate_limited`, the connection stays. A join also
       * spends the product's fan-out byte budget (REALTIME_PRODUCT_FANOUT_MAX_BYTES). `presence.leave` takes no token.
       */
      gatewayPresenceWritesPerSecond: int('GATEWAY_PRESENCE_WRITES_PER_SECOND', 2),
      gatewayPresenceWriteBurst: int('GATEWAY_PRESENCE_WRITE_BURST', 10),
      /** How often a gateway takes expired presence entries off its subscribed channels' rosters (emitting their leaves). */
      gatewayPresenceSweepMs: int('GATEWAY_PRESENCE_SWEEP_MS', 5000),
      /** How often public workers and gateways write the usage they counted (analytics entities realtime_usage, realtime_connections). */
      usageFlushMs: int('REALTIME_USAGE_FLUSH_MS', 5000),
      /**
       * How often a gateway asks PostgreSQL whether the API keys of its live connections were revoked, and closes
       * those of a revoked key 4001 (besides at once on an invalidation message, and each time its subscription returns).
       */
      gatewayRevocationSweepMs: int('GATEWAY_REVOCATION_SWEEP_MS', 10_000),
      /**
       * Webhook de-flapping (docs/webhooks.md, "Realtime events"): how long an identity's last presence entry, or a
       * channel's last subscriber, must stay gone before `presence.member_removed` / `channel.vacated`; a return within
       * it cancels both the removal and the new add.
       */
      hookGraceMs: int('WEBHOOK_PRESENCE_GRACE_MS', 5000),
      /** Longest a webhook event waits in its shard's `rt:{sN}:hooks` stream for the webhooks process (acknowledged ones are trimmed sooner). */
      hookRetentionMs: int('REALTIME_HOOK_RETENTION_MS', 3_600_000),
      /**
       * Webhook event bytes one product may append to one shard's hooks stream within that retention; past it adds are
       * dropped (and later their removals), never a removal or vacate whose add went out.
       */
      productHookMaxBytes: int('REALTIME_PRODUCT_HOOK_MAX_BYTES', 16 * 1024 * 1024),
      /** How long a gateway's claim "I have subscribers on this channel" lives unrefreshed (refreshed at half): occupancy survives no dead gateway longer. */
      gatewayOccupancyLeaseMs: int('GATEWAY_OCCUPANCY_LEASE_MS', 30_000),
    },
    /** The archiver (services/archiver): fan-out streams into the Realtime archive. docs/realtime-data-plane.md, "Archive". */
    archiver: {
      /** This archiver's consumer name in each shard's group `archiver`; stable across restarts, so it reads its own pending entries again. */
      consumer: str('ARCHIVER_CONSUMER', `archiver-${hostname()}`),
      /** Most entries read from one shard per round. */
      batch: int('ARCHIVER_BATCH', 1000),
      /** Most payload bytes one INSERT carries: a round's entries are written in as many statements as this takes (at least one row each). */
      batchBytes: int('ARCHIVER_BATCH_BYTES', 4 * 1024 * 1024),
      /** Pause after a round that found nothing on any shard. */
      idleMs: int('ARCHIVER_IDLE_MS', 200),
      /** Entries pending this long with another consumer (one that died) are claimed (XAUTOCLAIM). */
      claimIdleMs: int('ARCHIVER_CLAIM_IDLE_MS', 30_000),
      /** How often the sweeper deletes expired rows, drops expired month partitions and creates the coming ones. */
      sweepMs: int('ARCHIVER_SWEEP_MS', 3_600_000),
      /**
       * A pause between a batch's commit and its acknowledgement (default 0). Only for tests: it holds open the window
       * where a killed archiver leaves committed entries pending, which the next one must not archive twice.
       */
      ackDelayMs: int('ARCHIVER_ACK_DELAY_MS', 0),
      /** Rows one sweeper DELETE removes (short transactions). */
      sweepBatch: int('ARCHIVER_SWEEP_BATCH', 5000),
    },
    /** The public capture route (services/public/capture, docs/analytics.md "Capture from browsers"). */
    capture: {
      /** Events one publishable key may capture per second, across every public worker; beyond: 429 with Retry-After. */
      keyEventsPerSecond: atMost('CAPTURE_KEY_EVENTS_PER_SECOND', 10_000, 1, 10_000_000),
      /** Capture requests per client IP per minute (its own window: page analytics never spend PUBLIC_IP_RATE_LIMIT). */
      ipRequestsPerMinute: atMost('CAPTURE_IP_RATE_LIMIT', 600, 1, 10_000_000),
    },
    analytics: {
      /** Longest an analytics query (metric query, funnel) may run; past it the request is 422 query_timeout. */
      queryTimeoutMs: int('ANALYTICS_QUERY_TIMEOUT_MS', 10_000),
      /** Most rows one query answers (Cube's default); more are cut off and the answer says `truncated`. */
      maxRows: int('ANALYTICS_MAX_ROWS', 10_000),
      /** Most time buckets one query spans. */
      maxBuckets: int('ANALYTICS_MAX_BUCKETS', 1_000),
      /**
       * Most metric queries and funnels one product runs at once on one API worker (its analytics pool holds 4
       * connections); more are 429 with Retry-After, so one product's dashboards cannot starve another's.
       */
      maxConcurrentPerProduct: int('ANALYTICS_MAX_CONCURRENT_PER_PRODUCT', 2),
      /**
       * Most metric queries, funnels and insight runs the products of one organization run at once on one API worker:
       * an organization with several products cannot take every connection of the analytics pool. More: 429.
       */
      maxConcurrentPerOrganization: int('ANALYTICS_MAX_CONCURRENT_PER_ORGANIZATION', 3),
      /**
       * Most analytics operations one API worker runs at once, all organizations together (its analytics pool holds 4
       * connections): one person with several organizations cannot queue the others behind their queries. More: 429
       * with scope "worker".
       */
      maxConcurrentPerWorker: int('ANALYTICS_MAX_CONCURRENT_PER_WORKER', 4),
      /** Most property sets (rollups grouped by the property keys of saved insights) one product has. docs/analytics.md, "Rollups". */
      maxRollupSets: atMost('ANALYTICS_MAX_ROLLUP_SETS', 10, 0, 100),
      /** Most value combinations of a property set in one hour; a set that passes it is dropped and its queries read raw events. */
      rollupMaxValues: atMost('ANALYTICS_ROLLUP_MAX_VALUES', 1000, 10, 100_000),
      /**
       * A PostgreSQL streaming replica (hot standby) of DATABASE_URL that metric queries, funnels and insight runs read
       * from (services/api/analytics/reads.ts); null: they read the primary. Writes, and reads that must see a write
       * just made (insights and dashboards), always go to the primary. docs/analytics.md, "Reads on a replica".
       */
      replicaUrl: str('ANALYTICS_DATABASE_URL', '') || null,
      /**
       * How far behind the primary the replica may be and still answer, in ms (0 to 300 000): an answer from it counts
       * every write acknowledged up to this long before the request, and says from when (`as_of`). Further behind,
       * the primary answers. 0: only a replica that has replayed everything the primary had at the request answers.
       */
      replicaMaxLagMs: atMost('ANALYTICS_REPLICA_MAX_LAG_MS', 5000, 0, 300_000),
      /**
       * How long a funnel insight's kept result answers its runs, in ms (1 s to 1 day): older, a run computes it again.
       * docs/analytics.md, "Kept funnel results".
       */
      funnelResultTtlMs: atMost('ANALYTICS_FUNNEL_RESULT_TTL_MS', 900_000, 1000, 86_400_000),
      /** Pause between two rounds of the background refresh of dashboard funnels, in ms (100 ms to 1 h). */
      funnelRefreshIntervalMs: atMost('ANALYTICS_FUNNEL_REFRESH_INTERVAL_MS', 30_000, 100, 3_600_000),
      /** Most funnel insights one background round recomputes (at most one per product); 0: no background refresh. */
      funnelRefreshBatch: atMost('ANALYTICS_FUNNEL_REFRESH_BATCH', 20, 0, 1000),
    },
    /** The aggregator (services/aggregator): event partitions and rollups. docs/analytics.md, "Partitions" and "Rollups". */
    aggregator: {
      /** Pause between two rounds when the last one found nothing to do. */
      idleMs: atMost('AGGREGATOR_IDLE_MS', 1000, 10, 60_000),
      /** Most event ids one rollup step covers (one transaction). */
      chunkIds: atMost('AGGREGATOR_CHUNK_IDS', 200_000, 1000, 10_000_000),
      /** Longest a rollup step waits for the captures in flight (never holding new ones back), and a partition change for its lock. */
      lockTimeoutMs: atMost('AGGREGATOR_LOCK_TIMEOUT_MS', 1000, 10, 10_000),
      /** Months of partitions kept ready ahead of the current one. */
      partitionsAhead: atMost('ANALYTICS_PARTITIONS_AHEAD', 3, 1, 24),
      /** Whole months of events kept before the current one; older partitions are dropped. 0: keep every event. */
      retentionMonths: atMost('ANALYTICS_RETENTION_MONTHS', 0, 0, 1200),
      /** Events a legacy upgrade moves into the partitions per transaction. */
      moveBatch: atMost('AGGREGATOR_MOVE_BATCH', 10_000, 100, 1_000_000),
    },
    webhooks: {
      /**
       * Lets webhook URLs be plain http and point at loopback or private addresses (development and the tests, which
       * receive on 127.0.0.1). Off in production: a URL must be https and every address of its host public.
       */
      allowPrivateUrls: bool('WEBHOOK_ALLOW_PRIVATE_URLS', false),
      /** Longest the resolution of a webhook URL's host may take at create or update; past it the URL is refused. */
      dnsTimeoutMs: int('WEBHOOK_DNS_TIMEOUT_MS', 3000),
      /**
       * DNS servers webhook hosts are resolved through (comma-separated `ip` or `ip:port`), at create, update and every
       * attempt alike; empty: the system resolver (hosts file included).
       */
      dnsServers: str('WEBHOOK_DNS_SERVERS', '').split(',').map((s) => s.trim()).filter(Boolean),
      /**
       * Delays between a delivery's attempts (`5s,5m,30m,2h`): Svix's and Resend's schedule unless set (the tests
       * shorten it). After the last one the delivery is failed.
       */
      retryDelaysMs: process.env.WEBHOOK_RETRY_SCHEDULE
        ? parseRetryDelays(process.env.WEBHOOK_RETRY_SCHEDULE, 'WEBHOOK_RETRY_SCHEDULE') : DEFAULT_RETRY_DELAYS_MS,
      /** Longest one attempt may take: resolving, connecting, sending and reading the answer. */
      timeoutMs: int('WEBHOOK_TIMEOUT_MS', 15_000),
      /** How long a webhooks process holds a claimed delivery; past it another process claims it again (one that died). */
      leaseMs: int('WEBHOOK_LEASE_MS', 60_000),
      /** How often an idle webhooks process looks for due deliveries. */
      pollMs: int('WEBHOOK_POLL_MS', 250),
      /** Most attempts one webhooks process runs at once. */
      concurrency: int('WEBHOOK_CONCURRENCY', 64),
      /** Most attempts in flight to one endpoint, across every webhooks process. */
      endpointConcurrency: int('WEBHOOK_ENDPOINT_CONCURRENCY', 4),
      /** Most attempts in flight to one product's endpoints together (all areas), across every webhooks process. */
      productConcurrency: int('WEBHOOK_PRODUCT_CONCURRENCY', 16),
      /** Most attempts in flight to one organization's products together, across every webhooks process. */
      organizationConcurrency: int('WEBHOOK_ORGANIZATION_CONCURRENCY', 32),
      /**
       * Most deliveries pending to one endpoint: past it the hourly sweep fails the oldest (listed, replayable), so one
       * tenant's outbox stays bounded (this, plus an hour of its events) behind a receiver that is down.
       */
      maxPendingPerEndpoint: int('WEBHOOK_MAX_PENDING_PER_ENDPOINT', 10_000),
      /**
       * Days a webhook message, its deliveries and their attempts are kept once none is pending (then deleted by the
       * webhooks processes, hourly); what is still pending is kept until it is not.
       */
      retentionDays: int('WEBHOOK_RETENTION_DAYS', 30),
      /** An endpoint whose every attempt has failed for this long is disabled (5 days, as Svix). */
      disableAfterMs: int('WEBHOOK_DISABLE_AFTER_MS', 5 * 24 * 3_600_000),
      /** Health endpoints of the webhooks processes (reusePort: any answers). */
      port: int('WEBHOOKS_PORT', 4500),
      /**
       * This process's consumer name in the group `webhooks` that reads the Realtime events (the shards' hooks streams);
       * stable across restarts, so it reads its own pending entries again at once. Processes sharing a name (several on
       * one host) are safe: an event is recorded once per stream entry (its dedupe key), however often it is read.
       */
      consumer: str('WEBHOOKS_CONSUMER', `webhooks-${hostname()}`),
    },
    mail: {
      /**
       * Marks a registered domain verified without looking up DNS (machines without DNS: scripts/up and the tests turn
       * it on). Never on in production: only verified domains send, and verification is what proves ownership.
       */
      devVerify: bool('MAIL_DEV_VERIFY', false),
      /** DNS servers for domain checks (comma-separated `ip` or `ip:port`); empty: the system's resolvers. */
      dnsServers: str('MAIL_DNS_SERVERS', '').split(',').map((s) => s.trim()).filter(Boolean),
      /** How long one DNS lookup of a domain check may take before its record counts as not found. */
      dnsTimeoutMs: int('MAIL_DNS_TIMEOUT_MS', 5000),
      /** The DKIM selector of new domains: the record is `<selector>._domainkey.<domain>`. */
      dkimSelector: str('MAIL_DKIM_SELECTOR', 'platform'),
      /** The SPF include of the record a domain publishes (`v=spf1 include:<this> ~all`). */
      spfInclude: str('MAIL_SPF_INCLUDE', 'spf.mail.localhost'),
      /** Where the mailer hands every email: `smtp://[user:pass@]host:port` (plain, or STARTTLS when offered). */
      smtpUrl: str('SMTP_URL', `smtp://127.0.0.1:${LOCAL_PORTS.smtp}`),
      /** Emails a product may queue per second (POST /emails); beyond it 429 with Retry-After. */
      sendRatePerSecond: int('MAIL_SEND_RATE_PER_SECOND', 10),
      /** Delivery attempts before an email that keeps failing temporarily is `failed`. */
      maxAttempts: int('MAIL_MAX_ATTEMPTS', 8),
      /** The wait after the first temporary failure; it doubles after each (30 s, 1 min, 2 min, ... up to the max). */
      retryBaseMs: int('MAIL_RETRY_BASE_MS', 30_000),
      retryMaxMs: int('MAIL_RETRY_MAX_MS', 3_600_000),
      /** How long a mailer holds a claimed email; past it another mailer may take it over (a mailer that died). */
      leaseMs: int('MAIL_LEASE_MS', 60_000),
      /** How often an idle mailer looks for due emails, and how many it claims at once. */
      pollMs: int('MAILER_POLL_MS', 250),
      batchSize: int('MAILER_BATCH', 10),
      /** Longest one SMTP conversation may take (connect, greeting, each reply). */
      smtpTimeoutMs: int('MAILER_SMTP_TIMEOUT_MS', 30_000),
      /** Most custom headers one email may carry (`headers` of POST /emails); more is a 400 naming /body/headers. */
      maxHeaders: int('MAIL_MAX_HEADERS', 50),
      /** Most failing fields a 400 of POST /emails lists (its message says how many more): bounds the reply's size. */
      maxListedErrors: Math.max(1, int('MAIL_MAX_LISTED_ERRORS', 20)),
    },
  }
}

/**
 * Settings that are never safe together, refused when any process starts (every process reads this module): a clear
 * error and a non-zero exit, rather than a deployment that quietly does the unsafe thing.
 */
function refuseUnsafe(config: ReturnType<typeof loadConfig>) {
  const refusal = devVerifyRefusal(config.environment, config.mail.devVerify) ??
    privateWebhooksRefusal(config.environment, config.webhooks.allowPrivateUrls)
  if (refusal) throw new Error(refusal)
  return config
}

/**
 * The environments a development-only switch may run in, compared trimmed and in lower case. An allow-list, not a
 * deny-list: PLATFORM_ENV is a free name (product keys are scoped to it), and `Production`, ` production`, `prod` or
 * `staging` are all deployments where tenants must not get what these switches give.
 */
export const DEVELOPMENT_ENVIRONMENTS = ['development', 'dev', 'test', 'local']

/** Why development-only switch `variable` may not be on in `environment` (`risk`: what a product could then do). */
function developmentOnlyRefusal(variable: string, environment: string, on: boolean, risk: string): string | undefined {
  if (!on || DEVELOPMENT_ENVIRONMENTS.includes(environment.trim().toLowerCase())) return undefined
  return `${variable} is refused when PLATFORM_ENV=${JSON.stringify(environment)}: it is allowed only when PLATFORM_ENV is ` +
    `${DEVELOPMENT_ENVIRONMENTS.join(', ')} (any case), since ${risk}. Unset ${variable} (or set it to 0).`
}

/** Why MAIL_DEV_VERIFY may not be on in `environment`, or undefined when it may (or is off). */
export const devVerifyRefusal = (environment: string, devVerify: boolean) => developmentOnlyRefusal('MAIL_DEV_VERIFY', environment,
  devVerify, 'it marks Mail domains verified without DNS and a product could then send as any domain')

/** Why WEBHOOK_ALLOW_PRIVATE_URLS may not be on in `environment`, or undefined when it may (or is off). */
export const privateWebhooksRefusal = (environment: string, allow: boolean) => developmentOnlyRefusal('WEBHOOK_ALLOW_PRIVATE_URLS',
  environment, allow, 'a product could then point webhooks at plain http and at loopback and private addresses, the platform\'s own network')

export type Config = ReturnType<typeof loadConfig>
export const config: Config = refuseUnsafe(loadConfig())
