// The metrics plumbing as pure functions: which port a worker serves on, the token check, the naming rules a metric
// is declared under, and what a webhook attempt counts as.
import { describe, expect, test } from 'bun:test'
import { counter, histogram } from '../../shared/metrics/registry'
import { cached } from '../../shared/metrics/cached'
import { bearerMatches, checkMetricsSettings, isLoopback, metricsPort } from '../../shared/metrics/serve'
import { outcomeOf } from '../../services/webhooks/metrics'

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
  test('status classes, timeouts (no answer, or an answer cut short) and refusals', () => {
    expect(outcomeOf(result(204))).toBe('2xx')
    expect(outcomeOf(result(302, 'redirect not followed'))).toBe('3xx')
    expect(outcomeOf(result(410))).toBe('4xx')
    expect(outcomeOf(result(503))).toBe('5xx')
    expect(outcomeOf(result(null, 'no answer within 15000 ms'))).toBe('timeout')
    expect(outcomeOf(result(200, 'answer cut short: not complete within 15000 ms'))).toBe('timeout')
    expect(outcomeOf(result(null, '10.0.0.1 is a private address'))).toBe('refused')
    expect(outcomeOf(result(null, 'connect ECONNREFUSED 127.0.0.1:9'))).toBe('refused')
    expect(outcomeOf(result(0))).toBe('other')
  })
})

const ROOT = new URL('../../', import.meta.url).pathname

/** Every process's metrics module (`metrics.ts` anywhere in the code), imported: a new one is covered without a line here. */
async function importMetricsModules(): Promise<string[]> {
  const paths = [...new Bun.Glob('{gateway,services,shared}/**/metrics.ts').scanSync({ cwd: ROOT })].sort()
  for (const path of paths) await import(ROOT + path)
  return paths
}

describe('docs/metrics.md', () => {
  test('names every platform_ metric the processes declare, and no other', async () => {
    const { registry } = await import('../../shared/metrics/registry')
    const { watchBreakers } = await import('../../shared/metrics/breakers')
    const { observeRequest } = await import('../../shared/metrics/http')
    const modules = await importMetricsModules()
    expect(modules).toEqual(expect.arrayContaining(['gateway/metrics.ts', 'services/archiver/metrics.ts', 'services/mailer/metrics.ts', 'services/webhooks/metrics.ts']))
    // Declared as each process declares them (none is collected here: nothing is scraped).
    watchBreakers()
    observeRequest(undefined, 'GET', 200, 0.001)
    const all = registry.getMetricsAsArray().map((metric) => (metric as unknown as { name: string }).name)
    const declared = all.filter((name) => name.startsWith('platform_') && !name.startsWith('platform_unit_')).sort()
    const doc = await Bun.file(new URL('../../docs/metrics.md', import.meta.url)).text()
    const documented = [...new Set([...doc.matchAll(/^\| `(platform_[a-z_]+)`/gm)].map((m) => m[1]!))].sort()
    expect(documented).toEqual(declared)
    // A gauge `x` and a counter `x_total` would be one OpenMetrics family (prom-client's own nodejs_active_* do it; ours not).
    expect(declared.filter((name) => declared.includes(`${name}_total`))).toEqual([])
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
    watchGateway({ connections: () => 1, subscriptions: () => 1 })
    watchGateway({ connections: () => 3, subscriptions: () => 5 })
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
