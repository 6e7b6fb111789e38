// Analytics planning without a database: what SQL and parameters a metric query or a funnel becomes, and what is
// refused with the field named. Only PostgreSQL's time rules are asked of a database, here an in-memory stand-in.
import { expect, test } from 'bun:test'
import { config } from '../../shared/config'
import { ApiError, type FieldError } from '../../shared/errors'
import { catalogOf } from '../../services/api/analytics/semantic/catalog'
import { planFunnel } from '../../services/api/analytics/semantic/funnel'
import { planMetricQuery } from '../../services/api/analytics/semantic/metric-query'
import type { PlanningDatabase } from '../../services/api/analytics/semantic/plan'
import type { Funnel, MetricQuery } from '../../services/api/analytics/semantic/query-schemas'

const PRODUCT = '11111111-2222-4333-8444-555555555555'
const NOW = new Date('2026-06-15T12:00:00Z')
const RANGE = { from: '2026-06-01T00:00:00Z', to: '2026-06-08T00:00:00Z' }

/** Knows two zones and counts the questions it is asked; a bucket starts where `bucketStart` says. */
function database(bucketStart = (from: Date) => from.getTime()) {
  const asked: string[] = []
  const db: PlanningDatabase = {
    async timezones() {
      asked.push('timezones')
      return new Set(['UTC', 'Europe/Berlin'])
    },
    async bucketStartMs(from, bucket, timezone) {
      asked.push(`bucket ${bucket} ${timezone}`)
      return bucketStart(from)
    },
    async rollupState() {
      asked.push('rollups')
      return { watermark: 0, sets: [] }
    },
  }
  return { db, asked }
}

const plan = (query: Partial<MetricQuery>, db = database().db) =>
  planMetricQuery(PRODUCT, { entity: 'events', metrics: ['count'], range: RANGE, ...query } as MetricQuery, '/body', NOW, db)

/** The 400 a plan was refused with, as the caller sees it: its code and the fields it names. */
async function refusal(planning: () => unknown): Promise<{ status: number; code: string; fields: FieldError[] }> {
  try {
    await planning()
  } catch (error) {
    if (!(error instanceof ApiError)) throw error
    return { status: error.status, code: error.code, fields: error.extra.fields as FieldError[] }
  }
  throw new Error('planned, not refused')
}

test('names from the request never reach SQL: a property key and a filter value are parameters, and so is the product', async () => {
  const key = `plan'); drop table tracked_events; --`
  const { text, params } = await plan({ dimensions: [`properties.${key}`], filters: [{ field: 'event', op: 'equals', value: 'signup' }] })
  expect(text).not.toContain('drop table')
  expect(text).not.toContain('signup')
  expect(params.values).toContain(key)
  expect(params.values).toContain('signup')
  expect(text).toContain(`s.product_id = $${params.values.indexOf(PRODUCT) + 1} and`)
})

test('an unknown dimension is refused naming the field and the dimensions there are', async () => {
  const refused = await refusal(() => plan({ dimensions: ['event', 'country'] }))
  expect(refused.status).toBe(400)
  expect(refused.code).toBe('validation_failed')
  expect(refused.fields).toEqual([{ path: '/body/dimensions/1', message: 'names no dimension of events; one of "event", "users_id", "anonymous_id", or properties.<key>' }])
})

test('a property of an entity that has none is refused; the entity, metric and filter field are each named where they stand', async () => {
  const property = await refusal(() => plan({ entity: 'emails', dimensions: ['properties.plan'] }))
  expect(property.fields).toEqual([{ path: '/body/dimensions/0', message: 'names no dimension of emails; one of "status", "domain"' }])
  expect((await refusal(() => plan({ entity: 'orders' }))).fields[0]!.path).toBe('/body/entity')
  const metric = await refusal(() => plan({ metrics: ['count', 'revenue'] }))
  expect(metric.fields).toEqual([{ path: '/body/metrics/1', message: 'names no metric of events; one of "count", "identities"' }])
  expect((await refusal(() => plan({ filters: [{ field: 'nope', op: 'set' }] }))).fields[0]!.path).toBe('/body/filters/0/field')
})

