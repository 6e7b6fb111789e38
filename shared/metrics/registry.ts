// The process's one Prometheus registry, and the naming every platform metric follows: the `platform_` prefix, the
// unit in the name, `_total` on counters, `_seconds` on durations. Declared through these helpers, a misnamed metric
// fails when its module loads, not on a dashboard. docs/metrics.md lists every metric and its labels.
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client'

/** Every metric of this process, as `/metrics` serves it. One per worker: each worker's numbers are its own. */
export const registry = new Registry()

// The runtime's own (CPU, memory, event loop lag, heap, handles) under the names every Node exporter uses, unprefixed,
// so existing dashboards read them.
collectDefaultMetrics({ register: registry })

const PREFIX = 'platform_'

function named(name: string, suffix: RegExp, kind: string): string {
  if (!/^[a-z][a-z0-9_]*$/.test(name) || !suffix.test(name)) throw new Error(`metric ${name}: a ${kind} is named in snake_case ending ${suffix.source}`)
  return PREFIX + name
}

/**
 * A counter `platform_<name>`; `name` ends `_total`. `labelNames` must name bounded sets only (an operation, a status,
 * an outcome), never a channel, key, product, address or URL.
 * @example const sent = counter('mailer_attempts_total', 'Delivery attempts by outcome', ['outcome'])
 */
export function counter<L extends string>(name: string, help: string, labelNames: readonly L[] = [], collect?: (this: Counter<L>) => void | Promise<void>) {
  return new Counter<L>({ name: named(name, /_total$/, 'counter'), help, labelNames, registers: [registry], ...(collect ? { collect } : {}) })
}

/** A gauge `platform_<name>` (a value now: connections, pending deliveries); `collect` sets it at scrape time. */
export function gauge<L extends string>(name: string, help: string, labelNames: readonly L[] = [], collect?: (this: Gauge<L>) => void | Promise<void>) {
  return new Gauge<L>({ name: named(name, /[a-z0-9]$/, 'gauge'), help, labelNames, registers: [registry], ...(collect ? { collect } : {}) })
}

/** Request durations from 5 ms to 30 s: an HTTP route (up to the longest deadlines a request may wait on). */
export const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30]

/** A histogram `platform_<name>` of durations; `name` ends `_seconds`. */
export function histogram<L extends string>(name: string, help: string, labelNames: readonly L[] = [], buckets = DURATION_BUCKETS) {
  return new Histogram<L>({ name: named(name, /_seconds$/, 'histogram'), help, labelNames, buckets, registers: [registry] })
}

/** One label set of a keyedHistogram: its labels, its observations per bucket (not cumulative), their sum and count. */
export interface KeyedSeries<L extends string> {
  labels: Record<L, string>
  counts: number[]
  sum: number
  count: number
}

/**
 * A histogram `platform_<name>` of durations (`name` ends `_seconds`) for a per-request path: the caller names each
 * label set by a string key it makes anyway, so an observation is one map lookup and a bucket's count, where
 * prom-client's Histogram hashes the labels of every observation (about 2 % of a public worker's CPU under publish
 * load). Scraped exactly as a prom-client Histogram of the same observations is (a unit test compares the two).
 * `series()` gives the label sets and their counts to whoever counts the same events (the requests counter).
 */
export function keyedHistogram<L extends string>(name: string, help: string, buckets = DURATION_BUCKETS) {
  const full = named(name, /_seconds$/, 'histogram')
  const series = new Map<string, KeyedSeries<L>>()
  // prom-client's two shapes: its text export keeps a series' labels apart from `le` (le first), its JSON merges them.
  const exported = (merged: boolean) => {
    const values: object[] = []
    const value = (own: Record<string, string | number>, labels: Record<L, string>, number: number, metricName: string) =>
      merged ? { labels: { ...own, ...labels }, value: number, metricName } : { labels: own, sharedLabels: labels, value: number, metricName }
    for (const s of series.values()) {
      let cumulative = 0
      buckets.forEach((le, i) => {
        cumulative += s.counts[i]!
        values.push(value({ le }, s.labels, cumulative, `${full}_bucket`))
      })
      values.push(value({ le: '+Inf' }, s.labels, s.count, `${full}_bucket`), value({}, s.labels, s.sum, `${full}_sum`),
        value({}, s.labels, s.count, `${full}_count`))
    }
    return { name: full, help, type: 'histogram', values, aggregator: 'sum' }
  }
  registry.registerMetric({
    name: full, help, type: 'histogram', aggregator: 'sum',
    get: async () => exported(true), getForPromString: async () => exported(false), reset: () => series.clear(),
  } as unknown as Histogram<L>)
  return {
    observe(key: string, labels: Record<L, string>, seconds: number): void {
      if (!Number.isFinite(seconds)) return
      let s = series.get(key)
      if (!s) series.set(key, (s = { labels, counts: buckets.map(() => 0), sum: 0, count: 0 }))
      for (let i = 0; i < buckets.length; i++) {
        if (seconds <= buckets[i]!) {
          s.counts[i]!++
          break
        }
      }
      s.sum += seconds
      s.count++
    },
    series: (): Iterable<KeyedSeries<L>> => series.values(),
  }
}

/** The current value of a counter kept elsewhere (a plain number a loop already counts), read at scrape time. */
export function counterOf(name: string, help: string, read: () => number) {
  return counter(name, help, [], function () {
    this.reset()
    this.inc(read())
  })
}
