// Capture, the catalog, metric queries and funnels, checked on a small fixed data set across a DST change (Europe/Berlin,
// 2026-03-29) and a month boundary, against numbers worked out by hand below, not by the same SQL.
import { beforeAll, describe, expect, test } from 'bun:test'
import { sql, unboundedSql } from '../../shared/db/client'
import { call, newProduct, ok, startProcess } from '../helpers'

type Owner = Awaited<ReturnType<typeof newProduct>>
const as = (owner: Owner, method: string, path: string, body?: unknown) => call(method, path, { token: owner.token, productId: owner.productId, body })

let owner: Owner
// Berlin is UTC+1 until 2026-03-29 02:00 local, UTC+2 after.
const EVENTS = [
  { event: 'signup', timestamp: '2026-03-28T22:30:00Z', identity: { users_id: 'u1' }, properties: { source: 'ads' } }, // Berlin 03-28 23:30
  { event: 'signup', timestamp: '2026-03-28T23:30:00Z', identity: { users_id: 'u2' }, properties: { source: 'ads' } }, // Berlin 03-29 00:30
  { event: 'signup', timestamp: '2026-03-29T22:30:00Z', identity: { users_id: 'u3' }, properties: { source: 'organic' } }, // Berlin 03-30 00:30
  { event: 'purchase', timestamp: '2026-03-28T10:00:00Z', identity: { users_id: 'u4' }, properties: { amount: 7 } }, // before u4's signup
  { event: 'signup', timestamp: '2026-03-29T10:00:00Z', identity: { users_id: 'u4', anonymous_id: 'a4' }, properties: { source: 'organic' } },
  { event: 'purchase', timestamp: '2026-03-31T21:59:00Z', identity: { users_id: 'u1' }, properties: { amount: 10, plan: 'pro' } }, // Berlin 03-31 23:59
  { event: 'purchase', timestamp: '2026-03-31T22:00:00Z', identity: { users_id: 'u2' }, properties: { amount: 20 } }, // Berlin 04-01 00:00
  { event: 'refund', timestamp: '2026-04-01T10:00:00Z', identity: { users_id: 'u1' }, properties: { amount: 10 } },
]
beforeAll(async () => {
  owner = await newProduct('Analytics')
  const captured = await as(owner, 'POST', '/tracking/events', { events: EVENTS })
  expect(captured.body).toEqual({ accepted: EVENTS.length })
})

const query = async (body: Record<string, unknown>) => {
  const result = await as(owner, 'POST', '/analytics/query', body)
  if (result.status !== 200) throw new Error(`query: ${result.status} ${JSON.stringify(result.body)}`)
  return result.body
}
const RANGE = { from: '2026-03-28T00:00:00+01:00', to: '2026-04-02T00:00:00+02:00' }

describe('capture', () => {
  test('a batch is validated whole (400 naming /body/events/<i>/...) and stored all or nothing', async () => {
    const product = await newProduct()
    const count = async () => Number((await sql`select count(*) from tracked_events where product_id = ${product.productId}`)[0]!.count)
    const good = { event: 'x', identity: { anonymous_id: 'a' } }
    const cases: [unknown[], string][] = [
      [[good, good, good, { event: 'x', identity: {} }], '/body/events/3/identity'],
      [[good, { event: 'x', identity: { users_id: 'u' }, timestamp: 'yesterday' }], '/body/events/1/timestamp'],
      [[good, { event: 'x', identity: { users_id: ' ', email: '\t' } }], '/body/events/1/identity'], // blank names nobody
      // Times JavaScript's Date takes but PostgreSQL refuses (or rolls over): each is a 400, never a 500.
      [[{ ...good, timestamp: '2026-02-30T00:00:00Z' }], '/body/events/0/timestamp'],
      [[{ ...good, timestamp: '0000-01-01T00:00:00Z' }], '/body/events/0/timestamp'],
      [[{ ...good, timestamp: '2026-01-01T00:00:00+23:00' }], '/body/events/0/timestamp'],
      [[{ ...good, timestamp: '2026-01-01T24:00:00Z' }], '/body/events/0/timestamp'],
      [[{ ...good, timestamp: '2026-01-01T12:00:00' }], '/body/events/0/timestamp'], // no zone
      [[{ ...good, properties: { blob: 'x'.repeat(9000) } }], '/body/events/0/properties'],
      [[{ ...good, event: '' }], '/body/events/0/event'],
      [[{ ...good, extra: 1 }], '/body/events/0/extra'],
      [Array.from({ length: 1001 }, () => good), '/body/events'],
      [[], '/body/events'],
    ]
    for (const [events, path] of cases) {
      const result = await as(product, 'POST', '/tracking/events', { events })
      expect([path, result.status, result.body.fields?.map((f: { path: string }) => f.path)]).toEqual([path, 400, expect.arrayContaining([path])])
    }
    expect(await count()).toBe(0)
    expect((await as(product, 'POST', '/tracking/events', { events: Array.from({ length: 1000 }, () => good) })).body).toEqual({ accepted: 1000 })
    expect(await count()).toBe(1000)
  })
})

