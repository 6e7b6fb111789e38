// Analytics benchmark: dashboard tiles (metric queries), a 4-step funnel, capture and freshness over N captured
// events, each against a peer in the same run. Method and figures: docs/performance.md ("Analytics").
//   tiles   — runMetricQuery as a dashboard runs it (rollups plus the raw tail), the same with `exact: true` (raw events
//             only), and the bare SQL a developer would write over raw events for the same numbers
//   funnel  — runFunnel (one LATERAL index range scan per step) against the same funnel computed with joins over all
//             step events
//   capture — captureEvents (the function behind tracking_events_capture) in batches of 1 000 from 4 callers, against
//             a bare INSERT ... SELECT unnest of the same rows; then how long the aggregator takes to count them, and
//             whether the very next query counts them before it has
// Usage: bun run scripts/bench/analytics.ts [--events 1000000] [--users 100000] [--runs 5] [--peer-runs 3 (0: one cold run)]
//        [--chunk 1000000] [--capture 200000 (0: none)] [--month 2026-03] [--bulk] [--keep] [--product ID] [--seed-only]
// --seed-only seeds (and keeps) the events and stops: a later --product run builds the rollups and times the queries.
// --tiles-only times the tiles through the rollups and stops (no exact path, peers, funnel or capture): a quick look
// at the same data after a change to the rollups.
// --product times the queries over the events an earlier run kept (--keep) for that product, of --month, without
// seeding again: the same data before and after a change.
// --bulk loads a month that has no partition yet as a bulk import would: a table of its own without indexes, the
// indexes built once at the end, then attached as the month's partition (100 million events in tens of minutes
// instead of hours of row-by-row index upkeep). The rollups then count every event as they would any capture.
// Needs DATABASE_URL / REDIS_URL / PLATFORM_SECRET_KEY like the tests (scripts/bench/README.md).
import './analytics-env'
import { parseArgs } from 'node:util'
import { registerRollupSet, rollupUntilCurrent, type RollupLimits } from '../../shared/analytics/rollups'
import { runFunnel } from '../../services/api/analytics/semantic/funnel'
import { runMetricQuery } from '../../services/api/analytics/semantic/metric-query'
import type { MetricQuery } from '../../services/api/analytics/semantic/query-schemas'
import { captureEvents, type CapturedEvent } from '../../shared/analytics/capture'
import { config } from '../../shared/config'
import { analyticsSql, sql, unboundedSql } from '../../shared/db/client'
import { closeRedis } from '../../shared/redis/client'
import { newProduct } from '../../test/helpers'

