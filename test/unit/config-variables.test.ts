// The configuration's declarations read as an operator sees them: a bad value of each type is refused with a message
// naming the variable and the rule, every integer's bounds hold at both ends, the defaults are the platform's
// long-standing ones, and a renamed variable's old name still works with a warning naming the new one. Pure: no
// process is started and no service is needed.
import { describe, expect, test } from 'bun:test'
import { hostname } from 'node:os'
import { declarations, loadConfig } from '../../shared/config'
import { readConfiguration, variablesOf } from '../../shared/config/read'
import { secret, Variable, type Declarations } from '../../shared/config/variable'

const read = (env: Record<string, string>) => readConfiguration(declarations, env)
const refusal = (env: Record<string, string>) => {
  try {
    read(env)
  } catch (error) {
    return (error as Error).message
  }
  return 'not refused'
}

/** The value `variable` reads to when set to `text`, found where the config object holds it. */
function valueRead(variable: Variable<unknown>, text: string): unknown {
  const find = (tree: Declarations, values: Record<string, unknown>): unknown[] => Object.entries(tree).flatMap(([key, entry]) =>
    entry === variable ? [values[key]] : entry instanceof Variable ? [] : find(entry, values[key] as Record<string, unknown>))
  return find(declarations, read({ [variable.name]: text }).values)[0]
}

// The values every process ran with when no variable was set, before the declarations existed (from shared/config.ts
// as it was): the move to declarations must not change one.
const TODAYS_DEFAULTS = {
  environment: 'development', databaseUrl: 'postgres://postgres@127.0.0.1:55432/platform',
  redisUrl: 'redis://127.0.0.1:56379', s3Url: 'http://S3RVER:S3RVER@127.0.0.1:59000', s3Region: 'us-east-1',
  apiPort: 4100, publicPort: 4200, gatewayPort: 4300, mailerPort: 4400, apiUrl: 'http://127.0.0.1:4100',
  publicUrl: 'http://127.0.0.1:4200', gatewayUrl: 'ws://127.0.0.1:4300/connection/websocket',
  developerDomain: 'localhost', extraAllowedOrigins: [], trustProxy: false, apiBodyLimit: 1_048_576,
  sessionTtlSeconds: 2_592_000, authRequestsPerMinute: 20, logRequests: true,
  metrics: {
    port: 0, portOffset: 0, host: '127.0.0.1', token: '', countCacheMs: 5000,
  },
  platformRates: {
    credential: {
      read: 1200, write: 600, expensive: 30, analytics: 120,
    },
    organization: {
      read: 3000, write: 1200, expensive: 60, analytics: 300,
    },
  },
  ceilings: {
    mailDomains: 50, mailTemplates: 1000, mailKeys: 100, publicKeys: 100, captureKeys: 100, platformKeys: 100,
    namespaces: 200, grants: 1000, dashboards: 500, insights: 2000, webhookEndpoints: 20, organizationProducts: 100,
  },
  keysCreatedPerDay: 1000, developmentErrors: false,
  db: {
    timeoutMs: 2000, coolDownMs: 1000,
  },
  secretKeys: {
    current: null, previous: [],
  },
  redis: {
    commandTimeoutMs: 1000,
  },
  cache: {
    ttlMs: 5000, maxEntries: 10_000,
  },
  realtime: {
    shards: 16, keySetRefreshMs: 30_000, quotaWindowSeconds: 10, quotaSustainedPerSecond: 50, quotaBurst: 100,
    ipRequestsPerMinute: 100, maxDecompressedBytes: 8_388_608, payloadBucket: 'realtime-payloads',
    payloadBucketsAllowed: [], fanoutRetentionMs: 60_000, productFanoutMaxBytes: 33_554_432,
    productHistoryMaxBytes: 67_108_864, productClientEventsPerSecond: 200, historyMaxReplyBytes: 16_777_216,
    archiveMaxReplyBytes: 4_194_304, gatewayMaxBufferedBytes: 4_194_304, gatewayConnectTimeoutMs: 5000,
    gatewayIpUpgradesPerMinute: 300, gatewayIpConnectsPerMinute: 300, gatewayMaxConnectionsPerSubject: 100,
    gatewayIpTrackedMax: 100_000, gatewayReadsPerSecond: 10, gatewayReadBurst: 50, gatewayPresenceWritesPerSecond: 2,
    gatewayPresenceWriteBurst: 10, gatewayPresenceSweepMs: 5000, usageFlushMs: 5000,
    gatewayRevocationSweepMs: 10_000, hookGraceMs: 5000, hookRetentionMs: 3_600_000, productHookMaxBytes: 16_777_216,
    gatewayOccupancyLeaseMs: 30_000,
  },
  archiver: {
    consumer: `archiver-${hostname()}`, batch: 1000, batchBytes: 4_194_304, idleMs: 200, claimIdleMs: 30_000,
    sweepMs: 3_600_000, ackDelayMs: 0, sweepBatch: 5000,
  },
  capture: {
    keyEventsPerSecond: 10_000, ipRequestsPerMinute: 600,
  },
  analytics: {
    queryTimeoutMs: 10_000, maxRows: 10_000, maxBuckets: 1000, maxConcurrentPerProduct: 2,
    maxConcurrentPerOrganization: 3, maxConcurrentPerWorker: 4, maxRollupSets: 10, rollupMaxValues: 1000,
    replicaUrl: null, replicaMaxLagMs: 5000, funnelResultTtlMs: 900_000, funnelRefreshIntervalMs: 30_000,
    funnelRefreshBatch: 20,
  },
  aggregator: {
    idleMs: 1000, chunkIds: 200_000, lockTimeoutMs: 1000, partitionsAhead: 3, retentionMonths: 0, moveBatch: 10_000,
  },
  webhooks: {
    allowPrivateUrls: false, dnsTimeoutMs: 3000, dnsServers: [],
    retryDelaysMs: [5000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000], timeoutMs: 15_000,
    leaseMs: 60_000, pollMs: 250, concurrency: 64, endpointConcurrency: 4, productConcurrency: 16,
    organizationConcurrency: 32, maxPendingPerEndpoint: 10_000, retentionDays: 30, disableAfterMs: 432_000_000,
    port: 4500, consumer: `webhooks-${hostname()}`,
  },
  mail: {
    devVerify: false, dnsServers: [], dnsTimeoutMs: 5000, dkimSelector: 'platform', spfInclude: 'spf.mail.localhost',
    smtpUrl: 'smtp://127.0.0.1:59025', sendRatePerSecond: 10, maxAttempts: 8, retryBaseMs: 30_000,
    retryMaxMs: 3_600_000, leaseMs: 60_000, pollMs: 250, batchSize: 10, smtpTimeoutMs: 30_000, maxHeaders: 50,
    maxListedErrors: 20,
  },
}

