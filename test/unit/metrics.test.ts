// The metrics plumbing as pure functions: which port a worker serves on, the token check, the naming rules a metric
// is declared under, and what a webhook attempt counts as; docs and code agree; a gateway's fan-out gaps (which no real
// process can be made to have without disturbing the others sharing Redis) counted on in-memory edges.
import { describe, expect, test } from 'bun:test'
import { Histogram, Registry } from 'prom-client'
import { counter, DURATION_BUCKETS, histogram, keyedHistogram, registry as platformRegistry } from '../../shared/metrics/registry'
import { cached } from '../../shared/metrics/cached'
import { bearerMatches, checkMetricsSettings, isLoopback, metricsPort } from '../../shared/metrics/serve'
import { outcomeOf } from '../../services/webhooks/metrics'
import { queryOutcome } from '../../services/api/analytics/prometheus'
import { lagOf } from '../../gateway/fanout'
import { postgresErrorKind, redisErrorKind } from '../../shared/backend-errors'
import { ApiError } from '../../shared/errors'

const settings = (port: number, portOffset = 0) => ({ port, portOffset, host: '127.0.0.1', token: '' })

describe('metricsPort', () => {
  test('METRICS_PORT as given, 0 for none; under foreman PORT + METRICS_PORT_OFFSET, one port per instance', () => {
    expect(metricsPort(settings(0))).toBe(0)
    expect(metricsPort(settings(9100))).toBe(9100)
    expect(metricsPort(settings(9100, 10_000), '5001')).toBe(15_001)
    expect(metricsPort(settings(9100, 10_000), undefined)).toBe(9100)
    expect(() => metricsPort(settings(0, 65_000), '5000')).toThrow('is not a port')
  })
})

describe('bearerMatches', () => {
  test('only `Bearer <token>` exactly', () => {
    expect(bearerMatches('Bearer s3cret', 's3cret')).toBe(true)
    for (const header of [null, '', 's3cret', 'Bearer s3cre', 'Bearer s3cret ', 'bearer s3cret', 'Basic s3cret']) {
      expect(bearerMatches(header, 's3cret')).toBe(false)
    }
  })
})

describe('checkMetricsSettings', () => {
  test('a METRICS_HOST other than loopback needs METRICS_TOKEN; loopback does not', () => {
    for (const host of ['127.0.0.1', '127.0.0.53', 'localhost', '::1', '[::1]']) {
      expect(isLoopback(host)).toBe(true)
      expect(() => checkMetricsSettings({ host, token: '' })).not.toThrow()
    }
    for (const host of ['0.0.0.0', '::', '10.0.0.5', 'metrics.internal', '128.0.0.1']) {
      expect(isLoopback(host)).toBe(false)
      expect(() => checkMetricsSettings({ host, token: '' })).toThrow('set METRICS_TOKEN')
      expect(() => checkMetricsSettings({ host, token: 's3cret' })).not.toThrow()
    }
  })
})

describe('cached (scrape-time counts)', () => {
  test('one read in flight at a time, its value kept for the TTL, a failure too, then read again', async () => {
    let now = 0
    let reads = 0
    let answer: (n: number) => void = () => {}
    let fail = false
    const count = cached(() => {
      reads++
      if (fail) return Promise.reject(new Error('database away'))
      return new Promise<number>((resolve) => (answer = resolve))
    }, 5000, () => now)
    const [a, b] = [count(), count()]
    expect(reads).toBe(1) // the second scrape waits on the first's query
    answer(42)
    expect(await Promise.all([a, b])).toEqual([42, 42])
    now = 4999
    expect(await count()).toBe(42)
    expect(reads).toBe(1)
    now = 5000
    fail = true
    await expect(count()).rejects.toThrow('database away')
    expect(reads).toBe(2)
    now = 9000
    await expect(count()).rejects.toThrow('database away') // not asked again at once
    expect(reads).toBe(2)
    now = 10_001
    fail = false
    const c = count()
    answer(7)
    expect(await c).toBe(7)
    expect(reads).toBe(3)
  })
})

