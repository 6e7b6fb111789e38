// Rollups: the same metric query answered through the rollup path and through raw events (`exact: true`) gives the
// same rows, for many random queries (metrics, dimensions, filters, buckets, zones with half- and quarter-hour offsets,
// ranges with partial hours) over events some of which are counted in rollups and some not yet (captured past the
// watermark, backdated into hours already rolled up). Distinct identities here stay below the size where a sketch
// stops counting exactly, so they must match too. Also: property sets made by saving insights, built and then ready;
// a set with too many values dropped; a capture counted by the very next query; the aggregator process.
import { beforeAll, describe, expect, test } from 'bun:test'
import { readState, registerRollupSet, rollupUntilCurrent, type RollupLimits } from '../../shared/analytics/rollups'
import { sql } from '../../shared/db/client'
import { migrate } from '../../shared/db/migrate'
import { createInsight } from '../../services/api/analytics/insights'
import { planMetricQuery, runMetricQuery } from '../../services/api/analytics/semantic/metric-query'
import { postgresPlanning } from '../../services/api/analytics/semantic/planning-database'
import type { Filter, MetricQuery } from '../../services/api/analytics/semantic/query-schemas'
import { captureEvents, type CapturedEvent } from '../../shared/analytics/capture'
import { identitySketch } from '../../shared/analytics/events'
import { call, eventually, freePort, newProduct, scratchDatabase } from '../helpers'

const LIMITS: RollupLimits = { chunkIds: 700, lockTimeoutMs: 2000, maxValues: 200, maxSets: 10 }
const roll = () => rollupUntilCurrent(sql, LIMITS)