describe('a bad value of each type stops the configuration, naming the variable and the rule', () => {
  test('integers: not plain digits, or outside the bounds', () => {
    for (const value of ['abc', '1.5', '1e3', '0x10', '-1', '99', '600001', '5 s']) {
      expect(refusal({ CACHE_TTL_MS: value })).toBe(`Configuration refused:\nCACHE_TTL_MS must be an integer from 100 to 600000, got "${value}"`)
    }
    expect(read({ CACHE_TTL_MS: ' 750 ' }).values.cache.ttlMs).toBe(750)
  })

  test('switches: only 1, true, 0 or false (any case)', () => {
    for (const value of ['yes', 'on', 'off', '2']) {
      expect(refusal({ LOG_REQUESTS: value })).toBe(`Configuration refused:\nLOG_REQUESTS must be 1, true, 0 or false, got "${value}"`)
    }
    expect(read({ LOG_REQUESTS: 'TRUE', TRUST_PROXY: '1' }).values).toMatchObject({ logRequests: true, trustProxy: true })
    expect(read({ LOG_REQUESTS: 'False', TRUST_PROXY: '0' }).values).toMatchObject({ logRequests: false, trustProxy: false })
  })

  test('URLs: the scheme the variable names, the password never repeated', () => {
    const message = refusal({ DATABASE_URL: 'mysql://app:hunter2@db.internal/platform' })
    expect(message).toBe('Configuration refused:\nDATABASE_URL must be a postgres:// or postgresql:// URL, got "mysql://app:***@db.internal/platform"')
    expect(refusal({ SMTP_URL: '127.0.0.1:25' })).toContain('SMTP_URL must be an smtp:// or smtps:// URL, got "127.0.0.1:25"')
    expect(refusal({ ANALYTICS_DATABASE_URL: 'standby:5432' })).toContain('ANALYTICS_DATABASE_URL must be a postgres:// or postgresql:// URL')
    expect(read({ REDIS_URL: 'redis+sentinel://:pw@10.0.0.1:26379/main' }).values.redisUrl).toBe('redis+sentinel://:pw@10.0.0.1:26379/main')
  })

  test('text with a form, and lists: the item that breaks it', () => {
    expect(refusal({ MAIL_DKIM_SELECTOR: 'a.b' })).toContain('MAIL_DKIM_SELECTOR must be a DNS label (letters, digits and hyphens), got "a.b"')
    expect(refusal({ REALTIME_PAYLOAD_BUCKETS: 'media, Other_Bucket' })).toContain(
      'REALTIME_PAYLOAD_BUCKETS must be a comma-separated list, each item an S3 bucket name (3 to 63 lower-case letters, digits, dots and hyphens), got "Other_Bucket" in "media, Other_Bucket"')
    expect(refusal({ WEBHOOK_DNS_SERVERS: 'dns.google' })).toContain('WEBHOOK_DNS_SERVERS must be a comma-separated list, each item an IP address or ip:port, got "dns.google"')
    expect(read({ PUBLIC_EXTRA_ORIGINS: ' http://localhost:5173 ,, https://app.example.com' }).values.extraAllowedOrigins)
      .toEqual(['http://localhost:5173', 'https://app.example.com'])
    expect(read({ MAIL_DNS_SERVERS: '127.0.0.1:5353,::1,[::1]:53' }).values.mail.dnsServers).toEqual(['127.0.0.1:5353', '::1', '[::1]:53'])
  })

  test('a retry schedule: its own reader\'s message', () => {
    expect(refusal({ WEBHOOK_RETRY_SCHEDULE: '5s,soon' })).toContain('WEBHOOK_RETRY_SCHEDULE: "soon" is not a duration such as 500ms, 5s, 5m or 2h')
    expect(read({ WEBHOOK_RETRY_SCHEDULE: '50ms,2s' }).values.webhooks.retryDelaysMs).toEqual([50, 2000])
  })

  test('a secret is never repeated in a message', () => {
    const key = secret('SOME_KEY', { rule: '32 bytes', unset: null, description: 'a key' })
    expect(key.refuse('hunter2', 'SOME_KEY').message).toBe('SOME_KEY must be 32 bytes, got a value of 7 characters')
  })

  test('every refused value is listed at once, one line each', () => {
    expect(refusal({ API_PORT: '0', LOG_REQUESTS: 'yes', MAILER_BATCH: '1001' }).split('\n')).toEqual([
      'Configuration refused:',
      'API_PORT must be an integer from 1 to 65535, got "0"',
      'LOG_REQUESTS must be 1, true, 0 or false, got "yes"',
      'MAILER_BATCH must be an integer from 1 to 1000, got "1001"',
    ])
  })
})