describe('naming', () => {
  test('a counter ends _total, a histogram _seconds, all in snake_case; declared under the platform_ prefix', () => {
    expect(() => counter('unit_things', 'x')).toThrow('ending _total')
    expect(() => histogram('unit_wait_ms', 'x')).toThrow('ending _seconds')
    expect(() => counter('Unit_things_total', 'x')).toThrow('snake_case')
    expect((counter('unit_things_total', 'x') as unknown as { name: string }).name).toBe('platform_unit_things_total')
  })
})

describe('webhook attempt outcomes', () => {
  const result = (status: number | null, error?: string) => ({ status, durationMs: 5, excerpt: '', ...(error ? { error } : {}) })
  test('status classes (an answer cut short by its status, as the delivery judges it), timeouts and refusals', () => {
    expect(outcomeOf(result(204))).toBe('2xx')
    expect(outcomeOf(result(302, 'redirect not followed'))).toBe('3xx')
    expect(outcomeOf(result(410))).toBe('4xx')
    expect(outcomeOf(result(503))).toBe('5xx')
    expect(outcomeOf(result(null, 'no answer within 15000 ms'))).toBe('timeout')
    expect(outcomeOf(result(200, 'answer cut short: not complete within 15000 ms'))).toBe('2xx')
    expect(outcomeOf(result(500, 'answer cut short: not complete within 15000 ms'))).toBe('5xx')
    expect(outcomeOf(result(null, '10.0.0.1 is a private address'))).toBe('refused')
    expect(outcomeOf(result(null, 'connect ECONNREFUSED 127.0.0.1:9'))).toBe('refused')
    expect(outcomeOf(result(0))).toBe('other')
  })
})

describe('backend error kinds', () => {
  test('PostgreSQL: a cancelled statement is a timeout, the server\'s own trouble other, a statement\'s own error nothing', () => {
    const pg = (code: string) => Object.assign(new Error('x'), { code })
    expect(postgresErrorKind(pg('57014'))).toBe('timeout')
    for (const code of ['53300', '53200', '57P01', '55P03', '58030', 'XX000', '25006']) expect(postgresErrorKind(pg(code))).toBe('other')
    for (const code of ['23505', '22012', '42P01', '40001']) expect(postgresErrorKind(pg(code))).toBeNull()
    expect(postgresErrorKind(new ApiError('unavailable', 'x'))).toBeNull()
    expect(postgresErrorKind(new Error('x'))).toBeNull()
  })

  test('Redis: a timeout, an unreachable server, the server saying it cannot serve; a plain error reply nothing', () => {
    expect(redisErrorKind(new Error('Command timed out'), true)).toBe('timeout')
    expect(redisErrorKind(new Error('Connection is closed.'), true)).toBe('unavailable')
    expect(redisErrorKind(new Error('OOM command not allowed when used memory > \'maxmemory\'.'), false)).toBe('other')
    expect(redisErrorKind(new Error('LOADING Redis is loading the dataset in memory'), false)).toBe('other')
    expect(redisErrorKind(new Error('NOSCRIPT No matching script'), false)).toBeNull()
    expect(redisErrorKind(new Error('WRONGTYPE Operation against a key holding the wrong kind of value'), false)).toBeNull()
  })
})

describe('fan-out lag', () => {
  const entry = (t: number) => ({ shard: 3, channel: 'c', product: 'p', id: '1-0', t })
  test('entries: the shard\'s counter past the cursor; seconds: the oldest unread entry\'s age; caught up, both 0', () => {
    expect(lagOf({ id: '5-0', n: 10 }, 10, undefined, 9_000)).toEqual({ entries: 0, seconds: 0 })
    expect(lagOf({ id: '5-0', n: 10 }, 14, entry(6_500), 9_000)).toEqual({ entries: 4, seconds: 2.5 })
    // A clock step back never makes it negative; a cursor of an entry without a number knows no count.
    expect(lagOf({ id: '5-0', n: 10 }, 11, entry(9_100), 9_000)).toEqual({ entries: 1, seconds: 0 })
    expect(lagOf({ id: '5-0', n: undefined }, 11, entry(8_000), 9_000).entries).toBeNaN()
  })
})