describe('catalog', () => {
  test('exactly the spec\'s fields; tracked events, emails and email events, each declared by its area', async () => {
    const catalog = (await as(owner, 'GET', '/analytics/catalog')).body
    expect(Object.keys(catalog).sort()).toEqual(['cycle', 'entities', 'generated_at', 'product_id'])
    expect(catalog.product_id).toBe(owner.productId)
    const now = new Date()
    expect(catalog.cycle).toEqual({
      from: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)).toISOString(),
      to: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString(),
    })
    for (const entity of catalog.entities) {
      expect(Object.keys(entity).sort()).toEqual(['description', 'dimensions', 'entity', 'entityName', 'extensionSlug', 'identityKinds', 'metrics', 'propertiesColumn', 'timeColumn'])
      for (const metric of entity.metrics) expect(['count', 'sum', 'avg', 'ratio']).toContain(metric.type)
      for (const kind of entity.identityKinds) expect(['email', 'phone', 'users_id', 'anonymous_id']).toContain(kind)
    }
    const names = catalog.entities.map((e: { entity: string; extensionSlug: string }) => `${e.extensionSlug}/${e.entity}`)
    expect(names).toEqual(expect.arrayContaining(['tracking/events', 'mail/emails', 'mail/email_events']))
  })
})

describe('metric queries', () => {
  test('day buckets in Europe/Berlin across the DST change: local days, empty days 0, buckets as UTC instants', async () => {
    const result = await query({ entity: 'events', metrics: ['count'], bucket: 'day', timezone: 'Europe/Berlin', range: RANGE, filters: [{ field: 'event', op: 'equals', value: 'signup' }] })
    expect(result.rows).toEqual([
      { bucket: '2026-03-27T23:00:00.000Z', count: 1 }, // 03-28 (CET): u1
      { bucket: '2026-03-28T23:00:00.000Z', count: 2 }, // 03-29: u2 00:30 CET, u4 12:00 CEST
      { bucket: '2026-03-29T22:00:00.000Z', count: 1 }, // 03-30 (CEST from here): u3
      { bucket: '2026-03-30T22:00:00.000Z', count: 0 },
      { bucket: '2026-03-31T22:00:00.000Z', count: 0 },
    ])
    expect(result.truncated).toBe(false)
  })

  test('the same events in UTC days, and months on either side of the boundary depending on the zone', async () => {
    const utc = await query({ entity: 'events', metrics: ['count'], bucket: 'day', range: { from: '2026-03-28T00:00:00Z', to: '2026-04-01T00:00:00Z' }, filters: [{ field: 'event', op: 'equals', value: 'signup' }] })
    expect(utc.rows.map((r: { count: number }) => r.count)).toEqual([2, 2, 0, 0]) // 28: u1 u2; 29: u3 u4
    const months = (timezone: string) => query({ entity: 'events', metrics: ['count'], bucket: 'month', timezone, range: { from: '2026-03-01T00:00:00Z', to: '2026-04-30T00:00:00Z' }, filters: [{ field: 'event', op: 'equals', value: 'purchase' }] })
    expect((await months('UTC')).rows.map((r: { count: number }) => r.count)).toEqual([3, 0]) // all three purchases are in March, UTC
    expect((await months('Europe/Berlin')).rows.map((r: { count: number }) => r.count)).toEqual([2, 1]) // u2's is April 1st in Berlin
  })

  test('hour buckets are real hours: across the fall-back in Europe/Berlin (2026-10-25) the twice-lived 02:00 is two buckets', async () => {
    const product = await newProduct()
    ok(await as(product, 'POST', '/tracking/events', {
      events: [
        { event: 'e', timestamp: '2026-10-25T02:30:00+02:00', identity: { users_id: 'a' } }, // 00:30 UTC, the first 02:30
        { event: 'e', timestamp: '2026-10-25T02:30:00+01:00', identity: { users_id: 'b' } }, // 01:30 UTC, the second 02:30
        { event: 'e', timestamp: '2026-10-25T02:45:00+01:00', identity: { users_id: 'c' } },
      ],
    }), 'capture events')
    const result = await as(product, 'POST', '/analytics/query', { entity: 'events', metrics: ['count'], bucket: 'hour', timezone: 'Europe/Berlin', range: { from: '2026-10-24T23:00:00Z', to: '2026-10-25T03:00:00Z' } })
    expect(result.body.rows).toEqual([
      { bucket: '2026-10-24T23:00:00.000Z', count: 0 }, // 01:00 CEST
      { bucket: '2026-10-25T00:00:00.000Z', count: 1 }, // 02:00 CEST
      { bucket: '2026-10-25T01:00:00.000Z', count: 2 }, // 02:00 CET
      { bucket: '2026-10-25T02:00:00.000Z', count: 0 }, // 03:00 CET
    ])
    // A zone half an hour off the hour: its hours start at :30 UTC.
    const kolkata = await as(product, 'POST', '/analytics/query', { entity: 'events', metrics: ['count'], bucket: 'hour', timezone: 'Asia/Kolkata', range: { from: '2026-10-25T00:30:00Z', to: '2026-10-25T02:30:00Z' } })
    expect(kolkata.body.rows).toEqual([{ bucket: '2026-10-25T00:30:00.000Z', count: 1 }, { bucket: '2026-10-25T01:30:00.000Z', count: 2 }])
  })

  test('dimensions, distinct identities, and every filter operator on dimensions and properties', async () => {
    const all = { entity: 'events', range: RANGE }
    const byEvent = await query({ ...all, metrics: ['count', 'identities'], dimensions: ['event'] })
    expect(byEvent.rows).toEqual([
      { event: 'purchase', count: 3, identities: 3 },
      { event: 'refund', count: 1, identities: 1 },
      { event: 'signup', count: 4, identities: 4 },
    ])
    const count = async (filters: unknown[]) => (await query({ ...all, metrics: ['count'], filters })).rows[0].count
    expect(await count([{ field: 'properties.amount', op: 'gt', value: 7 }])).toBe(3) // 10, 20, refund 10
    expect(await count([{ field: 'properties.amount', op: 'gte', value: 7 }])).toBe(4)
    expect(await count([{ field: 'properties.amount', op: 'lt', value: 10 }])).toBe(1)
    expect(await count([{ field: 'properties.amount', op: 'lte', value: 10 }])).toBe(3)
    expect(await count([{ field: 'properties.source', op: 'in', value: ['ads', 'nope'] }])).toBe(2)
    expect(await count([{ field: 'properties.source', op: 'notEquals', value: 'ads' }])).toBe(6)
    expect(await count([{ field: 'properties.source', op: 'contains', value: 'GAN' }])).toBe(2) // organic, case-insensitive
    expect(await count([{ field: 'properties.plan', op: 'set' }])).toBe(1)
    expect(await count([{ field: 'properties.plan', op: 'notSet' }])).toBe(7)
    expect(await count([{ field: 'event', op: 'equals', value: 'purchase' }, { field: 'users_id', op: 'equals', value: 'u1' }])).toBe(1)
    expect(await count([{ field: 'properties.source', op: 'gt', value: 1 }])).toBe(0) // text is never greater than a number, and no error
  })

  test('ratio metrics are null where the denominator is 0; empty buckets are 0 for counts and sums, null for averages', async () => {
    const empty = await query({ entity: 'emails', metrics: ['count', 'recipients', 'avg_recipients', 'delivery_rate'], bucket: 'day', range: { from: '2026-01-01T00:00:00Z', to: '2026-01-03T00:00:00Z' } })
    expect(empty.rows).toEqual([
      { bucket: '2026-01-01T00:00:00.000Z', count: 0, recipients: 0, avg_recipients: null, delivery_rate: null },
      { bucket: '2026-01-02T00:00:00.000Z', count: 0, recipients: 0, avg_recipients: null, delivery_rate: null },
    ])
  })

  test('every name is resolved against the catalog: an unknown one is 400 naming it and the field', async () => {
    const base = { entity: 'events', metrics: ['count'], range: RANGE }
    const cases: [Record<string, unknown>, string][] = [
      [{ ...base, entity: 'nope' }, '/body/entity'],
      [{ ...base, metrics: ['count', 'revenue'] }, '/body/metrics/1'],
      [{ ...base, dimensions: ['country'] }, '/body/dimensions/0'],
      [{ ...base, filters: [{ field: 'nope', op: 'equals', value: 'x' }] }, '/body/filters/0/field'],
      [{ ...base, filters: [{ field: 'event', op: 'in', value: 'x' }] }, '/body/filters/0/value'],
      [{ ...base, filters: [{ field: 'event', op: 'gt', value: 'x' }] }, '/body/filters/0/value'],
      [{ ...base, filters: [{ field: 'event', op: 'between', value: 1 }] }, '/body/filters/0/op'],
      [{ ...base, timezone: 'Mars/Olympus' }, '/body/timezone'],
      [{ ...base, range: { from: 'last week' } }, '/body/range/from'],
      [{ ...base, range: { from: '-999999w' } }, '/body/range/from'], // before the year 0001
      [{ ...base, range: { from: '0000-01-01' } }, '/body/range/from'],
      [{ ...base, range: { from: '2026-02-30' } }, '/body/range/from'],
      [{ ...base, range: { from: '2026-01-01T00:00:00Z', to: '2026-01-02T00:00:00-15:00' } }, '/body/range/to'],
      [{ ...base, range: { from: '2026-04-01T00:00:00Z', to: '2026-03-01T00:00:00Z' } }, '/body/range/from'],
      [{ ...base, bucket: 'hour', range: { from: '2020-01-01T00:00:00Z', to: '2026-01-01T00:00:00Z' } }, '/body/bucket'],
      [{ ...base, bucket: 'minute' }, '/body/bucket'],
      // the zone's 0001-01-01 (Tokyo's local mean time then, +09:18:59) begins in 1 BC: no ISO-8601 instant here names it
      [{ ...base, bucket: 'day', timezone: 'Asia/Tokyo', range: { from: '0001-01-01T00:00:00Z', to: '0001-01-03T00:00:00Z' } }, '/body/range/from'],
      [{ ...base, entity: 'emails', dimensions: ['properties.x'] }, '/body/dimensions/0'], // emails have no properties
    ]
    for (const [body, path] of cases) {
      const result = await as(owner, 'POST', '/analytics/query', body)
      expect([path, result.status, result.body.fields?.map((f: { path: string }) => f.path)]).toEqual([path, 400, expect.arrayContaining([path])])
    }
  })

  test('buckets in the years 0001-0099 are named with their own year, and a first bucket at 0001-01-01 is allowed', async () => {
    const result = await query({ entity: 'events', metrics: ['count'], bucket: 'day', timezone: 'Asia/Tokyo', range: { from: '0050-06-01T00:00:00Z', to: '0050-06-02T00:00:00Z' } })
    expect(result.rows.map((r: { bucket: string }) => r.bucket)).toEqual(['0050-05-31T14:41:01.000Z', '0050-06-01T14:41:01.000Z'])
    const first = await query({ entity: 'events', metrics: ['count'], bucket: 'month', range: { from: '0001-01-01T00:00:00Z', to: '0001-01-02T00:00:00Z' } })
    expect(first.rows).toEqual([{ bucket: '0001-01-01T00:00:00.000Z', count: 0 }])
  })

  test('relative ranges and the row limit', async () => {
    const product = await newProduct()
    const now = Date.now()
    ok(await as(product, 'POST', '/tracking/events', {
      events: [1, 2, 3].map((h) => ({ event: 'e', timestamp: new Date(now - h * 3_600_000).toISOString(), identity: { anonymous_id: `a${h}` } })),
    }), 'capture events')
    const recent = await as(product, 'POST', '/analytics/query', { entity: 'events', metrics: ['count'], range: { from: '-90s' } })
    expect(recent.status).toBe(400) // seconds are not a unit (h, d, w, m for months)
    const lastHours = (await as(product, 'POST', '/analytics/query', { entity: 'events', metrics: ['count'], range: { from: '-24h' } })).body
    expect(lastHours.rows).toEqual([{ count: 3 }])
    const limited = (await as(product, 'POST', '/analytics/query', { entity: 'events', metrics: ['count'], dimensions: ['anonymous_id'], range: { from: '-1d' }, limit: 2 })).body
    expect([limited.rows.length, limited.truncated]).toEqual([2, true])
  })
})