/** A small deterministic generator (mulberry32): the same seed, the same queries, so a failure can be replayed. */
function random(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
const SEED = Number(process.env.ROLLUP_TEST_SEED ?? 20261128)
const rnd = random(SEED)
const pick = <T>(items: readonly T[]): T => items[Math.floor(rnd() * items.length)]!
const some = <T>(items: readonly T[], most: number): T[] => items.filter(() => rnd() < most / items.length).slice(0, most)

const EVENT_NAMES = ['signup', 'view', 'add_to_cart', 'purchase', 'pageview']
const PLANS = ['free', 'pro', 'team']
const SOURCES = ['ads', 'organic', 'mail', 'Ads Campaign']
// 16 days around a month's end (two partitions), minute precision, plus a few seconds so hours are cut anywhere.
const START = Date.parse('2026-10-24T00:00:00Z')
const SPAN_MS = 16 * 86_400_000

function events(n: number, from = START, span = SPAN_MS): CapturedEvent[] {
  return Array.from({ length: n }, () => {
    const user = Math.floor(rnd() * 150)
    const properties: Record<string, unknown> = { amount: Math.floor(rnd() * 100) }
    if (rnd() < 0.8) properties.plan = pick(PLANS)
    if (rnd() < 0.7) properties.source = pick(SOURCES)
    return {
      event: pick(EVENT_NAMES),
      timestamp: new Date(from + Math.floor(rnd() * span / 1000) * 1000).toISOString(),
      identity: rnd() < 0.7 ? { users_id: `u${user}` } : { anonymous_id: `a${user}` },
      properties,
    }
  })
}

let productId: string
let token: string

beforeAll(async () => {
  const owner = await newProduct('Rollups')
  productId = owner.productId
  token = owner.token
  // Insights that make property sets: plan with source, and amount alone.
  await createInsight(productId, { name: 'by plan', kind: 'metric', query: {
    entity: 'events', metrics: ['count'], dimensions: ['properties.plan'], range: { from: '-7d' },
    filters: [{ field: 'properties.source', op: 'equals', value: 'ads' }],
  } }, null)
  await createInsight(productId, { name: 'big', kind: 'metric', query: {
    entity: 'events', metrics: ['identities'], range: { from: '-7d' }, filters: [{ field: 'properties.amount', op: 'gt', value: 50 }],
  } }, null)
  await captureEvents(productId, events(1000))
  await captureEvents(productId, events(1000))
  // An event of the year 0001, whose hour postgres.js would read as 1901 were it a Date.
  await captureEvents(productId, [{ event: 'view', timestamp: '0001-01-01T10:30:00Z', identity: { users_id: 'u1' }, properties: { plan: 'pro', source: 'ads', amount: 60 } }])
  await roll()
  // Not rolled up: new events anywhere in the span, and events backdated into hours the rollups already hold.
  await captureEvents(productId, events(300))
}, 60_000)

const ZONES = ['UTC', 'Europe/Berlin', 'Asia/Kolkata', 'Asia/Kathmandu', 'America/St_Johns', 'Australia/Lord_Howe', 'Pacific/Chatham', 'America/Los_Angeles']
const FIELDS = ['event', 'properties.plan', 'properties.source', 'properties.amount']

function randomFilter(): Filter {
  const field = pick(FIELDS)
  if (field === 'event') return pick<Filter>([
    { field, op: 'equals', value: pick(EVENT_NAMES) }, { field, op: 'in', value: some(EVENT_NAMES, 3).length ? some(EVENT_NAMES, 3) : ['view'] },
    { field, op: 'notEquals', value: pick(EVENT_NAMES) }, { field, op: 'contains', value: 'A' },
  ])
  if (field === 'properties.amount') return pick<Filter>([{ field, op: 'gt', value: 50 }, { field, op: 'lte', value: 20 }, { field, op: 'gte', value: 99 }])
  const values = field === 'properties.plan' ? PLANS : SOURCES
  return pick<Filter>([{ field, op: 'equals', value: pick(values) }, { field, op: 'notSet' }, { field, op: 'set' }, { field, op: 'contains', value: 'ad' }, { field, op: 'in', value: [pick(values), pick(values)] }])
}

/** A range within the span, on whole hours or not, from an hour to its whole length. */
function randomRange(): { from: string; to: string } {
  const a = START - 86_400_000 + Math.floor(rnd() * (SPAN_MS + 2 * 86_400_000))
  const length = pick([2 * 3_600_000, 26 * 3_600_000, 5 * 86_400_000, SPAN_MS + 86_400_000]) * (0.5 + rnd())
  const aligned = rnd() < 0.3
  const at = (ms: number) => new Date(aligned ? Math.floor(ms / 3_600_000) * 3_600_000 : Math.floor(ms / 1000) * 1000).toISOString()
  return { from: at(a), to: at(a + length) }
}

function randomQuery(): MetricQuery {
  const metrics = pick([['count'], ['identities'], ['count', 'identities'], ['identities', 'count']])
  const bucket = pick([undefined, 'hour', 'day', 'week', 'month'] as const)
  const query: MetricQuery = { entity: 'events', metrics, range: randomRange(), timezone: pick(ZONES), filters: [], dimensions: [] }
  if (bucket) query.bucket = bucket
  // Mostly the fields the sets hold (so the rollup path is taken), sometimes others (so it is not).
  const dims = some(['event', 'properties.plan', 'properties.source'], 2)
  query.dimensions = dims
  query.filters = Array.from({ length: Math.floor(rnd() * 3) }, randomFilter)
  return query
}

const viaRollups = async (query: MetricQuery) =>
  (await planMetricQuery(productId, query, '/body', new Date(), postgresPlanning)).text.includes('analytics_event_rollups')

describe('the rollup path and the raw path', () => {
  test('give the same rows for random queries over rolled-up, new and backdated events', async () => {
    const head = Number((await sql`select max(id) as id from tracked_events where product_id = ${productId}`)[0]!.id)
    expect((await readState(sql, productId)).watermark).toBeLessThan(head) // some events are past the watermark
    let rolled = 0
    for (let i = 0; i < 150; i++) {
      const query = randomQuery()
      const bucketCount = query.bucket ? (Date.parse(query.range.to!) - Date.parse(query.range.from)) / { hour: 3.6e6, day: 8.64e7, week: 6.048e8, month: 2.4e9 }[query.bucket] : 0
      if (bucketCount > 900) query.bucket = 'day'
      const fast = await runMetricQuery(productId, query)
      const exact = await runMetricQuery(productId, { ...query, exact: true })
      if (await viaRollups(query)) rolled++
      expect(exact.approximate).toBe(false)
      expect({ query, rows: fast.rows }).toEqual({ query, rows: exact.rows })
    }
    // The comparison means something only if most queries took the rollup path.
    expect(rolled).toBeGreaterThan(75)
  }, 120_000)

  test('the ends of a range outside its whole hours are read from five-minute slots, and raw for less than a slot', async () => {
    const other = await newProduct('Slots')
    // One event in each of 00:03, 00:21 and 00:27, then one per hour.
    const at = ['2026-10-10T00:03:00Z', '2026-10-10T00:21:00Z', '2026-10-10T00:27:30Z', '2026-10-10T01:10:00Z', '2026-10-10T02:10:00Z']
    await captureEvents(other.productId, at.map((timestamp, i) => ({ event: 'view', timestamp, identity: { users_id: `s${i}` } })))
    await roll()
    const query: MetricQuery = { entity: 'events', metrics: ['count'], range: { from: '2026-10-10T00:20:00Z', to: '2026-10-10T02:00:00Z' } }
    expect(await viaRollups(query)).toBe(true)
    expect((await runMetricQuery(other.productId, query)).rows).toEqual([{ count: 3 }])
    // The slot 00:25 (its event at 00:27:30) is read from its row, not from the event: a row made to say 100 is
    // counted as 100 (restored after). 00:20 to 00:25 is a whole slot too; from 00:22, 00:22 to 00:25 is read raw.
    const bump = (by: number) => sql`update analytics_event_slots set events = events + ${by}
      where product_id = ${other.productId} and set_id = 0 and slot = '2026-10-10T00:25:00Z' and event is null`
    await bump(99)
    try {
      expect((await runMetricQuery(other.productId, query)).rows).toEqual([{ count: 102 }])
      expect((await runMetricQuery(other.productId, { ...query, range: { from: '2026-10-10T00:22:00Z', to: query.range.to } })).rows).toEqual([{ count: 101 }])
      expect((await runMetricQuery(other.productId, { ...query, exact: true })).rows).toEqual([{ count: 3 }])
    } finally {
      await bump(-99)
    }
  })

  test('six-hour parts of the day are read where no bucket boundary cuts them, and their hours where one does', async () => {
    const other = await newProduct('Day parts')
    // An event every hour of 2026-10-11 and 2026-10-12 (UTC).
    const at = Array.from({ length: 48 }, (_, h) => new Date(Date.parse('2026-10-11T00:30:00Z') + h * 3_600_000).toISOString())
    await captureEvents(other.productId, at.map((timestamp, i) => ({ event: 'view', timestamp, identity: { users_id: `d${i % 5}` } })))
    await roll()
    const utc: MetricQuery = { entity: 'events', metrics: ['count'], bucket: 'day', range: { from: '2026-10-11T00:00:00Z', to: '2026-10-13T00:00:00Z' } }
    const berlin: MetricQuery = { ...utc, timezone: 'Europe/Berlin', range: { from: '2026-10-10T22:00:00Z', to: '2026-10-12T22:00:00Z' } }
    expect((await runMetricQuery(other.productId, utc)).rows.map((r) => r.count)).toEqual([24, 24])
    // A part's row made to say 100 more (restored after): counted where the part is read. 2026-10-11 18:00-24:00 UTC
    // is in one UTC day, but Berlin's day starts at 22:00 UTC inside it: there its hours are read instead.
    const bump = (by: number) => sql`update analytics_event_day_parts set events = events + ${by}
      where product_id = ${other.productId} and set_id = 0 and part = '2026-10-11T18:00:00Z' and event is null`
    await bump(100)
    try {
      expect((await runMetricQuery(other.productId, utc)).rows.map((r) => r.count)).toEqual([124, 24])
      const berlinDays = await runMetricQuery(other.productId, berlin)
      expect(berlinDays.rows.map((r) => r.count)).toEqual([22, 24])
    } finally {
      await bump(-100)
    }
    expect((await runMetricQuery(other.productId, berlin)).rows).toEqual((await runMetricQuery(other.productId, { ...berlin, exact: true })).rows)
  })

  test('a slot a bucket boundary cuts (a zone on local mean time, 1890 Amsterdam at +00:19:32) is read raw', async () => {
    const other = await newProduct('Local mean time')
    // Amsterdam's day of 1890-03-02 began at 23:40:28 UTC: the slot 23:40 holds events of both days.
    const at = ['1890-03-01T22:10:00Z', '1890-03-01T23:40:10Z', '1890-03-01T23:41:00Z', '1890-03-01T23:42:00Z', '1890-03-02T03:00:00Z']
    await captureEvents(other.productId, at.map((timestamp, i) => ({ event: 'view', timestamp, identity: { users_id: `m${i % 2}` } })))
    await roll()
    const query: MetricQuery = { entity: 'events', metrics: ['count', 'identities'], bucket: 'day', timezone: 'Europe/Amsterdam', range: { from: '1890-03-01T21:07:00Z', to: '1890-03-02T05:00:00Z' } }
    expect(await viaRollups(query)).toBe(true)
    const fast = await runMetricQuery(other.productId, query)
    expect(fast.rows).toEqual((await runMetricQuery(other.productId, { ...query, exact: true })).rows)
    expect(fast.rows.map((r) => r.count)).toEqual([2, 3])
  })

  test('before the base set\'s slots are counted (an upgrade\'s backfill, migration 0020), the ends are read raw; then from the slots', async () => {
    // As migration 0020 leaves an upgraded deployment: no slots for the events counted so far.
    await sql.begin(async (tx) => {
      await tx`select watermark from analytics_rollup_state for update`
      await tx`delete from analytics_event_slots where set_id = 0`
      await tx`update analytics_rollup_state set slots_from = watermark, slots_backfilled = 0`
    })
    const [state] = await sql`select slots_from > slots_backfilled as behind from analytics_rollup_state`
    expect(state!.behind).toBe(true)
    const compare = async () => {
      for (let i = 0; i < 25; i++) {
        const query = { ...randomQuery(), dimensions: some(['event'], 1), filters: [] }
        if (query.bucket === 'hour') query.bucket = 'day'
        const fast = await runMetricQuery(productId, query)
        expect({ query, rows: fast.rows }).toEqual({ query, rows: (await runMetricQuery(productId, { ...query, exact: true })).rows })
      }
    }
    await compare()
    await roll()
    const [after] = await sql`select slots_from, slots_backfilled from analytics_rollup_state`
    expect(after!.slots_backfilled).toBe(after!.slots_from)
    await compare()
  }, 60_000)

  test('every event counted once in rollups: after the rollups catch up, the totals are the events stored', async () => {
    await roll()
    const query: MetricQuery = { entity: 'events', metrics: ['count', 'identities'], range: { from: '2026-10-01T00:00:00Z', to: '2026-12-01T00:00:00Z' } }
    expect(await viaRollups(query)).toBe(true)
    const [stored] = await sql`select count(*)::int as n, count(distinct coalesce(users_id, anonymous_id, email, phone))::int as who
      from tracked_events where product_id = ${productId} and ts >= '2026-10-01T00:00:00Z' and ts < '2026-12-01T00:00:00Z'`
    const answer = await runMetricQuery(productId, query)
    expect(answer.rows).toEqual([{ count: stored!.n, identities: stored!.who }])
    expect(answer.approximate).toBe(true)
  })
})

describe('property sets', () => {
  test('saving insights made one set per key combination; queries on other keys read raw events', async () => {
    const sets = await sql`select keys, state from analytics_rollup_sets where product_id = ${productId} order by keys`
    expect(sets.map((s) => [s.keys, s.state])).toEqual([[['amount'], 'ready'], [['plan', 'source'], 'ready']])
    const range = { from: '2026-10-24T00:00:00Z', to: '2026-11-01T00:00:00Z' }
    expect(await viaRollups({ entity: 'events', metrics: ['count'], range, dimensions: ['properties.source'] })).toBe(true)
    expect(await viaRollups({ entity: 'events', metrics: ['count'], range, dimensions: ['properties.amount', 'properties.plan'] })).toBe(false)
    expect(await viaRollups({ entity: 'events', metrics: ['count'], range, dimensions: ['users_id'] })).toBe(false)
    expect(await viaRollups({ entity: 'events', metrics: ['count'], range, exact: true })).toBe(false)
  })

  test('a set made after events exist is built from them, and until ready its queries read raw events', async () => {
    expect(await registerRollupSet(sql, productId, ['source', 'amount'], LIMITS.maxSets)).toBe(true)
    // A subset of a set the product has adds none.
    expect(await registerRollupSet(sql, productId, ['plan'], LIMITS.maxSets)).toBe(false)
    const query: MetricQuery = { entity: 'events', metrics: ['count', 'identities'], dimensions: ['properties.source', 'properties.amount'], range: { from: '2026-10-20T00:00:00Z', to: '2026-11-15T00:00:00Z' }, bucket: 'day' }
    const [state] = await sql`select state from analytics_rollup_sets where product_id = ${productId} and keys = ${['amount', 'source']}`
    expect(state!.state).toBe('building')
    expect(await viaRollups(query)).toBe(false)
    await roll()
    expect(await viaRollups(query)).toBe(true)
    expect((await runMetricQuery(productId, query)).rows).toEqual((await runMetricQuery(productId, { ...query, exact: true })).rows)
  })

  test('a product has at most ANALYTICS_MAX_ROLLUP_SETS sets; more keys read raw events', async () => {
    const other = await newProduct('Few sets')
    expect(await registerRollupSet(sql, other.productId, ['a'], 2)).toBe(true)
    expect(await registerRollupSet(sql, other.productId, ['b'], 2)).toBe(true)
    expect(await registerRollupSet(sql, other.productId, ['c'], 2)).toBe(false)
    expect(await registerRollupSet(sql, other.productId, ['a', 'b', 'c', 'd'], 10)).toBe(false) // more keys than a set holds
  })

  test('many event names are not many values: a set with few values stays ready whatever the events are called', async () => {
    const other = await newProduct('Many events')
    expect(await registerRollupSet(sql, other.productId, ['plan'], 10)).toBe(true)
    await captureEvents(other.productId, Array.from({ length: LIMITS.maxValues + 1 }, (_, i) => ({
      event: `event-${i}`, timestamp: '2026-11-02T10:15:00Z', identity: { anonymous_id: 'a' }, properties: { plan: i % 2 ? 'pro' : 'free' },
    })))
    await roll()
    const [set] = await sql`select state from analytics_rollup_sets where product_id = ${other.productId}`
    expect(set!.state).toBe('ready')
  })

  test('a set whose hour holds more value combinations than allowed is dropped; its queries read raw events and stay right', async () => {
    const other = await newProduct('Many values')
    expect(await registerRollupSet(sql, other.productId, ['url'], 10)).toBe(true)
    await captureEvents(other.productId, Array.from({ length: LIMITS.maxValues + 1 }, (_, i) => ({
      event: 'pageview', timestamp: '2026-11-02T10:15:00Z', identity: { anonymous_id: `a${i % 7}` }, properties: { url: `/page/${i}` },
    })))
    await roll()
    const [set] = await sql`select state from analytics_rollup_sets where product_id = ${other.productId}`
    expect(set!.state).toBe('too_many_values')
    expect((await sql`select count(*)::int as n from analytics_event_rollups r join analytics_rollup_sets s on s.id = r.set_id where s.product_id = ${other.productId}`)[0]!.n).toBe(0)
    expect((await sql`select count(*)::int as n from analytics_event_slots r join analytics_rollup_sets s on s.id = r.set_id where s.product_id = ${other.productId}`)[0]!.n).toBe(0)
    const query: MetricQuery = { entity: 'events', metrics: ['count'], dimensions: ['properties.url'], range: { from: '2026-11-02T00:00:00Z', to: '2026-11-03T00:00:00Z' }, filters: [{ field: 'properties.url', op: 'equals', value: '/page/3' }] }
    expect(await viaRollups(query)).toBe(false)
    expect((await runMetricQuery(other.productId, query)).rows).toEqual([{ 'properties.url': '/page/3', count: 1 }])
    // Those keys are not made again, but the dropped set leaves room for others.
    expect(await registerRollupSet(sql, other.productId, ['url'], 1)).toBe(false)
    expect(await registerRollupSet(sql, other.productId, ['plan'], 1)).toBe(true)
  })
})

describe('freshness and isolation', () => {
  test('a capture is counted by the very next query, through the API, whether or not rollups have run', async () => {
    const owner = await newProduct('Fresh')
    const body = { entity: 'events', metrics: ['count', 'identities'], range: { from: '-3h' } }
    const ask = async () => (await call('POST', '/analytics/query', { token: owner.token, productId: owner.productId, body })).body
    await roll()
    for (let i = 1; i <= 3; i++) {
      const captured = await call('POST', '/tracking/events', { token: owner.token, productId: owner.productId, body: { events: [{ event: 'ping', identity: { users_id: `u${i}` } }] } })
      expect(captured.status).toBe(200)
      const answer = await ask()
      expect(answer.rows).toEqual([{ count: i, identities: i }])
      expect(answer.approximate).toBe(true)
      if (i === 2) await roll()
    }
  })

  test('another product\'s events are never counted, in rollups or raw', async () => {
    const query = { entity: 'events', metrics: ['count'], range: { from: '2026-10-01T00:00:00Z', to: '2026-12-01T00:00:00Z' } }
    const empty = await newProduct('Empty')
    const answer = await call('POST', '/analytics/query', { token: empty.token, productId: empty.productId, body: query })
    expect(answer.body.rows).toEqual([{ count: 0 }])
    const mine = await call('POST', '/analytics/query', { token, productId, body: query })
    expect(mine.body.rows[0].count).toBeGreaterThan(2000)
  })

  test('exact must be a boolean: anything else is a 400 naming it', async () => {
    const answer = await call('POST', '/analytics/query', { token, productId, body: { entity: 'events', metrics: ['count'], range: { from: '-1h' }, exact: 'yes' } })
    expect(answer.status).toBe(400)
    expect(JSON.stringify(answer.body)).toContain('/body/exact')
  })
})

describe('funnel samples', () => {
  const steps = ['signup', 'view', 'purchase'].map((event) => ({ entity: 'events', event }))
  const run = (body: Record<string, unknown>) => call('POST', '/analytics/funnel', { token, productId, body: { steps, identity: 'users_id', range: { from: '2026-10-24T00:00:00Z', to: '2026-11-09T00:00:00Z' }, ...body } })

  test('a sample counts the same share of identities every run and scales the counts up; without one the answer is exact', async () => {
    const exact = (await run({})).body
    expect(exact.sampled).toBeNull()
    const first = await run({ sample: 0.25 })
    expect(first.status).toBe(200)
    expect(first.body.sampled).toBe(0.25)
    const counts = first.body.steps.map((step: { count: number }) => step.count)
    expect(counts.every((count: number) => count % 4 === 0)).toBe(true) // a quarter counted, times four
    expect(counts[0]).toBeGreaterThan(0)
    expect(counts[0]).not.toBe(exact.steps[0].count) // 150 users: a quarter of them times four is not exactly all of them
    expect((await run({ sample: 0.25 })).body.steps).toEqual(first.body.steps)
    expect((await run({ sample: 1 })).body).toMatchObject({ sampled: null, steps: exact.steps })
  })

  test('a sample outside (0, 1] is a 400 naming it', async () => {
    for (const sample of [0, -0.5, 1.5, 'half']) {
      const refused = await run({ sample })
      expect(refused.status).toBe(400)
      expect(JSON.stringify(refused.body)).toContain('/body/sample')
    }
  })
})

describe('the aggregator process', () => {
  test('moves the watermark over new captures on its own and reports it in its metrics', async () => {
    const metricsPort = await freePort()
    const proc = Bun.spawn(['bun', 'run', 'services/aggregator/main.ts'], {
      env: { ...process.env, AGGREGATOR_IDLE_MS: '50', METRICS_PORT: String(metricsPort) }, stdout: 'ignore', stderr: 'inherit',
    })
    try {
      const owner = await newProduct('Aggregated')
      await captureEvents(owner.productId, [{ event: 'ping', identity: { users_id: 'u' } }])
      const [last] = await sql`select max(id)::bigint as id from tracked_events where product_id = ${owner.productId}`
      await eventually(async () => (await readState(sql, owner.productId)).watermark >= Number(last!.id), 15_000, 'the watermark past the capture')
      const [row] = await sql`select events from analytics_event_rollups where product_id = ${owner.productId} and set_id = 0`
      expect(Number(row!.events)).toBe(1)
      // The gauge follows at the end of the round (after the backfills the round also runs).
      const reported = await eventually(async () => {
        const response = await fetch(`http://127.0.0.1:${metricsPort}/metrics`).catch(() => null)
        const value = Number(/^platform_aggregator_watermark (\d+)/m.exec(response?.ok ? await response.text() : '')?.[1])
        return value >= Number(last!.id) ? value : null
      }, 15_000, 'the aggregator\'s metrics to report the watermark past the capture')
      expect(reported).toBeGreaterThanOrEqual(Number(last!.id))
    } finally {
      proc.kill('SIGTERM')
      await proc.exited
    }
  }, 40_000)
})


describe('upgrading rollups made before the rows over all events (migration 0019), the slots (0020) and the parts of the day (0021)', () => {
  const scratch = scratchDatabase('platform_rollups')

  test('every hour counted so far gets its row over all events, equal to its events\' rows merged, and steps after keep both', async () => {
    const db = await scratch.open()
    await migrate(db, { through: '0018_analytics_insight_results.sql' })
    const [product] = await db`with o as (insert into organizations (name) values ('o') returning id)
      insert into products (organization_id, name) select id, 'p' from o returning id`
    const [set] = await db`insert into analytics_rollup_sets (product_id, keys, covers_from, state) values (${product!.id}, ${['plan']}, 0, 'ready') returning id`
    await db`insert into tracked_events (product_id, event, ts, users_id, properties)
      select ${product!.id}, 'e' || (i % 3), timestamptz '2025-03-01' + i * interval '7 minutes', 'u' || (i % 40), jsonb_build_object('plan', 'p' || (i % 2))
      from generate_series(1, 600) i`
    // The rows as the aggregator counted them before 0019: per event only, in the base set and the plan set.
    await db.unsafe(`insert into analytics_event_rollups (product_id, set_id, hour, event, events, identities)
      select product_id, 0, date_trunc('hour', ts, 'UTC'), event, count(*), ${identitySketch('e')} from tracked_events e group by 1, 3, 4`)
    await db.unsafe(`insert into analytics_event_rollups (product_id, set_id, hour, event, v1, events, identities)
      select product_id, ${set!.id}, date_trunc('hour', ts, 'UTC'), event, properties ->> 'plan', count(*), ${identitySketch('e')} from tracked_events e group by 1, 3, 4, 5`)
    await db`update analytics_rollup_state set watermark = (select max(id) from tracked_events)`
    await migrate(db, { through: '0019_analytics_rollups_all_events.sql' })
    // Each hour's row over all events holds what its per-event rows hold together, in both sets.
    const compare = async () => db`select a.set_id, a.hour, a.v1, a.events::int as all_events, p.events::int as per_event,
        hll_cardinality(a.identities)::int as all_identities, hll_cardinality(p.identities)::int as per_event_identities
      from analytics_event_rollups a
      full join (select set_id, hour, v1, sum(events) as events, hll_union_agg(identities) as identities from analytics_event_rollups
        where event is not null group by set_id, hour, v1) p on p.set_id = a.set_id and p.hour = a.hour and p.v1 is not distinct from a.v1
      where a.event is null or a.set_id is null`
    let rows = await compare()
    expect(rows.length).toBe((await db`select count(distinct (set_id, hour, v1))::int as n from analytics_event_rollups`)[0]!.n)
    expect(rows.length).toBeGreaterThan(70 * 2)
    for (const row of rows) {
      expect(row.all_events).toBe(row.per_event)
      expect(row.all_identities).toBe(row.per_event_identities)
    }
    // Counting goes on into both kinds of row: a backdated event into an hour counted already (with migration 0020,
    // which counts the plan set again, hours and slots).
    await migrate(db)
    await db`insert into tracked_events (product_id, event, ts, users_id, properties) values (${product!.id}, 'late', '2025-03-01T02:10:00Z', 'newcomer', '{"plan":"p1"}')`
    await rollupUntilCurrent(db, LIMITS)
    rows = await compare()
    for (const row of rows) {
      expect(row.all_events).toBe(row.per_event)
      expect(row.all_identities).toBe(row.per_event_identities)
    }
    // 0020 counted the plan set again, and the base set's slots of the events counted before it: every hour row of
    // both sets is its slots merged.
    expect((await db`select state from analytics_rollup_sets where id = ${set!.id}`)[0]!.state).toBe('ready')
    const slotted = await db`select h.set_id, h.hour, h.event, h.v1, h.events::int as hour_events, s.events::int as slot_events,
        hll_cardinality(h.identities)::int as hour_identities, hll_cardinality(s.identities)::int as slot_identities
      from analytics_event_rollups h full join (select set_id, date_trunc('hour', slot, 'UTC') as hour, event, v1, sum(events) as events,
        hll_union_agg(identities) as identities from analytics_event_slots group by 1, 2, 3, 4) s
      on s.set_id = h.set_id and s.hour = h.hour and s.event is not distinct from h.event and s.v1 is not distinct from h.v1`
    expect(new Set(slotted.map((r) => Number(r.set_id)))).toEqual(new Set([0, Number(set!.id)]))
    for (const row of slotted) {
      expect(row.slot_events).toBe(row.hour_events)
      expect(row.slot_identities).toBe(row.hour_identities)
    }
    // 0021 made the parts of the day from the hour rows, and counting goes on into them: each is its hours merged.
    const parted = await db`select p.set_id, p.part, p.events::int as part_events, h.events::int as hour_events,
        hll_cardinality(p.identities)::int as part_identities, hll_cardinality(h.identities)::int as hour_identities
      from analytics_event_day_parts p full join (select set_id, date_bin('6 hours', hour, timestamptz '2000-01-01 00:00:00+00') as part, event, v1,
        sum(events) as events, hll_union_agg(identities) as identities from analytics_event_rollups group by 1, 2, 3, 4) h
      on h.set_id = p.set_id and h.part = p.part and h.event is not distinct from p.event and h.v1 is not distinct from p.v1`
    expect(parted.length).toBeGreaterThan(4)
    for (const row of parted) {
      expect(row.part_events).toBe(row.hour_events)
      expect(row.part_identities).toBe(row.hour_identities)
    }
    const [hour] = await db`select events::int, hll_cardinality(identities)::int as identities from analytics_event_rollups
      where set_id = 0 and event is null and hour = '2025-03-01T02:00:00Z'`
    const [raw] = await db`select count(*)::int as events, count(distinct users_id)::int as identities from tracked_events
      where ts >= '2025-03-01T02:00:00Z' and ts < '2025-03-01T03:00:00Z'`
    expect(hour).toEqual(raw!)
  }, 60_000)
})