describe('analytics query outcomes', () => {
  test('its statement timeout, a 4xx, anything else', () => {
    expect(queryOutcome(new ApiError('query_timeout', 'x'))).toBe('timeout')
    expect(queryOutcome(new ApiError('unprocessable', 'x'))).toBe('refused')
    expect(queryOutcome(new ApiError('unavailable', 'x'))).toBe('error')
    expect(queryOutcome(new Error('boom'))).toBe('error')
  })
})

const ROOT = new URL('../../', import.meta.url).pathname

/**
 * Every process's metrics module (`metrics.ts` anywhere in the code, `prometheus.ts` where "metrics" would mean the
 * area's own, as in analytics), imported: a new one is covered without a line here.
 */
async function importMetricsModules(): Promise<string[]> {
  const paths = [...new Bun.Glob('{gateway,services,shared}/**/{metrics,prometheus}.ts').scanSync({ cwd: ROOT })].sort()
  for (const path of paths) await import(ROOT + path)
  return paths
}

let declaring: Promise<Map<string, string>> | undefined

/**
 * Every metric the processes declare, by name and type (`counter`, `gauge`, `histogram`), the runtime's defaults
 * included: declared as each process declares them, once (none is collected here: nothing is scraped).
 */
function declaredMetrics(): Promise<Map<string, string>> {
  return (declaring ??= (async () => {
    const { registry } = await import('../../shared/metrics/registry')
    const { watchBreakers } = await import('../../shared/metrics/breakers')
    const { watchPools } = await import('../../shared/metrics/pools')
    const { observeRequest } = await import('../../shared/metrics/http')
    const { watchGateway } = await import('../../gateway/metrics')
    const { watchArchiver } = await import('../../services/archiver/metrics')
    const { watchPendingDeliveries } = await import('../../services/webhooks/metrics')
    const { watchQueue } = await import('../../services/mailer/metrics')
    const modules = await importMetricsModules()
    expect(modules).toEqual(expect.arrayContaining(['gateway/metrics.ts', 'services/api/analytics/prometheus.ts', 'services/archiver/metrics.ts',
      'services/mailer/metrics.ts', 'services/webhooks/metrics.ts']))
    watchBreakers()
    watchPools()
    observeRequest(undefined, 'GET', 200, 0.001)
    watchGateway({ connections: () => 0, subscriptions: () => 0, fanoutLag: async () => new Map() })
    watchArchiver({ read: 0, archived: 0, lost: 0, deadLettered: 0 })
    watchPendingDeliveries()
    watchQueue()
    const metrics = registry.getMetricsAsArray() as unknown as { name: string; type: string }[]
    return new Map(metrics.filter(({ name }) => !name.startsWith('platform_unit_')).map(({ name, type }) => [name, type]))
  })())
}

/**
 * The metric names a PromQL expression reads: every identifier of the platform's or the runtime's, a histogram's
 * `_bucket`, `_sum` and `_count` series named by their histogram (an unknown name is returned as written).
 */
function metricsIn(expr: string, declared: Map<string, string>): string[] {
  return [...expr.matchAll(/\b((?:platform|process|nodejs)_[a-z0-9_]+)/g)].map(([, name]) => {
    const base = name!.replace(/_(bucket|sum|count)$/, '')
    return base !== name && declared.get(base) === 'histogram' ? base : name!
  })
}

describe('docs/metrics.md', () => {
  test('names every platform_ metric the processes declare, and no other', async () => {
    const declared = [...(await declaredMetrics()).keys()].filter((name) => name.startsWith('platform_')).sort()
    const doc = await Bun.file(new URL('../../docs/metrics.md', import.meta.url)).text()
    const documented = [...new Set([...doc.matchAll(/^\| `(platform_[a-z_]+)`/gm)].map((m) => m[1]!))].sort()
    expect(documented).toEqual(declared)
    // A gauge `x` and a counter `x_total` would be one OpenMetrics family (prom-client's own nodejs_active_* do it; ours not).
    expect(declared.filter((name) => declared.includes(`${name}_total`))).toEqual([])
  })
})

