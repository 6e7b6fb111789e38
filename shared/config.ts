// Typed configuration, read once from the environment when a process starts; every variable has a working local default.
// The variables are declared as data, per area, in shared/config/areas/ (type, default, bounds, meaning); this module
// arranges them into the `config` object every process reads. docs/configuration.md, the reference the README links, is
// generated from the same declarations (`bun run scripts/config-docs.ts`) and a unit test keeps the two equal.
import * as areas from './config/areas'
import { readConfiguration, type Environment } from './config/read'
import { refusals } from './config/rules'
import type { Values } from './config/variable'
import { log } from './log'

export { LOCAL_PORTS } from './config/local-ports'
export { DEVELOPMENT_ENVIRONMENTS, devVerifyRefusal, privateWebhooksRefusal } from './config/rules'

// Each area's variables by their short names.
const server = areas.server.variables
const database = areas.database.variables
const redis = areas.redis.variables
const storage = areas.storage.variables
const secrets = areas.secrets.variables
const caches = areas.caches.variables
const limits = areas.limits.variables
const metrics = areas.metrics.variables
const realtime = areas.realtime.variables
const gateway = areas.gateway.variables
const archiver = areas.archiver.variables
const analytics = areas.analytics.variables
const aggregator = areas.aggregator.variables
const webhooks = areas.webhooks.variables
const mail = areas.mail.variables

