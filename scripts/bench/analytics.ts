// Analytics benchmark: a metric query and a 4-step funnel over one million captured events, each against a peer in the
// same run. Method and figures: docs/performance.md ("Analytics").
//   metric query — runMetricQuery (catalog resolution, buckets in a zone with empty buckets filled, a property
//                  dimension, a filter) against the bare SQL a developer would write for the same numbers
//   funnel       — runFunnel (one LATERAL index range scan per step) against the same funnel computed with window
//                  functions over each identity's ordered events (the usual SQL without per-step index lookups)
// Usage: bun run scripts/bench/analytics.ts [--events 1000000] [--users 100000] [--runs 5]
// Needs DATABASE_URL / REDIS_URL / PLATFORM_SECRET_KEY like the tests (scripts/bench/README.md).
import './analytics-env'
import { parseArgs } from 'node:util'
import { runFunnel } from '../../services/api/analytics/semantic/funnel'
import { runMetricQuery } from '../../services/api/analytics/semantic/metric-query'
import { analyticsSql, sql, unboundedSql } from '../../shared/db/client'
import { closeRedis } from '../../shared/redis'
import { newProduct } from '../../test/helpers'

const { values: args } = parseArgs({ options: { events: { type: 'string', default: '1000000' }, users: { type: 'string', default: '100000' }, runs: { type: 'string', default: '5' } } })
const EVENTS = Number(args.events)
const USERS = Number(args.users)
const RUNS = Number(args.runs)

const product = await newProduct('Analytics bench')
const seed = unboundedSql()
const started = performance.now()
// 30 days of events from USERS users: most sign up, fewer view, fewer add to cart, fewer buy; plus page views.
await seed`
  insert into tracked_events (product_id, event, ts, users_id, anonymous_id, properties)
  select ${product.productId},
         case when r < 0.15 then 'signup' when r < 0.55 then 'view' when r < 0.75 then 'add_to_cart' when r < 0.85 then 'purchase' else 'pageview' end,
         timestamptz '2026-03-01 00:00:00+00' + (random() * 30 * 86400) * interval '1 second',
         'u' || (i % ${USERS}), 'a' || (i % ${USERS}),
         jsonb_build_object('plan', (array['free', 'pro', 'team'])[1 + (i % 3)], 'amount', (i % 100))
  from (select i, random() as r from generate_series(1, ${EVENTS}) as i) g`
// As autovacuum would have by the time anyone queries: statistics, and the visibility map index-only scans rely on.
await seed`vacuum analyze tracked_events`
await seed.end()
console.error(`seeded ${EVENTS.toLocaleString('en')} events for ${USERS.toLocaleString('en')} users in ${((performance.now() - started) / 1000).toFixed(1)} s`)

const range = { from: '2026-03-01T00:00:00Z', to: '2026-03-31T00:00:00Z' }
const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * p))]!

async function time(run: () => Promise<unknown>): Promise<{ p50: number; max: number; result: unknown }> {
  const t0 = performance.now()
  let result: unknown = await run() // warm: plans, caches
  console.error(`  warm-up run: ${(performance.now() - t0).toFixed(0)} ms`)
  const ms: number[] = []
  for (let i = 0; i < RUNS; i++) {
    const t = performance.now()
    result = await run()
    ms.push(performance.now() - t)
    console.error(`  run ${i + 1}: ${ms.at(-1)!.toFixed(0)} ms`)
  }
  return { p50: percentile(ms, 0.5), max: Math.max(...ms), result }
}

// Metric query: purchases per day in Europe/Berlin by plan.
console.error('metric query…')
const metric = await time(() => runMetricQuery(product.productId, {
  entity: 'events', metrics: ['count', 'identities'], dimensions: ['properties.plan'], bucket: 'day', timezone: 'Europe/Berlin', range,
  filters: [{ field: 'event', op: 'equals', value: 'purchase' }],
}))
const metricPeer = await time(() => analyticsSql`
  select date_trunc('day', ts at time zone 'Europe/Berlin') as day, properties ->> 'plan' as plan, count(*), count(distinct coalesce(users_id, anonymous_id))
  from tracked_events where product_id = ${product.productId} and event = 'purchase'
    and ts >= ${range.from}::timestamptz and ts < ${range.to}::timestamptz
  group by 1, 2 order by 1, 2`)

// Funnel: signup → view → add_to_cart → purchase on users_id, 14-day window.
const events = ['signup', 'view', 'add_to_cart', 'purchase']
console.error('funnel…')
const funnel = await time(() => runFunnel(product.productId, { steps: events.map((event) => ({ entity: 'events', event })), identity: 'users_id', windowDays: 14, range }))
// The peer: each user's first signup in the range, then the first of each later step after the previous one, found by
// scanning the user's events in order (window functions), not by an index lookup per step.
const funnelPeer = await time(() => analyticsSql`
  with ev as (
    select users_id as who, event, ts from tracked_events
    where product_id = ${product.productId} and users_id is not null and event = any(${events}::text[])
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

const ours = (funnel.result as { steps: { count: number }[] }).steps.map((s) => s.count)
const theirs = Object.values((funnelPeer.result as Record<string, string>[])[0]!).map(Number)
const ms = (v: number) => `${v.toFixed(1)} ms`
console.log(`\nAnalytics over ${EVENTS.toLocaleString('en')} events, ${USERS.toLocaleString('en')} users, 30 days (${navigator.hardwareConcurrency} cores; p50 and max of ${RUNS} runs after one warm-up)\n`)
console.log('| query | platform | peer | peer is |')
console.log('| --- | ---: | ---: | --- |')
console.log(`| metric: purchases and buyers per Berlin day by plan | ${ms(metric.p50)} (max ${ms(metric.max)}) | ${ms(metricPeer.p50)} (max ${ms(metricPeer.max)}) | the bare SQL for the same numbers |`)
console.log(`| funnel: signup → view → add_to_cart → purchase, 14 d | ${ms(funnel.p50)} (max ${ms(funnel.max)}) | ${ms(funnelPeer.p50)} (max ${ms(funnelPeer.max)}) | the same funnel with joins over all step events |`)
console.log(`\nfunnel counts: platform ${ours.join(' / ')}; peer ${theirs.join(' / ')} (${ours.join() === theirs.join() ? 'equal' : 'DIFFERENT'})`)
const metricRows = (metric.result as { rows: unknown[] }).rows.length
console.log(`metric rows: platform ${metricRows} (every day × plan, empty days filled); peer ${(metricPeer.result as unknown[]).length}`)

const cleanup = unboundedSql() // a million rows take longer to delete than the API's statement deadline
await cleanup`delete from products where id = ${product.productId}` // its events go with it
await Promise.all([cleanup.end(), sql.end(), analyticsSql.end()])
await closeRedis()
process.exit(0)