describe('funnels', () => {
  const funnel = async (body: Record<string, unknown>) => {
    const result = await as(owner, 'POST', '/analytics/funnel', body)
    if (result.status !== 200) throw new Error(`funnel: ${result.status} ${JSON.stringify(result.body)}`)
    return result.body
  }
  const steps = (...events: string[]) => events.map((event) => ({ entity: 'events', event }))
  const counts = (result: { steps: { count: number }[] }) => result.steps.map((s) => s.count)

  test('ordered steps within the window from the first step; a step before the previous one does not count', async () => {
    const result = await funnel({ steps: steps('signup', 'purchase'), identity: 'users_id', range: RANGE })
    // u1, u2, u3, u4 signed up; u1 and u2 purchased after; u4's purchase came before its signup.
    expect(result.steps).toEqual([
      { step: 1, entity: 'events', event: 'signup', count: 4, conversionFromPrevious: null, conversionFromFirst: null },
      { step: 2, entity: 'events', event: 'purchase', count: 2, conversionFromPrevious: 0.5, conversionFromFirst: 0.5 },
    ])
    expect(result.windowDays).toBe(14)
    // u1 bought 2 d 23 h 29 min after signing up, u2 2 d 22 h 30 min after: outside a 2-day window, inside 3 days.
    expect(counts(await funnel({ steps: steps('signup', 'purchase'), identity: 'users_id', range: RANGE, windowDays: 2 }))).toEqual([4, 0])
    expect(counts(await funnel({ steps: steps('signup', 'purchase'), identity: 'users_id', range: RANGE, windowDays: 3 }))).toEqual([4, 2])
    const three = await funnel({ steps: steps('signup', 'purchase', 'refund'), identity: 'users_id', range: RANGE })
    expect(counts(three)).toEqual([4, 2, 1])
    expect(three.steps[2].conversionFromPrevious).toBe(0.5)
    expect(three.steps[2].conversionFromFirst).toBe(0.25)
    // Joined on anonymous_id only u4 (a4) is known, and it never purchased after signing up.
    expect(counts(await funnel({ steps: steps('signup', 'purchase'), identity: 'anonymous_id', range: RANGE }))).toEqual([1, 0])
  })

  test('step filters, and a breakdown by a property of the first step', async () => {
    const filtered = await funnel({ steps: [{ entity: 'events', event: 'signup' }, { entity: 'events', event: 'purchase', filters: [{ field: 'properties.amount', op: 'gte', value: 15 }] }], identity: 'users_id', range: RANGE })
    expect(counts(filtered)).toEqual([4, 1]) // only u2's purchase is 15 or more
    const broken = await funnel({ steps: steps('signup', 'purchase'), identity: 'users_id', range: RANGE, breakdown: 'properties.source' })
    expect(broken.breakdown.map((b: { value: string; steps: { count: number }[] }) => [b.value, counts(b)])).toEqual([['ads', [2, 2]], ['organic', [2, 0]]])
    expect(counts(broken)).toEqual([4, 2])
  })

  test('a step that repeats the step before needs a later event, never the same one again, also at the same instant', async () => {
    const product = await newProduct()
    const at = '2026-05-01T10:00:00Z'
    ok(await as(product, 'POST', '/tracking/events', {
      events: [
        { event: 'view', timestamp: at, identity: { users_id: 'once' } }, // one view: reaches step 1 only
        { event: 'view', timestamp: at, identity: { users_id: 'twice' } }, // two views at the same instant: two events
        { event: 'view', timestamp: at, identity: { users_id: 'twice' } },
        { event: 'view', timestamp: at, identity: { users_id: 'thrice' } }, // three views, one a minute
        { event: 'view', timestamp: '2026-05-01T10:01:00Z', identity: { users_id: 'thrice' } },
        { event: 'view', timestamp: '2026-05-01T10:02:00Z', identity: { users_id: 'thrice' } },
      ],
    }), 'capture events')
    const run = async (n: number) => {
      const result = await as(product, 'POST', '/analytics/funnel', { steps: Array.from({ length: n }, () => ({ entity: 'events', event: 'view' })), identity: 'users_id', range: { from: '2026-05-01T00:00:00Z', to: '2026-05-02T00:00:00Z' } })
      expect(result.status).toBe(200)
      return counts(result.body)
    }
    expect(await run(2)).toEqual([3, 2])
    expect(await run(3)).toEqual([3, 2, 1])
    expect(await run(4)).toEqual([3, 2, 1, 0])
  })

  test('names are resolved against the catalog: unknown entity, an entity without events or without the identity kind, 400 naming the field', async () => {
    const base = { steps: steps('signup', 'purchase'), identity: 'users_id', range: RANGE }
    const cases: [Record<string, unknown>, string][] = [
      [{ ...base, steps: [{ entity: 'nope', event: 'x' }, { entity: 'events', event: 'y' }] }, '/body/steps/0/entity'],
      [{ ...base, steps: [{ entity: 'emails', event: 'x' }, { entity: 'events', event: 'y' }] }, '/body/steps/0/entity'],
      [{ ...base, steps: [{ entity: 'events', event: 'x' }, { entity: 'email_events', event: 'delivered' }] }, '/body/identity'],
      [{ ...base, steps: steps('only-one') }, '/body/steps'],
      [{ ...base, steps: steps(...Array.from({ length: 11 }, (_, i) => `e${i}`)) }, '/body/steps'],
      [{ ...base, identity: 'device' }, '/body/identity'],
      [{ ...base, breakdown: 'nope' }, '/body/breakdown'],
      [{ ...base, windowDays: 0 }, '/body/windowDays'],
      [{ ...base, range: { from: '-999999w' } }, '/body/range/from'],
      [{ ...base, range: { from: '2026-02-29T00:00:00Z' } }, '/body/range/from'], // 2026 is not a leap year
    ]
    for (const [body, path] of cases) {
      const result = await as(owner, 'POST', '/analytics/funnel', body)
      expect([path, result.status, result.body.fields?.map((f: { path: string }) => f.path)]).toEqual([path, 400, expect.arrayContaining([path])])
    }
  })
})