interface Panel {
  id: number
  type: string
  title: string
  targets?: { expr: string }[]
  panels?: Panel[]
}

describe('docs/grafana-dashboard.json', () => {
  test('every panel\'s expressions read metrics the processes declare; every graph has one; ids are unique', async () => {
    const declared = await declaredMetrics()
    const dashboard = await Bun.file(new URL('../../docs/grafana-dashboard.json', import.meta.url)).json() as { panels: Panel[] }
    const panels = dashboard.panels.flatMap((panel) => [panel, ...(panel.panels ?? [])])
    const graphs = panels.filter((panel) => panel.type !== 'row')
    expect(graphs.length).toBeGreaterThan(20)
    expect(new Set(panels.map((panel) => panel.id)).size).toBe(panels.length)
    const used = new Set<string>()
    for (const panel of graphs) {
      expect([panel.title, panel.targets?.length ?? 0]).not.toEqual([panel.title, 0])
      for (const { expr } of panel.targets!) {
        const names = metricsIn(expr, declared)
        expect([panel.title, expr, names.length > 0]).toEqual([panel.title, expr, true])
        for (const name of names) {
          expect([panel.title, name, declared.has(name)]).toEqual([panel.title, name, true])
          used.add(name)
        }
      }
    }
    // The areas the dashboard is for, each drawn.
    for (const name of ['platform_http_requests_total', 'platform_http_request_duration_seconds', 'platform_gateway_fanout_lag_seconds',
      'platform_mailer_attempts_total', 'platform_webhook_deliveries_pending', 'platform_archiver_gap_entries_total', 'platform_breaker_open']) {
      expect(used).toContain(name)
    }
  })

  test('a name no process declares is caught', async () => {
    const declared = await declaredMetrics()
    expect(metricsIn('rate(platform_http_request_duration_seconds_bucket[5m])', declared)).toEqual(['platform_http_request_duration_seconds'])
    expect(metricsIn('sum(platform_http_requests_count) / nodejs_heap_size_used_bytes', declared)).toEqual(['platform_http_requests_count', 'nodejs_heap_size_used_bytes'])
    expect(declared.has('platform_http_requests_count')).toBe(false)
  })
})

interface Rule {
  alert: string
  expr: string
  for: string
  labels: { severity: string }
  annotations: { summary: string; runbook_url: string }
}