const { values: args } = parseArgs({
  options: {
    events: { type: 'string', default: '1000000' }, users: { type: 'string', default: '100000' }, runs: { type: 'string', default: '5' },
    'peer-runs': { type: 'string', default: '3' }, chunk: { type: 'string', default: '1000000' }, capture: { type: 'string', default: '200000' },
    keep: { type: 'boolean', default: false }, bulk: { type: 'boolean', default: false }, month: { type: 'string', default: '2026-03' },
    product: { type: 'string' }, 'seed-only': { type: 'boolean', default: false }, 'tiles-only': { type: 'boolean', default: false },
  },
})
const EVENTS = Number(args.events)
const USERS = Number(args.users)
const RUNS = Number(args.runs)
const PEER_RUNS = Number(args['peer-runs'])
const CHUNK = Number(args.chunk)
const CAPTURE = Number(args.capture)
const LIMITS: RollupLimits = {
  chunkIds: config.aggregator.chunkIds, lockTimeoutMs: 10_000, maxValues: config.analytics.rollupMaxValues, maxSets: config.analytics.maxRollupSets,
}
if (!/^\d{4}-\d{2}$/.test(args.month!)) throw new Error('--month is YYYY-MM')
const MONTH = `${args.month}-01T00:00:00Z`
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`
const log = (line: string) => console.error(line)

const REUSED = args.product !== undefined
const product = REUSED ? { productId: args.product! } : await newProduct('Analytics bench')
const seed = unboundedSql()
if (REUSED && !(await seed`select 1 from tracked_events where product_id = ${product.productId} and ts >= ${MONTH}::timestamptz limit 1`).length) {
  throw new Error(`--product ${product.productId} has no events of ${args.month} kept: give the --month of the run that kept them`)
}
const PARTITION = `tracked_events_p${args.month!.replace('-', '')}`
const exists = (await seed`select to_regclass(${PARTITION}) is not null as there`)[0]!.there as boolean
if (args.bulk && exists && !REUSED) throw new Error(`--bulk loads a month without a partition; ${PARTITION} exists: pick another --month`)
// The month partitions of the data, as the aggregator keeps them for the months around now.
if (!args.bulk && !REUSED) await seed`select tracked_events_create_month((${MONTH}::timestamptz + m * interval '1 month')::date) from generate_series(-1, 1) m`
// The dashboard's "by plan" tile was saved as an insight: its property set exists before the events come.
await registerRollupSet(seed, product.productId, ['plan'], LIMITS.maxSets)
// Any events of earlier runs the rollups have not counted yet are counted first, so the timings below are this run's.
await rollupUntilCurrent(seed, LIMITS)

// 30 days of events from USERS users: most sign up, fewer view, fewer add to cart, fewer buy; plus page views. In
// chunks, each one statement, so that 100 million events need no more memory than one.
async function seedEvents(): Promise<number> {
  const seeding = performance.now()
  const target = args.bulk ? PARTITION : 'tracked_events'
  if (args.bulk) {
    await seed.unsafe(`create table ${PARTITION} (like tracked_events including defaults including constraints)`)
    // Proves every row is of the month, so attaching it needs no scan.
    await seed.unsafe(`alter table ${PARTITION} add constraint ${PARTITION}_month check (ts >= '${MONTH}'::timestamptz and ts < '${MONTH}'::timestamptz + interval '1 month')`)
  }
  const ids = args.bulk ? `nextval(pg_get_serial_sequence('tracked_events', 'id')), ` : ''
  for (let first = 1; first <= EVENTS; first += CHUNK) {
    const last = Math.min(EVENTS, first + CHUNK - 1)
    await seed.unsafe(`
      insert into ${target} (${args.bulk ? 'id, ' : ''}product_id, event, ts, users_id, anonymous_id, properties)
      select ${ids}$1::uuid,
             case when r < 0.15 then 'signup' when r < 0.55 then 'view' when r < 0.75 then 'add_to_cart' when r < 0.85 then 'purchase' else 'pageview' end,
             $2::timestamptz + (random() * 30 * 86400) * interval '1 second',
             'u' || (i % $3), 'a' || (i % $3),
             jsonb_build_object('plan', (array['free', 'pro', 'team'])[1 + (i % 3)], 'amount', (i % 100))
      from (select i, random() as r from generate_series($4::bigint, $5::bigint) as i) g`, [product.productId, MONTH, USERS, first, last])
    if (EVENTS > CHUNK) log(`  seeded ${last.toLocaleString('en')} events (${seconds(performance.now() - seeding)})`)
  }
  if (args.bulk) {
    const built = performance.now()
    // The month's own block-range index on ids, as tracked_events_create_month makes it; attaching builds the others.
    await seed.unsafe(`create index ${PARTITION}_ids on ${PARTITION} using brin (id) with (pages_per_range = 16)`)
    await seed.unsafe(`alter table tracked_events attach partition ${PARTITION} for values from ('${MONTH}') to ('${MONTH}'::timestamptz + interval '1 month')`)
    log(`  indexes built and the month attached in ${seconds(performance.now() - built)}`)
  }
  return performance.now() - seeding
}
const seededMs = REUSED ? 0 : await seedEvents()
if (!REUSED) {
  // As autovacuum would have by the time anyone queries: statistics, and the visibility map index-only scans rely on.
  await seed`vacuum analyze tracked_events`
  log(`seeded ${EVENTS.toLocaleString('en')} events for ${USERS.toLocaleString('en')} users in ${seconds(seededMs)} (${Math.round(EVENTS / (seededMs / 1000)).toLocaleString('en')} events/s, then vacuum analyze)`)
}
if (args['seed-only']) {
  log(`kept product ${product.productId} and its events of ${args.month}: time them with --product ${product.productId} --month ${args.month}`)
  await Promise.all([seed.end(), sql.end(), analyticsSql.end()])
  await closeRedis()
  process.exit(0)
}
const rolling = performance.now()
await rollupUntilCurrent(seed, LIMITS)
const rolledMs = performance.now() - rolling
// Rows upserted once per step over many steps leave dead versions behind, as autovacuum would clear them in time.
await seed`vacuum analyze analytics_event_rollups, analytics_event_slots, analytics_event_day_parts`
log(`rolled up in ${seconds(rolledMs)} (${Math.round(EVENTS / (rolledMs / 1000)).toLocaleString('en')} events/s)`)

const range = { from: MONTH, to: new Date(Date.parse(MONTH) + 30 * 86_400_000).toISOString() }
const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * p))]!

async function time(runs: number, run: () => Promise<unknown>): Promise<{ p50: number; max: number; result: unknown }> {
  const cold = performance.now()
  let result: unknown = await run() // warm: plans, caches
  // With 0 runs, the one cold run is the figure (the peers at 100 million events, which take minutes each).
  const ms: number[] = runs === 0 ? [performance.now() - cold] : []
  for (let i = 0; i < runs; i++) {
    const t = performance.now()
    result = await run()
    ms.push(performance.now() - t)
  }
  return { p50: percentile(ms, 0.5), max: Math.max(...ms), result }
}

interface Tile { name: string; query: MetricQuery; peer: () => Promise<unknown>; rows: (r: unknown) => unknown }
const P = product.productId
const tiles: Tile[] = [
  {
    name: 'purchases and buyers per Berlin day by plan',
    query: { entity: 'events', metrics: ['count', 'identities'], dimensions: ['properties.plan'], bucket: 'day', timezone: 'Europe/Berlin', range, filters: [{ field: 'event', op: 'equals', value: 'purchase' }] },
    peer: () => analyticsSql`select date_trunc('day', ts at time zone 'Europe/Berlin') as day, properties ->> 'plan' as plan, count(*), count(distinct coalesce(users_id, anonymous_id))
      from tracked_events where product_id = ${P} and event = 'purchase' and ts >= ${range.from}::timestamptz and ts < ${range.to}::timestamptz group by 1, 2 order by 1, 2`,
    rows: (r) => r,
  },
  {
    name: 'events per UTC day by event',
    query: { entity: 'events', metrics: ['count'], dimensions: ['event'], bucket: 'day', range },
    peer: () => analyticsSql`select date_trunc('day', ts, 'UTC') as day, event, count(*) from tracked_events
      where product_id = ${P} and ts >= ${range.from}::timestamptz and ts < ${range.to}::timestamptz group by 1, 2 order by 1, 2`,
    rows: (r) => r,
  },
  {
    name: 'daily active identities (Berlin)',
    query: { entity: 'events', metrics: ['identities'], bucket: 'day', timezone: 'Europe/Berlin', range },
    peer: () => analyticsSql`select date_trunc('day', ts at time zone 'Europe/Berlin') as day, count(distinct coalesce(users_id, anonymous_id))
      from tracked_events where product_id = ${P} and ts >= ${range.from}::timestamptz and ts < ${range.to}::timestamptz group by 1 order by 1`,
    rows: (r) => r,
  },
  {
    name: 'events and identities over the month, a range starting mid-hour',
    query: { entity: 'events', metrics: ['count', 'identities'], range: { from: new Date(Date.parse(MONTH) + 20 * 60_000).toISOString(), to: range.to } },
    peer: () => analyticsSql`select count(*), count(distinct coalesce(users_id, anonymous_id)) from tracked_events
      where product_id = ${P} and ts >= ${new Date(Date.parse(MONTH) + 20 * 60_000).toISOString()}::timestamptz and ts < ${range.to}::timestamptz`,
    rows: (r) => r,
  },
]

const ms = (v: number) => `${v < 100 ? v.toFixed(1) : v.toFixed(0)} ms`
const rowsOf = (r: unknown) => (r as { rows: Record<string, unknown>[] }).rows
const tileLines: string[] = []
let worstTile = 0
for (const tile of tiles) {
  log(`tile: ${tile.name}…`)
  const platform = await time(RUNS, () => runMetricQuery(P, tile.query))
  if (args['tiles-only']) {
    tileLines.push(`| ${tile.name} | ${ms(platform.p50)} (max ${ms(platform.max)}) |`)
    continue
  }
  const exact = await time(PEER_RUNS, () => runMetricQuery(P, { ...tile.query, exact: true }))
  const peer = await time(PEER_RUNS, tile.peer)
  worstTile = Math.max(worstTile, platform.p50)
  // How far the sketches are from the exact counts, over every identities value of the tile.
  const fast = rowsOf(platform.result)
  const slow = rowsOf(exact.result)
  let worst = 0
  fast.forEach((row, i) => {
    const a = Number(row.identities)
    const b = Number(slow[i]?.identities)
    if (row.identities !== undefined && b > 0) worst = Math.max(worst, Math.abs(a - b) / b)
  })
  const counts = fast.every((row, i) => row.count === undefined || row.count === slow[i]?.count) && fast.length === slow.length
  // Said at once too: a long run that fails later keeps what it measured.
  tileLines.push(`| ${tile.name} | ${ms(platform.p50)} (max ${ms(platform.max)}) | ${ms(exact.p50)} | ${ms(peer.p50)} | ${counts ? 'equal' : 'DIFFERENT'} | ${fast.some((r) => r.identities !== undefined) ? `${(worst * 100).toFixed(2)} %` : '-'} |`)
}

if (args['tiles-only']) {
  console.log(`\nTiles through the rollups over ${args.month} of ${P} (p50 of ${RUNS} runs after one warm-up)\n`)
  console.log('| dashboard tile | platform (rollups) |\n| --- | ---: |')
  for (const line of tileLines) console.log(line)
  await Promise.all([seed.end(), sql.end(), analyticsSql.end()])
  await closeRedis()
  process.exit(0)
}

// Funnel: signup → view → add_to_cart → purchase on users_id, 14-day window.
const events = ['signup', 'view', 'add_to_cart', 'purchase']
log('funnel…')
const funnel = await time(Math.min(RUNS, 3), () => runFunnel(P, { steps: events.map((event) => ({ entity: 'events', event })), identity: 'users_id', windowDays: 14, range }))
// The peer: each user's first signup in the range, then the first of each later step after the previous one, found by
// joining the user's events, not by an index lookup per step.
const funnelPeer = await time(Math.min(PEER_RUNS, 1), () => analyticsSql`
  with ev as (
    select users_id as who, event, ts from tracked_events
    where product_id = ${P} and users_id is not null and event = any(${events}::text[])
      and ts >= ${range.from}::timestamptz and ts < ${range.to}::timestamptz + interval '14 days'
  ), f as (
    select who, min(ts) as t1 from ev where event = 'signup' and ts < ${range.to}::timestamptz group by who
  ), s2 as (
    select f.who, f.t1, min(ev.ts) as t2 from f left join ev on ev.who = f.who and ev.event = 'view' and ev.ts >= f.t1 and ev.ts <= f.t1 + interval '14 days' group by f.who, f.t1
  ), s3 as (
    select s2.who, s2.t1, s2.t2, min(ev.ts) as t3 from s2 left join ev on ev.who = s2.who and ev.event = 'add_to_cart' and ev.ts >= s2.t2 and ev.ts <= s2.t1 + interval '14 days' group by s2.who, s2.t1, s2.t2
  ), s4 as (
    select s3.*, min(ev.ts) as t4 from s3 left join ev on ev.who = s3.who and ev.event = 'purchase' and ev.ts >= s3.t3 and ev.ts <= s3.t1 + interval '14 days' group by s3.who, s3.t1, s3.t2, s3.t3
  )
  select count(*) as c1, count(t2) as c2, count(t3) as c3, count(t4) as c4 from s4`)
log(`  ${tileLines.join('\n  ')}\n  funnel p50 ${ms(funnel.p50)}, peer ${ms(funnelPeer.p50)}`)
const ours = (funnel.result as { steps: { count: number }[] }).steps.map((s) => s.count)
const theirs = Object.values((funnelPeer.result as Record<string, string>[])[0]!).map(Number)

async function measureCapture(): Promise<string[]> {
  // Capture: batches of 1 000 events now, from 4 callers at once; the peer inserts the same rows with one bare statement
  // per batch, also 4 at once.
  log('capture…')
  const batches = Math.max(1, Math.round(CAPTURE / 1000))
  const batch = (n: number): CapturedEvent[] => Array.from({ length: 1000 }, (_, i) => ({
    event: 'pageview', identity: { anonymous_id: `c${n}-${i % 50}` }, properties: { path: `/p/${i % 20}`, plan: 'pro' },
  }))
  const pool = (count: number, one: (i: number) => Promise<unknown>) => {
    let next = 0
    return Promise.all(Array.from({ length: 4 }, async () => { while (next < count) await one(next++) }))
  }
  const counted = async () => (await runMetricQuery(P, { entity: 'events', metrics: ['count'], range: { from: '-2h' }, filters: [{ field: 'event', op: 'equals', value: 'pageview' }] })).rows[0]!.count as number
  const before = await counted()
  let t = performance.now()
  await pool(batches, (n) => captureEvents(P, batch(n)))
  const captureMs = performance.now() - t
  t = performance.now()
  await pool(batches, (n) => {
    const rows = batch(n)
    return sql`insert into tracked_events (product_id, event, ts, anonymous_id, properties)
      select ${P}, event, now(), anonymous_id, properties::jsonb from unnest(${rows.map((r) => r.event)}::text[],
        ${rows.map((r) => r.identity.anonymous_id!)}::text[], ${rows.map((r) => JSON.stringify(r.properties))}::text[]) as t(event, anonymous_id, properties)`
  })
  const peerCaptureMs = performance.now() - t
  // Freshness: the next query counts every capture before the aggregator has run; then the time it takes to count them.
  const next = await counted()
  t = performance.now()
  await rollupUntilCurrent(seed, LIMITS)
  const catchUpMs = performance.now() - t
  const afterRollup = await counted()
  return [`capture: ${(batches * 1000).toLocaleString('en')} events in batches of 1 000 from 4 callers: ${Math.round(batches * 1000 / (captureMs / 1000)).toLocaleString('en')} events/s; peer (bare insert) ${Math.round(batches * 1000 / (peerCaptureMs / 1000)).toLocaleString('en')} events/s`,
    `freshness: the next query counted ${(next - before).toLocaleString('en')} of ${(2 * batches * 1000).toLocaleString('en')} new events before any rollup; the aggregator counted them in ${seconds(catchUpMs)}; after it the query counts ${(afterRollup - before).toLocaleString('en')}`]
}
const captureLines = CAPTURE > 0 ? await measureCapture() : []

console.log(`\nAnalytics over ${EVENTS.toLocaleString('en')} events, ${USERS.toLocaleString('en')} users, 30 days (${navigator.hardwareConcurrency} cores; p50 of ${RUNS} runs after one warm-up, exact and peer of ${PEER_RUNS})\n`)
console.log(REUSED ? `kept events of ${args.month}; rollups brought up to date in ${seconds(rolledMs)}\n` : `seeding ${seconds(seededMs)}; rollups built from scratch in ${seconds(rolledMs)}\n`)
console.log('| dashboard tile | platform (rollups) | exact: true | peer SQL | counts | identities off by (worst) |')
console.log('| --- | ---: | ---: | ---: | --- | ---: |')
for (const line of tileLines) console.log(line)
console.log(`\nslowest tile p50: ${ms(worstTile)}`)
console.log(`\n| funnel: signup → view → add_to_cart → purchase, 14 d | ${ms(funnel.p50)} (max ${ms(funnel.max)}) | peer ${ms(funnelPeer.p50)} |`)
console.log(`funnel counts: platform ${ours.join(' / ')}; peer ${theirs.join(' / ')} (${ours.join() === theirs.join() ? 'equal' : 'DIFFERENT'})`)
if (captureLines.length) console.log(`\n${captureLines.join('\n')}`)

if (args.keep || REUSED) {
  log(`kept product ${P} and its events (delete it to free them)`)
} else {
  const cleanup = unboundedSql() // millions of rows take longer to delete than the API's statement deadline
  await cleanup`delete from products where id = ${P}` // its events and rollups go with it
  await cleanup.end()
}
await Promise.all([seed.end(), sql.end(), analyticsSql.end()])
await closeRedis()
process.exit(0)