test('free text is kept as set, spaces and all (PLATFORM_ENV is part of a key\'s hashed lookup); numbers, switches and URLs are trimmed', () => {
  const { values } = read({ PLATFORM_ENV: ' staging ', CACHE_TTL_MS: ' 750 ', LOG_REQUESTS: ' 0', DATABASE_URL: ' postgres://db/platform ' })
  expect([values.environment, values.cache.ttlMs, values.logRequests, values.databaseUrl]).toEqual([' staging ', 750, false, 'postgres://db/platform'])
  expect(read({ CACHE_TTL_MS: '   ' }).values.cache.ttlMs).toBe(5000) // blank: the default
})

test('every numeric variable is bounded, and its bounds hold: each end accepted, one past it refused', () => {
  const integers = variablesOf(declarations).filter((variable) => typeof variable.defaultValue(() => 0) === 'number')
  expect(integers.length).toBeGreaterThan(100)
  for (const variable of integers) {
    expect(variable.bounds, variable.name).toBeDefined()
    const { min, max } = variable.bounds!
    expect(valueRead(variable, String(min))).toBe(min)
    expect(valueRead(variable, String(max))).toBe(max)
    expect(refusal({ [variable.name]: String(max + 1) })).toContain(`${variable.name} must be an integer from ${min} to ${max}, got "${max + 1}"`)
    if (min > 0) expect(refusal({ [variable.name]: String(min - 1) })).toContain(`${variable.name} must be an integer from ${min} to ${max}, got "${min - 1}"`)
  }
})