describe('docs/alerts.rules.yml and docs/alerts.md', () => {
  test('every rule reads metrics the processes declare, and has a `for`, a severity and its section in the page, with the same values', async () => {
    const declared = await declaredMetrics()
    const file = Bun.YAML.parse(await Bun.file(new URL('../../docs/alerts.rules.yml', import.meta.url)).text()) as { groups: { rules: Rule[] }[] }
    const rules = file.groups.flatMap((group) => group.rules)
    const page = await Bun.file(new URL('../../docs/alerts.md', import.meta.url)).text()
    const sections = new Map(page.split(/^### /m).slice(1).map((section) => [section.slice(0, section.indexOf('\n')), section]))
    expect([...sections.keys()].sort()).toEqual(rules.map((rule) => rule.alert).sort())
    for (const rule of rules) {
      expect([rule.alert, /^\d+[smh]$/.test(rule.for), ['critical', 'warning', 'info'].includes(rule.labels.severity)]).toEqual([rule.alert, true, true])
      expect(rule.annotations.runbook_url).toBe(`docs/alerts.md#${rule.alert.toLowerCase()}`)
      expect(sections.get(rule.alert)).toContain(`\`for: ${rule.for}\`, \`severity: ${rule.labels.severity}\``)
      const names = metricsIn(rule.expr, declared)
      if (rule.alert !== 'PlatformMetricsDown') expect([rule.alert, names.length > 0]).toEqual([rule.alert, true])
      for (const name of names) expect([rule.alert, name, declared.has(name)]).toEqual([rule.alert, name, true])
    }
    // The alerts the platform's failure modes need, each set.
    const watched = new Set(rules.flatMap((rule) => metricsIn(rule.expr, declared)))
    for (const name of ['platform_breaker_open', 'platform_http_requests_total', 'platform_archiver_gap_entries_total', 'platform_archiver_dead_lettered_entries_total',
      'platform_webhook_deliveries_pending', 'platform_mailer_emails_pending', 'platform_gateway_fanout_lag_seconds']) {
      expect(watched).toContain(name)
    }
  })
})

describe('watching', () => {
  test('each watch function may be called again: the metrics are declared once, the second call swaps what they read', async () => {
    const { registry } = await import('../../shared/metrics/registry')
    const { watchGateway } = await import('../../gateway/metrics')
    const { watchArchiver } = await import('../../services/archiver/metrics')
    const { watchPendingDeliveries } = await import('../../services/webhooks/metrics')
    const { watchQueue } = await import('../../services/mailer/metrics')
    const value = async (name: string) => (await registry.getSingleMetric(name)!.get()).values[0]!.value
    watchGateway({ connections: () => 1, subscriptions: () => 1, fanoutLag: async () => new Map() })
    watchGateway({ connections: () => 3, subscriptions: () => 5, fanoutLag: async () => new Map() })
    watchArchiver({ read: 1, archived: 0, lost: 0, deadLettered: 0 })
    watchArchiver({ read: 7, archived: 0, lost: 0, deadLettered: 0 })
    for (let i = 0; i < 2; i++) {
      watchPendingDeliveries()
      watchQueue()
    }
    expect(await value('platform_gateway_connections_open')).toBe(3)
    expect(await value('platform_gateway_subscriptions')).toBe(5)
    expect(await value('platform_archiver_entries_read_total')).toBe(7)
  })
})

describe('histogram buckets', () => {
  test('reach past the timeouts they measure: SMTP to 60 s (MAILER_SMTP_TIMEOUT_MS 30 s), HTTP to 30 s', async () => {
    const { registry } = await import('../../shared/metrics/registry')
    const { observeRequest } = await import('../../shared/metrics/http')
    const { mailerMetrics } = await import('../../services/mailer/metrics')
    observeRequest(undefined, 'GET', 200, 0.001)
    mailerMetrics.smtp('temporary', 31)
    const text = await registry.getSingleMetricAsString('platform_mailer_smtp_duration_seconds')
    expect(text).toContain('le="45",result="temporary"} 1')
    expect(text).toContain('le="30",result="temporary"} 0')
    expect(text).toContain('le="60",result="temporary"} 1')
    const http = await registry.getSingleMetricAsString('platform_http_request_duration_seconds')
    expect(http).toContain('le="15"')
    expect(http).toContain('le="30"')
  })
})

describe('mail attempts', () => {
  test('an attempt whose outcome could not be recorded is counted all the same, recorded="error"', async () => {
    const { registry } = await import('../../shared/metrics/registry')
    const { finish } = await import('../../services/mailer/deliver')
    const count = async (recorded: string) => (await registry.getSingleMetric('platform_mailer_attempts_total')!.get()).values
      .find((v) => v.labels.outcome === 'failed' && v.labels.recorded === recorded)?.value ?? 0
    const email = { id: 'e1' } as Parameters<typeof finish>[0]
    const before = { error: await count('error'), true: await count('true') }
    await expect(finish(email, { kind: 'failed', detail: 'x' }, async () => { throw new Error('database away') })).rejects.toThrow('database away')
    expect(await finish(email, { kind: 'failed', detail: 'x' }, async () => true)).toBe(true)
    expect(await count('error') - before.error).toBe(1)
    expect(await count('true') - before.true).toBe(1)
  })
})

describe('gateway gaps', () => {
  test('a fan-out gap counts once, and each subscription of its shard it ends counts once as ended by a gap', async () => {
    const { registry } = await import('../../shared/metrics/registry')
    const { Dispatcher } = await import('../../gateway/dispatch')
    const { memoryGateway, namespace, noBatching, PRODUCT, request } = await import('./gateway-fakes')
    const { shardOf } = await import('../../shared/realtime/shards')
    const value = async (name: string, labels: Record<string, string> = {}) => (await registry.getSingleMetric(name)!.get()).values
      .find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))?.value ?? 0
    const gateway = memoryGateway([namespace('chat')])
    const dispatcher = new Dispatcher(gateway.hub, gateway.topics, noBatching, gateway.backends.usage, 1024)
    const channel = 'chat:gap'
    const clients = [gateway.open(), gateway.open()]
    for (const { connection } of clients) {
      await request(connection, { type: 'connect', id: 1, token: gateway.token([{ name: channel, ops: ['subscribe'] }]) })
      await request(connection, { type: 'subscribe', id: 2, channel })
    }
    const before = { gaps: await value('platform_gateway_fanout_gaps_total'), ended: await value('platform_gateway_subscriptions_ended_total', { reason: 'gap' }) }
    dispatcher.gap(shardOf(PRODUCT, channel))
    expect(clients.map(({ transport }) => transport.frames.at(-1)?.type)).toEqual(['unsubscribe', 'unsubscribe'])
    expect(await value('platform_gateway_fanout_gaps_total') - before.gaps).toBe(1)
    expect(await value('platform_gateway_subscriptions_ended_total', { reason: 'gap' }) - before.ended).toBe(2)
    // A gap on a shard with no subscription here ends nothing, and is counted all the same.
    dispatcher.gap(shardOf(PRODUCT, channel) + 1)
    expect(await value('platform_gateway_fanout_gaps_total') - before.gaps).toBe(2)
    expect(await value('platform_gateway_subscriptions_ended_total', { reason: 'gap' }) - before.ended).toBe(2)
    for (const { connection } of clients) connection.cleanup()
  })
})