test('an injection battery changes no result and raises no 500', async () => {
  const hostile = ["'", "\"", "'; drop table tracked_events; --", 'signup\' or \'1\'=\'1', '\\', '%', '_', 'SELECT', 'ü\u202e', '$1', ')::text; --']
  const baseline = (await query({ entity: 'events', metrics: ['count'], range: RANGE })).rows[0].count
  for (const value of hostile) {
    for (const body of [
      { entity: 'events', metrics: ['count'], range: RANGE, filters: [{ field: 'event', op: 'equals', value }] },
      { entity: 'events', metrics: ['count'], range: RANGE, filters: [{ field: 'event', op: 'contains', value }] },
      { entity: 'events', metrics: ['count'], range: RANGE, filters: [{ field: `properties.${value}`, op: 'set' }] },
      { entity: 'events', metrics: ['count'], range: RANGE, dimensions: [`properties.${value}`] },
      { entity: value, metrics: ['count'], range: RANGE },
      { entity: 'events', metrics: [value], range: RANGE },
      { entity: 'events', metrics: ['count'], range: RANGE, timezone: value },
    ]) {
      const result = await as(owner, 'POST', '/analytics/query', body)
      expect({ value, status: result.status < 500 }).toEqual({ value, status: true })
      // No event, property or text of the data set matches a hostile value: a result other than 0 would be injected.
      if (result.status === 200 && !body.dimensions) expect({ value, count: result.body.rows[0].count }).toEqual({ value, count: 0 })
    }
    const funnelResult = await as(owner, 'POST', '/analytics/funnel', { steps: [{ entity: 'events', event: value }, { entity: 'events', event: 'purchase' }], identity: 'users_id', range: RANGE, breakdown: `properties.${value}` })
    expect({ value, status: funnelResult.status }).toEqual({ value, status: 200 })
    expect(funnelResult.body.steps[0].count).toBe(0)
  }
  expect((await query({ entity: 'events', metrics: ['count'], range: RANGE })).rows[0].count).toBe(baseline)
})