test('with nothing set, every value is the one the platform has always run with', () => {
  expect(loadConfig({}).config).toStrictEqual(TODAYS_DEFAULTS)
  expect(loadConfig({}).warnings).toEqual([])
})

describe('a renamed variable', () => {
  test('is read under its old name, with one warning naming the new one', () => {
    const { values, warnings } = read({ REALTIME_CACHE_TTL_MS: '750', WEBHOOK_PRESENCE_GRACE_MS: '1200' })
    expect(values.cache.ttlMs).toBe(750)
    expect(values.realtime.hookGraceMs).toBe(1200)
    expect(warnings).toEqual([
      'REALTIME_CACHE_TTL_MS is renamed CACHE_TTL_MS: set CACHE_TTL_MS instead (REALTIME_CACHE_TTL_MS is read for one more release)',
      'WEBHOOK_PRESENCE_GRACE_MS is renamed REALTIME_HOOK_GRACE_MS: set REALTIME_HOOK_GRACE_MS instead (WEBHOOK_PRESENCE_GRACE_MS is read for one more release)',
    ])
  })

  test('gives way to its new name when both are set, with a warning to remove the old', () => {
    const { values, warnings } = read({ REALTIME_CACHE_MAX_ENTRIES: '500', CACHE_MAX_ENTRIES: '2000' })
    expect(values.cache.maxEntries).toBe(2000)
    expect(warnings).toEqual(['REALTIME_CACHE_MAX_ENTRIES is ignored: CACHE_MAX_ENTRIES, its new name, is set too; remove REALTIME_CACHE_MAX_ENTRIES'])
  })

  test('a bad value under the old name is refused naming the name it was set under', () => {
    expect(refusal({ REALTIME_CACHE_TTL_MS: '5s' })).toContain('REALTIME_CACHE_TTL_MS must be an integer from 100 to 600000, got "5s"')
  })
})

test('settings never safe together are refused, each naming the variables', () => {
  expect(() => loadConfig({ WEBHOOK_TIMEOUT_MS: '20000', WEBHOOK_LEASE_MS: '20500' }))
    .toThrow('WEBHOOK_LEASE_MS (20500) must exceed WEBHOOK_TIMEOUT_MS (20000) by at least 1000')
  expect(() => loadConfig({ PLATFORM_ENV: 'production', MAIL_DEV_VERIFY: '1' })).toThrow('MAIL_DEV_VERIFY is refused when PLATFORM_ENV="production"')
  expect(loadConfig({ WEBHOOK_TIMEOUT_MS: '20000', WEBHOOK_LEASE_MS: '21000' }).config.webhooks.leaseMs).toBe(21_000)
  expect(() => loadConfig({ METRICS_PORT: '9100', METRICS_HOST: '0.0.0.0' })).toThrow('METRICS_HOST 0.0.0.0 is not loopback: set METRICS_TOKEN')
  expect(() => loadConfig({ METRICS_PORT_OFFSET: '10000', METRICS_HOST: '10.0.0.5' })).toThrow('METRICS_HOST 10.0.0.5 is not loopback')
  expect(loadConfig({ METRICS_PORT: '9100', METRICS_HOST: '0.0.0.0', METRICS_TOKEN: 's3cret' }).config.metrics.host).toBe('0.0.0.0')
  expect(loadConfig({ METRICS_HOST: '0.0.0.0' }).config.metrics.port).toBe(0) // no listener: nothing exposed
})