describe('keyedHistogram', () => {
  test('scrapes exactly as a prom-client Histogram of the same observations: buckets, +Inf, sum, count', async () => {
    const keyed = keyedHistogram<'route' | 'status'>('test_keyed_duration_seconds', 'Keyed, for the comparison')
    const other = new Registry()
    const reference = new Histogram({ name: 'platform_test_keyed_duration_seconds', help: 'Keyed, for the comparison', labelNames: ['route', 'status'], buckets: DURATION_BUCKETS, registers: [other] })
    // On a bound, between bounds, past the last one, zero; two label sets.
    const observations: [string, string, number][] = [['a', '200', 0.005], ['a', '200', 0.007], ['b', '503', 31], ['a', '200', 0], ['b', '503', 1], ['a', '200', 30]]
    for (const [route, status, seconds] of observations) {
      keyed.observe(`${route} ${status}`, { route, status }, seconds)
      reference.observe({ route, status }, seconds)
    }
    expect(await platformRegistry.getSingleMetricAsString('platform_test_keyed_duration_seconds')).toBe(await other.getSingleMetricAsString('platform_test_keyed_duration_seconds'))
    // JSON (getMetricsAsJSON; /metrics serves the text): the same values and labels (prom-client adds empty exemplars).
    const values = async (metric: { get(): Promise<{ values: { labels: object; value: number; metricName?: string }[] }> }) =>
      (await metric.get()).values.map(({ labels, value, metricName }) => ({ labels, value, metricName }))
    expect(await values(platformRegistry.getSingleMetric('platform_test_keyed_duration_seconds') as never)).toEqual(await values(reference as never))
    expect([...keyed.series()].map((s) => [s.labels, s.count])).toEqual([[{ route: 'a', status: '200' }, 4], [{ route: 'b', status: '503' }, 2]])
    platformRegistry.removeSingleMetric('platform_test_keyed_duration_seconds')
  })
})