test('a filter without the value its operator needs is refused at its value; numbers compare as numbers', async () => {
  const refused = await refusal(() => plan({ filters: [{ field: 'event', op: 'in', value: 'signup' }] }))
  expect(refused.fields).toEqual([{ path: '/body/filters/0/value', message: 'is required for in: an array of values' }])
  expect((await refusal(() => plan({ filters: [{ field: 'properties.amount', op: 'gt', value: 'ten' }] }))).fields[0]!.message).toBe('is required for gt: a number')
  const { text, params } = await plan({ filters: [{ field: 'properties.amount', op: 'gt', value: 10 }] })
  expect(params.values).toContain(10)
  expect(text).toMatch(/::numeric end\) > \$\d+::numeric/)
})

test('the range is bound as parameters: relative to now, `to` defaulting to now and including this millisecond', async () => {
  const { params, result } = await plan({ range: { from: '-7d' } })
  const week = new Date(NOW.getTime() - 7 * 86_400_000).toISOString()
  const justAfterNow = new Date(NOW.getTime() + 1).toISOString()
  expect(params.values.slice(1, 3)).toEqual([week, justAfterNow])
  expect(result.range).toEqual({ from: week, to: justAfterNow })
})

test('a range that ends before it starts, or a time that is none, is refused naming which end', async () => {
  const backwards = await refusal(() => plan({ range: { from: RANGE.to, to: RANGE.from } }))
  expect(backwards.fields).toEqual([{ path: '/body/range/from', message: 'must be before to' }])
  expect((await refusal(() => plan({ range: { from: '-7d', to: 'yesterday' } }))).fields[0]!.path).toBe('/body/range/to')
  expect((await refusal(() => plan({ range: { from: '2026-02-30T00:00:00Z' } }))).fields[0]!.path).toBe('/body/range/from')
})

test('a time zone the database does not know is refused; a known one cuts the buckets as a parameter', async () => {
  const refused = await refusal(() => plan({ bucket: 'day', timezone: 'Mars/Olympus' }))
  expect(refused.fields).toEqual([{ path: '/body/timezone', message: 'is not an IANA time zone known to the database, such as UTC or Europe/Berlin' }])
  const { text, params, result } = await plan({ bucket: 'day', timezone: 'Europe/Berlin' })
  expect(params.values).toContain('Europe/Berlin')
  expect(text).not.toContain('Europe/Berlin')
  expect(text).toContain('generate_series')
  expect(result).toMatchObject({ bucket: 'day', timezone: 'Europe/Berlin' })
})

test('more buckets than the range may span are refused at the bucket; a coarser bucket over the same range is planned', async () => {
  const year = { from: '2025-06-01T00:00:00Z', to: '2026-06-01T00:00:00Z' }
  const refused = await refusal(() => plan({ bucket: 'hour', range: year }))
  expect(refused.fields[0]!.path).toBe('/body/bucket')
  expect(refused.fields[0]!.message).toContain(`more than ${config.analytics.maxBuckets} buckets`)
  expect((await plan({ bucket: 'day', range: year })).result.bucket).toBe('day')
})

test('the database is asked where the first bucket starts only near the year 0001, and one before it is refused', async () => {
  const usual = database()
  await plan({ bucket: 'week', exact: true }, usual.db)
  expect(usual.asked).toEqual(['timezones'])
  const early = database(() => Date.parse('0001-01-01T00:00:00Z') - 1)
  const refused = await refusal(() => plan({ bucket: 'week', range: { from: '0001-01-01T00:00:00Z', to: '0001-02-01T00:00:00Z' } }, early.db))
  expect(early.asked).toEqual(['timezones', 'bucket week UTC'])
  expect(refused.fields).toEqual([{ path: '/body/range/from', message: 'puts the first week bucket in UTC before the year 0001: start the range later' }])
})

test('rows are limited to what was asked, never more than the configured most, with one more row to tell truncation', async () => {
  const asked = await plan({ limit: 5 })
  expect(asked.limit).toBe(5)
  expect(asked.params.values.at(-1)).toBe(6)
  const unbounded = await plan({})
  expect(unbounded.limit).toBe(config.analytics.maxRows)
  expect(unbounded.params.values.at(-1)).toBe(config.analytics.maxRows + 1)
})

const funnel = (over: Partial<Funnel> = {}): Funnel => ({
  steps: [{ entity: 'events', event: 'signup' }, { entity: 'events', event: 'purchase' }], identity: 'users_id', range: RANGE, ...over,
})