/** The config object's shape, each leaf the variable it is read from. */
export const declarations = {
  environment: server.environment,
  databaseUrl: database.databaseUrl,
  redisUrl: redis.redisUrl,
  s3Url: storage.s3Url,
  s3Region: storage.s3Region,
  apiPort: server.apiPort,
  publicPort: server.publicPort,
  gatewayPort: server.gatewayPort,
  mailerPort: server.mailerPort,
  apiUrl: server.apiUrl,
  publicUrl: server.publicUrl,
  gatewayUrl: server.gatewayUrl,
  developerDomain: server.developerDomain,
  extraAllowedOrigins: server.extraAllowedOrigins,
  trustProxy: server.trustProxy,
  apiBodyLimit: server.apiBodyLimit,
  sessionTtlSeconds: server.sessionTtlSeconds,
  authRequestsPerMinute: limits.authRequestsPerMinute,
  logRequests: server.logRequests,
  /** Each worker's Prometheus listener (shared/metrics/serve.ts, docs/metrics.md). */
  metrics: {
    port: metrics.port,
    portOffset: metrics.portOffset,
    host: metrics.host,
    token: metrics.token,
    countCacheMs: metrics.countCacheMs,
  },
  /** Platform API requests per minute by operation class (services/api/limits.ts), per credential and per organization. */
  platformRates: {
    credential: {
      read: limits.credentialRead,
      write: limits.credentialWrite,
      expensive: limits.credentialExpensive,
      analytics: limits.credentialAnalytics,
    },
    organization: {
      read: limits.organizationRead,
      write: limits.organizationWrite,
      expensive: limits.organizationExpensive,
      analytics: limits.organizationAnalytics,
    },
  },
  /** Most items of each kind one product holds (shared/db/ceiling.ts): a create beyond it is 409 limit_reached. */
  ceilings: {
    mailDomains: limits.mailDomains,
    mailTemplates: limits.mailTemplates,
    mailKeys: limits.mailKeys,
    publicKeys: limits.publicKeys,
    captureKeys: limits.captureKeys,
    platformKeys: limits.platformKeys,
    namespaces: limits.namespaces,
    grants: limits.grants,
    dashboards: limits.dashboards,
    insights: limits.insights,
    webhookEndpoints: limits.webhookEndpoints,
    organizationProducts: limits.organizationProducts,
  },
  keysCreatedPerDay: limits.keysCreatedPerDay,
  developmentErrors: server.developmentErrors,
  db: {
    timeoutMs: database.timeoutMs,
    coolDownMs: database.coolDownMs,
  },
  /** Master keys for secrets at rest (shared/secrets.ts), validated where used: processes that hold no secrets need none. */
  secretKeys: {
    current: secrets.current,
    previous: secrets.previous,
  },
  redis: {
    commandTimeoutMs: redis.commandTimeoutMs,
  },
  /** Per-worker caches dropped by invalidation messages (shared/cache/): keys of every area, policies, revocations. */
  cache: {
    ttlMs: caches.ttlMs,
    maxEntries: caches.maxEntries,
  },
  realtime: {
    shards: realtime.shards,
    keySetRefreshMs: realtime.keySetRefreshMs,
    quotaWindowSeconds: realtime.quotaWindowSeconds,
    quotaSustainedPerSecond: realtime.quotaSustainedPerSecond,
    quotaBurst: realtime.quotaBurst,
    ipRequestsPerMinute: realtime.ipRequestsPerMinute,
    maxDecompressedBytes: realtime.maxDecompressedBytes,
    payloadBucket: realtime.payloadBucket,
    payloadBucketsAllowed: realtime.payloadBucketsAllowed,
    fanoutRetentionMs: realtime.fanoutRetentionMs,
    productFanoutMaxBytes: realtime.productFanoutMaxBytes,
    productHistoryMaxBytes: realtime.productHistoryMaxBytes,
    productClientEventsPerSecond: realtime.productClientEventsPerSecond,
    historyMaxReplyBytes: realtime.historyMaxReplyBytes,
    archiveMaxReplyBytes: realtime.archiveMaxReplyBytes,
    gatewayMaxBufferedBytes: gateway.maxBufferedBytes,
    gatewayConnectTimeoutMs: gateway.connectTimeoutMs,
    gatewayIpUpgradesPerMinute: gateway.ipUpgradesPerMinute,
    gatewayIpConnectsPerMinute: gateway.ipConnectsPerMinute,
    gatewayMaxConnectionsPerSubject: gateway.maxConnectionsPerSubject,
    gatewayIpTrackedMax: gateway.ipTrackedMax,
    gatewayReadsPerSecond: gateway.readsPerSecond,
    gatewayReadBurst: gateway.readBurst,
    gatewayPresenceWritesPerSecond: gateway.presenceWritesPerSecond,
    gatewayPresenceWriteBurst: gateway.presenceWriteBurst,
    gatewayPresenceSweepMs: gateway.presenceSweepMs,
    usageFlushMs: realtime.usageFlushMs,
    gatewayRevocationSweepMs: gateway.revocationSweepMs,
    hookGraceMs: realtime.hookGraceMs,
    hookRetentionMs: realtime.hookRetentionMs,
    productHookMaxBytes: realtime.productHookMaxBytes,
    gatewayOccupancyLeaseMs: gateway.occupancyLeaseMs,
  },
  /** The archiver (services/archiver): fan-out streams into the Realtime archive. */
  archiver: {
    consumer: archiver.consumer,
    batch: archiver.batch,
    batchBytes: archiver.batchBytes,
    idleMs: archiver.idleMs,
    claimIdleMs: archiver.claimIdleMs,
    sweepMs: archiver.sweepMs,
    ackDelayMs: archiver.ackDelayMs,
    sweepBatch: archiver.sweepBatch,
  },
  /** The public capture route (services/public/capture, docs/analytics.md "Capture from browsers"). */
  capture: {
    keyEventsPerSecond: analytics.keyEventsPerSecond,
    ipRequestsPerMinute: analytics.captureIpRequestsPerMinute,
  },
  analytics: {
    queryTimeoutMs: analytics.queryTimeoutMs,
    maxRows: analytics.maxRows,
    maxBuckets: analytics.maxBuckets,
    maxConcurrentPerProduct: analytics.maxConcurrentPerProduct,
    maxConcurrentPerOrganization: analytics.maxConcurrentPerOrganization,
    maxConcurrentPerWorker: analytics.maxConcurrentPerWorker,
    maxRollupSets: analytics.maxRollupSets,
    rollupMaxValues: analytics.rollupMaxValues,
    replicaUrl: analytics.replicaUrl,
    replicaMaxLagMs: analytics.replicaMaxLagMs,
    funnelResultTtlMs: analytics.funnelResultTtlMs,
    funnelRefreshIntervalMs: analytics.funnelRefreshIntervalMs,
    funnelRefreshBatch: analytics.funnelRefreshBatch,
  },
  /** The aggregator (services/aggregator): event partitions and rollups. */
  aggregator: {
    idleMs: aggregator.idleMs,
    chunkIds: aggregator.chunkIds,
    lockTimeoutMs: aggregator.lockTimeoutMs,
    partitionsAhead: aggregator.partitionsAhead,
    retentionMonths: aggregator.retentionMonths,
    moveBatch: aggregator.moveBatch,
  },
  webhooks: {
    allowPrivateUrls: webhooks.allowPrivateUrls,
    dnsTimeoutMs: webhooks.dnsTimeoutMs,
    dnsServers: webhooks.dnsServers,
    retryDelaysMs: webhooks.retryDelaysMs,
    timeoutMs: webhooks.timeoutMs,
    leaseMs: webhooks.leaseMs,
    pollMs: webhooks.pollMs,
    concurrency: webhooks.concurrency,
    endpointConcurrency: webhooks.endpointConcurrency,
    productConcurrency: webhooks.productConcurrency,
    organizationConcurrency: webhooks.organizationConcurrency,
    maxPendingPerEndpoint: webhooks.maxPendingPerEndpoint,
    retentionDays: webhooks.retentionDays,
    disableAfterMs: webhooks.disableAfterMs,
    port: server.webhooksPort,
    consumer: webhooks.consumer,
  },
  mail: {
    devVerify: mail.devVerify,
    dnsServers: mail.dnsServers,
    dnsTimeoutMs: mail.dnsTimeoutMs,
    dkimSelector: mail.dkimSelector,
    spfInclude: mail.spfInclude,
    smtpUrl: mail.smtpUrl,
    sendRatePerSecond: mail.sendRatePerSecond,
    maxAttempts: mail.maxAttempts,
    retryBaseMs: mail.retryBaseMs,
    retryMaxMs: mail.retryMaxMs,
    leaseMs: mail.leaseMs,
    pollMs: mail.pollMs,
    batchSize: mail.batchSize,
    smtpTimeoutMs: mail.smtpTimeoutMs,
    maxHeaders: mail.maxHeaders,
    maxListedErrors: mail.maxListedErrors,
  },
}

export type Config = Values<typeof declarations>

/**
 * Reads the configuration from `env`: the values, and a warning per former name in use. Throws one Error naming every
 * refused variable and its rule, or the settings that are never safe together (shared/config/rules.ts).
 */
export function loadConfig(env: Environment): { config: Config; warnings: string[] } {
  const { values, warnings } = readConfiguration(declarations, env)
  const refused = refusals(values)
  if (refused.length) throw new Error(refused.join('\n'))
  return { config: values, warnings }
}

const loaded = loadConfig(process.env)
// Logged once per process: this module is evaluated once, at start.
for (const warning of loaded.warnings) log('warn', warning)
export const config: Config = loaded.config