// Events of the next two tests carry a time of their own, inside a fixed range. Left to default, capture stamps them
// with its clock to the millisecond, and a query ranging to `now` (exclusive) planned within that same millisecond
// leaves them all out: one run in five when the query directly follows the capture in-process.
const AT = '2026-05-01T10:00:00Z'
const AROUND_AT = { from: '2026-05-01T00:00:00Z', to: '2026-05-02T00:00:00Z' }

test('a range takes from and leaves out to: an event stamped exactly at to is outside it (as one captured in the millisecond a query to now is planned)', async () => {
  const product = await newProduct()
  ok(await as(product, 'POST', '/tracking/events', {
    events: [{ event: 'e', timestamp: AROUND_AT.from, identity: { users_id: 'at-from' } }, { event: 'e', timestamp: AROUND_AT.to, identity: { users_id: 'at-to' } }],
  }), 'capture events')
  const result = await as(product, 'POST', '/analytics/query', { entity: 'events', metrics: ['count'], dimensions: ['users_id'], range: AROUND_AT })
  expect([result.status, result.body.rows]).toEqual([200, [{ users_id: 'at-from', count: 1 }]])
})

test('a property key of any length capture takes (200 characters) can be filtered and grouped by', async () => {
  const product = await newProduct()
  const key = 'k'.repeat(200)
  expect((await as(product, 'POST', '/tracking/events', { events: [{ event: 'e', timestamp: AT, identity: { users_id: 'u' }, properties: { [key]: 'v' } }] })).status).toBe(200)
  const result = await as(product, 'POST', '/analytics/query', { entity: 'events', metrics: ['count'], range: AROUND_AT, dimensions: [`properties.${key}`], filters: [{ field: `properties.${key}`, op: 'set' }] })
  expect([result.status, result.body.rows]).toEqual([200, [{ [`properties.${key}`]: 'v', count: 1 }]])
})