test('a funnel binds its events, window and range as parameters and answers one row without a breakdown', () => {
  const planned = planFunnel(PRODUCT, funnel(), '/body', NOW)
  expect(planned.params.values).toEqual(expect.arrayContaining([PRODUCT, 14, 'signup', 'purchase', '2026-06-01T00:00:00.000Z', '2026-06-08T00:00:00.000Z']))
  expect(planned.text).not.toContain('signup')
  expect(planned).toMatchObject({ windowDays: 14, breakdown: false, range: { from: '2026-06-01T00:00:00.000Z', to: '2026-06-08T00:00:00.000Z' } })
  expect(planned.text).toContain('left join lateral')
})

test('a funnel breakdown answers at most 50 values, largest first; an unknown breakdown is refused at breakdown', async () => {
  const planned = planFunnel(PRODUCT, funnel({ breakdown: 'properties.plan', windowDays: 3 }), '/body', NOW)
  expect(planned.breakdown).toBe(true)
  expect(planned.windowDays).toBe(3)
  expect(planned.text).toMatch(/order by c0 desc, f\.value limit 50\s*$/)
  expect(planned.params.values).toContain('plan')
  const refused = await refusal(() => planFunnel(PRODUCT, funnel({ breakdown: 'country' }), '/body', NOW))
  expect(refused.fields[0]!.path).toBe('/body/breakdown')
})

test('a funnel step needs an entity with events and the chosen identity kind, each refusal naming its place', async () => {
  const noEvents = await refusal(() => planFunnel(PRODUCT, funnel({ steps: [{ entity: 'events', event: 'a' }, { entity: 'emails', event: 'b' }] }), '/body', NOW))
  expect(noEvents.fields).toEqual([{ path: '/body/steps/1/entity', message: 'has no events to make a funnel step of' }])
  const nobody = await refusal(() => planFunnel(PRODUCT, funnel({ steps: [{ entity: 'email_events', event: 'sent' }, { entity: 'email_events', event: 'delivered' }] }), '/body', NOW))
  expect(nobody.fields).toEqual([{ path: '/body/identity', message: 'is not an identity kind of email_events (step 1); it has none' }])
})

test('the catalog lists names and descriptions of every entity, and none of the SQL behind them', () => {
  const catalog = catalogOf(PRODUCT, NOW)
  expect(catalog.entities.map((e) => e.entity)).toEqual(['events', 'emails', 'email_events', 'realtime_usage', 'realtime_connections'])
  expect(catalog.cycle).toEqual({ from: '2026-06-01T00:00:00.000Z', to: '2026-07-01T00:00:00.000Z' })
  const text = JSON.stringify(catalog)
  for (const sql of ['select', 'count(', 's.', 'coalesce']) expect(text).not.toContain(sql)
})

test('a query over tracked events reads rollups unless it asks for exact answers, reads a field rollups lack, or names keys no ready set holds', async () => {
  const viaRollups = (text: string) => text.includes('analytics_event_rollups')
  const asked = database()
  expect(viaRollups((await plan({ metrics: ['count', 'identities'], bucket: 'day' }, asked.db)).text)).toBe(true)
  expect(asked.asked).toEqual(['timezones', 'rollups'])
  expect((await plan({ metrics: ['identities'] })).result.approximate).toBe(true)
  expect((await plan({ metrics: ['count'] })).result.approximate).toBe(false)
  const exact = database()
  const refused = await plan({ metrics: ['identities'], exact: true }, exact.db)
  expect(viaRollups(refused.text)).toBe(false)
  expect(refused.result.approximate).toBe(false)
  expect(exact.asked).toEqual(['timezones'])
  expect(viaRollups((await plan({ dimensions: ['users_id'] })).text)).toBe(false)
  expect(viaRollups((await plan({ dimensions: ['properties.plan'] })).text)).toBe(false)
  const withSet = database()
  withSet.db.rollupState = async () => ({ watermark: 7, sets: [{ id: 3, keys: ['plan', 'source'] }] })
  const bySet = await plan({ dimensions: ['properties.plan'], filters: [{ field: 'properties.source', op: 'equals', value: 'ad' }] }, withSet.db)
  expect(viaRollups(bySet.text)).toBe(true)
  expect(bySet.params.values).toContain(3)
  expect(bySet.params.values).toContain(7)
  // A range without one whole UTC hour reads raw events alone and never asks.
  const short = database()
  expect(viaRollups((await plan({ range: { from: '2026-03-01T10:10:00Z', to: '2026-03-01T10:50:00Z' } }, short.db)).text)).toBe(false)
  expect(short.asked).toEqual(['timezones'])
})