test('a numeric filter over a property whose text would overflow a number: no match, no 500', async () => {
  const product = await newProduct()
  ok(await as(product, 'POST', '/tracking/events', { events: ['1e999999', '-1e-999999', '5', '12'].map((amount) => ({ event: 'e', timestamp: AT, identity: { users_id: amount }, properties: { amount } })) }), 'capture events')
  const result = await as(product, 'POST', '/analytics/query', { entity: 'events', metrics: ['count'], range: AROUND_AT, filters: [{ field: 'properties.amount', op: 'gt', value: 1 }] })
  expect([result.status, result.body.rows]).toEqual([200, [{ count: 2 }]]) // 5 and 12; the overflowing texts are not numbers here
})

test('a query past the statement timeout is 422 query_timeout, and the worker keeps serving', async () => {
  const product = await newProduct()
  const seed = unboundedSql() // a bulk insert longer than the API's own statement deadline
  await seed`
    insert into tracked_events (product_id, event, ts, users_id, properties)
    select ${product.productId}, 'e' || (i % 7), now() - (i || ' seconds')::interval, 'u' || (i % 5000), jsonb_build_object('n', i)
    from generate_series(1, 200000) as i`
  await seed.end()
  const worker = await startProcess('api', { ANALYTICS_QUERY_TIMEOUT_MS: '1' })
  try {
    const post = (path: string, body: unknown) => fetch(`${worker.url}${path}`, {
      method: 'POST', headers: { authorization: `Bearer ${product.token}`, 'x-product-id': product.productId, 'content-type': 'application/json' }, body: JSON.stringify(body),
    })
    const slow = await post('/analytics/query', { entity: 'events', metrics: ['identities'], dimensions: ['properties.n'], range: { from: '-7d' } })
    expect([slow.status, ((await slow.json()) as { error: string }).error]).toEqual([422, 'query_timeout'])
    const funnel = await post('/analytics/funnel', { steps: [{ entity: 'events', event: 'e1' }, { entity: 'events', event: 'e2' }], identity: 'users_id', range: { from: '-7d' } })
    expect(funnel.status).toBe(422)
    expect((await fetch(`${worker.url}/healthz`)).status).toBe(200)
  } finally {
    await worker.stop()
  }
  // One product may run only so many queries at once on a worker; the excess is 429 with Retry-After, others unaffected.
  const capped = await startProcess('api', { ANALYTICS_MAX_CONCURRENT_PER_PRODUCT: '1' })
  try {
    const post = (owner: Owner, body: unknown) => fetch(`${capped.url}/analytics/query`, {
      method: 'POST', headers: { authorization: `Bearer ${owner.token}`, 'x-product-id': owner.productId, 'content-type': 'application/json' }, body: JSON.stringify(body),
    })
    const heavy = { entity: 'events', metrics: ['identities'], dimensions: ['properties.n'], range: { from: '-7d' }, limit: 1 }
    const [answers, theirs] = await Promise.all([
      Promise.all(Array.from({ length: 4 }, () => post(product, heavy))),
      Bun.sleep(20).then(() => post(owner, { entity: 'events', metrics: ['count'], range: RANGE })),
    ])
    const statuses = answers.map((r) => r.status).sort()
    expect(statuses[0]).toBe(200)
    expect(statuses.at(-1)).toBe(429)
    const refused = answers.find((r) => r.status === 429)!
    const body = (await refused.json()) as { error: string; retryAfter: number }
    expect([refused.headers.get('retry-after'), body.error, body.retryAfter]).toEqual(['1', 'too_many_queries', 1])
    expect(theirs.status).toBe(200) // another product is not held back
    expect((await post(product, { entity: 'events', metrics: ['count'], range: { from: '-1d' } })).status).toBe(200) // freed when done
  } finally {
    await capped.stop()
  }
}, 60_000)

test('events captured without a timestamp are in a query up to now made at once after, whatever the millisecond', async () => {
  const product = await newProduct()
  // Repeated: a capture and a query in the same millisecond was the case that lost the events (to is exclusive); 200
  // rounds meet that millisecond in practically every run without the fix.
  for (let round = 1; round <= 200; round++) {
    ok(await as(product, 'POST', '/tracking/events', { events: [{ event: 'tick', identity: { users_id: 'u' } }] }), 'capture an event')
    const result = await as(product, 'POST', '/analytics/query', { entity: 'events', metrics: ['count'], range: { from: '-1h' } })
    expect([round, result.status, result.body.rows]).toEqual([round, 200, [{ count: round }]])
  }
})
