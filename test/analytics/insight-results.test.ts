// Kept funnel results: a funnel insight's runs answer its kept result while fresher than the TTL (new events are not
// counted until it is recomputed), refresh: true recomputes, an edited query or a deleted insight drops the result, two
// runs of a stale insight compute it once, and the background refresh recomputes the funnels dashboards use, one per
// product a round, oldest first, skipping a failing one, one worker at a time.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { sql } from '../../shared/db/client'
import { registry } from '../../shared/metrics/registry'
import { refreshRound } from '../../services/api/analytics/funnel-refresher'
import { runInsight } from '../../services/api/analytics/insights'
import { call, eventually, failingFields, newProduct, startProcess } from '../helpers'

type Owner = Awaited<ReturnType<typeof newProduct>>
const as = (owner: Owner, method: string, path: string, body?: unknown) => call(method, path, { token: owner.token, productId: owner.productId, body })
const ok = async (owner: Owner, method: string, path: string, body?: unknown) => {
  const result = await as(owner, method, path, body)
  if (result.status !== 200) throw new Error(`${method} ${path}: ${result.status} ${JSON.stringify(result.body)}`)
  return result.body
}
const HOUR = 3_600_000
const TTL = 900_000 // ANALYTICS_FUNNEL_RESULT_TTL_MS's default, which this file's in-process app runs with
const ago = (ms: number) => new Date(Date.now() - ms).toISOString()
const FUNNEL = { steps: [{ entity: 'events', event: 'signup' }, { entity: 'events', event: 'purchase' }], identity: 'users_id', range: { from: '-30d' } }
const counts = (run: { result: { steps: { count: number }[] } }) => run.result.steps.map((s) => s.count)
const capture = (owner: Owner, events: [string, string][]) =>
  ok(owner, 'POST', '/tracking/events', { events: events.map(([event, user]) => ({ event, timestamp: ago(HOUR), identity: { users_id: user } })) })
const newFunnel = async (owner: Owner, query: Record<string, unknown> = FUNNEL) =>
  (await ok(owner, 'POST', '/analytics/insights', { name: 'Activation', kind: 'funnel', query })).id as string
const kept = async (insightId: string) =>
  (await sql`select computed_at from analytics_insight_results where insight_id = ${insightId} and result is not null`)[0]?.computed_at as Date | undefined
const run = (owner: Owner, id: string, body?: unknown) => ok(owner, 'POST', `/analytics/insights/${id}/run`, body)

let owner: Owner
let other: Owner
const dashboards: { owner: Owner; id: string }[] = []
const onDashboard = async (owner: Owner, insightIds: string[]) => {
  const tiles = insightIds.map((id, i) => ({ type: 'insight', insight_id: id, layout: { x: 0, y: i, w: 6, h: 1 } }))
  const dashboard = await ok(owner, 'POST', '/analytics/dashboards', { slug: `d-${crypto.randomUUID().slice(0, 12)}`, name: 'Funnels', tiles })
  dashboards.push({ owner, id: dashboard.id })
}

beforeAll(async () => {
  owner = await newProduct('Kept funnels')
  other = await newProduct('Someone else')
  await capture(owner, [['signup', 'u1'], ['signup', 'u2'], ['signup', 'u3'], ['purchase', 'u1']])
})

// Dashboards left behind would be refreshed by every later round of this database.
afterAll(async () => {
  for (const { owner, id } of dashboards) await as(owner, 'DELETE', `/analytics/dashboards/${id}`)
})

describe('runs of a funnel insight', () => {
  test('the second run answers the kept result, even after new events; refresh: true recomputes and counts them', async () => {
    const id = await newFunnel(owner)
    const first = await run(owner, id)
    expect(first).toMatchObject({ insight_id: id, kind: 'funnel', cached: false })
    expect(counts(first)).toEqual([3, 1])
    expect(Math.abs(Date.parse(first.computed_at) - Date.now())).toBeLessThan(10_000)
    await capture(owner, [['purchase', 'u2']])
    const second = await run(owner, id)
    expect(second).toEqual({ ...first, cached: true }) // same numbers, same as_of, computed_at of the first
    const refreshed = await run(owner, id, { refresh: true })
    expect([refreshed.cached, counts(refreshed)]).toEqual([false, [3, 2]])
    expect(Date.parse(refreshed.computed_at)).toBeGreaterThan(Date.parse(first.computed_at))
    expect(await run(owner, id, { refresh: false })).toEqual({ ...refreshed, cached: true })
    // The plain funnel always reads events, and a metric insight always runs now.
    expect(counts({ result: await ok(owner, 'POST', '/analytics/funnel', FUNNEL) })).toEqual([3, 2])
    const metric = await ok(owner, 'POST', '/analytics/insights', { name: 'Events', kind: 'metric', query: { entity: 'events', metrics: ['count'], range: { from: '-7d' } } })
    const metricRun = await run(owner, metric.id)
    expect([metricRun.cached, metricRun.result.rows[0].count]).toEqual([false, 5])
    expect(Math.abs(Date.parse(metricRun.computed_at) - Date.now())).toBeLessThan(10_000)
    const text = await registry.metrics()
    for (const answer of ['kept', 'computed']) expect(text).toMatch(new RegExp(`platform_analytics_funnel_results_total\\{answer="${answer}"\\} [1-9]`))
  })

  test('bad input is a 400 naming the field; another product\'s insight is 404', async () => {
    const id = await newFunnel(owner)
    expect(failingFields(await as(owner, 'POST', `/analytics/insights/${id}/run`, { refresh: 'yes' }))).toEqual(['/body/refresh'])
    expect(failingFields(await as(owner, 'POST', `/analytics/insights/${id}/run`, { refresh: true, force: 1 }))).toEqual(['/body/force'])
    expect((await as(other, 'POST', `/analytics/insights/${id}/run`, { refresh: true })).status).toBe(404)
    expect(await kept(id)).toBeUndefined() // refused before anything ran
  })

  test('editing the query drops the kept result; renaming keeps it', async () => {
    const id = await newFunnel(owner)
    const first = await run(owner, id)
    await ok(owner, 'PATCH', `/analytics/insights/${id}`, { name: 'Renamed' })
    expect((await run(owner, id)).cached).toBe(true)
    await ok(owner, 'PATCH', `/analytics/insights/${id}`, { query: FUNNEL }) // the same query: still its result
    expect((await run(owner, id)).cached).toBe(true)
    await ok(owner, 'PATCH', `/analytics/insights/${id}`, { query: { ...FUNNEL, windowDays: 7 } })
    expect(await kept(id)).toBeUndefined()
    const edited = await run(owner, id)
    expect([edited.cached, edited.result.windowDays]).toEqual([false, 7])
    expect(edited.computed_at).not.toBe(first.computed_at)
  })

  test('a kept result older than the TTL is computed again; younger, it answers', async () => {
    const id = await newFunnel(owner)
    const first = await runInsight(owner.productId, id)
    const at = (ms: number) => new Date(Date.parse(first.computed_at) + ms)
    expect((await runInsight(owner.productId, id, { now: at(TTL - 1000) })).cached).toBe(true)
    const later = at(TTL + 1000)
    const again = await runInsight(owner.productId, id, { now: later })
    expect([again.cached, again.computed_at]).toEqual([false, later.toISOString()])
    // Relative ranges are taken from computed_at: -30d from then.
    expect((again.result as { range: { from: string } }).range.from).toBe(new Date(later.getTime() - 30 * 86_400_000).toISOString())
    expect((await runInsight(owner.productId, id, { now: later, ttlMs: 1000 })).cached).toBe(true)
  })

  test('runs of a stale insight at once compute it once, and all answer that result', async () => {
    const id = await newFunnel(owner)
    const runs = await Promise.all([run(owner, id), run(owner, id), run(owner, id)])
    expect(runs.filter((r) => !r.cached)).toHaveLength(1)
    expect(new Set(runs.map((r) => r.computed_at)).size).toBe(1)
    for (const r of runs) expect(r.result).toEqual(runs[0].result)
  })

  test('deleting the insight deletes its kept result', async () => {
    const id = await newFunnel(owner)
    await run(owner, id)
    expect(await kept(id)).toBeInstanceOf(Date)
    await ok(owner, 'DELETE', `/analytics/insights/${id}`)
    expect((await sql`select count(*)::int as n from analytics_insight_results where insight_id = ${id}`)[0]!.n).toBe(0)
  })
})

describe('a run over another range (a dashboard\'s date range)', () => {
  test('runs the query over that range now, keeps nothing, and leaves the kept result as it was', async () => {
    const mine = await newProduct('Ranges')
    const twoDays = 2 * 24 * HOUR
    await ok(mine, 'POST', '/tracking/events', {
      events: [['signup', 'u1', HOUR], ['purchase', 'u1', HOUR], ['signup', 'u2', twoDays], ['signup', 'u3', twoDays], ['purchase', 'u2', twoDays]]
        .map(([event, user, age]) => ({ event, timestamp: ago(age as number), identity: { users_id: user } })),
    })
    const funnel = await newFunnel(mine)
    const saved = await run(mine, funnel)
    expect(counts(saved)).toEqual([3, 2])
    const lastDay = await run(mine, funnel, { range: { from: '-1d' } })
    expect([lastDay.cached, counts(lastDay)]).toEqual([false, [1, 1]])
    expect(Date.parse(lastDay.result.range.to) - Date.parse(lastDay.result.range.from)).toBe(24 * HOUR + 1) // `to` now holds its own millisecond
    expect(await run(mine, funnel)).toEqual({ ...saved, cached: true }) // the insight's own result, untouched
    expect(await kept(funnel)).toEqual(new Date(saved.computed_at))

    const metric = (await ok(mine, 'POST', '/analytics/insights', {
      name: 'Signups', kind: 'metric', query: { entity: 'events', metrics: ['count'], filters: [{ field: 'event', op: 'equals', value: 'signup' }], range: { from: '-7d' }, bucket: 'day' },
    })).id as string
    const week = await run(mine, metric)
    const fixed = { from: new Date(Date.now() - 3 * 24 * HOUR).toISOString(), to: new Date(Date.now() - 36 * HOUR).toISOString() }
    const narrow = await run(mine, metric, { range: fixed })
    expect(narrow.result.range).toEqual(fixed)
    expect(narrow.result.rows.reduce((sum: number, row: { count: number }) => sum + row.count, 0)).toBe(2)
    expect(week.result.rows.reduce((sum: number, row: { count: number }) => sum + row.count, 0)).toBe(3)
    expect((await ok(mine, 'GET', `/analytics/insights/${metric}`)).query.range).toEqual({ from: '-7d' }) // not saved
  })

  test('a bad range is a 400 naming it, also when it makes too many of the insight\'s buckets; another product\'s insight is 404', async () => {
    const hourly = (await ok(owner, 'POST', '/analytics/insights', {
      name: 'Hourly', kind: 'metric', query: { entity: 'events', metrics: ['count'], range: { from: '-1d' }, bucket: 'hour' },
    })).id as string
    const funnel = await newFunnel(owner)
    const refused: [string, unknown, string][] = [
      [hourly, { range: { from: '-1y' } }, '/body/range/from'],
      [hourly, { range: { from: '2026-02-30T00:00:00Z' } }, '/body/range/from'],
      [hourly, { range: { from: '-1d', to: 'yesterday' } }, '/body/range/to'],
      [hourly, { range: { to: 'now' } }, '/body/range/from'],
      [hourly, { range: { from: '-1d', extra: 1 } }, '/body/range/extra'],
      [hourly, { range: { from: '2020-01-01T00:00:00Z', to: '2026-01-01T00:00:00Z' } }, '/body/range'],
      [funnel, { range: { from: 'now', to: '-1d' } }, '/body/range/from'],
      [funnel, { range: 'last week' }, '/body/range'],
    ]
    for (const [id, body, path] of refused) {
      const answer = await as(owner, 'POST', `/analytics/insights/${id}/run`, body)
      expect([path, answer.status, failingFields(answer)]).toEqual([path, 400, [path]])
    }
    expect((await as(other, 'POST', `/analytics/insights/${funnel}/run`, { range: { from: '-1d' } })).status).toBe(404)
    expect(await kept(funnel)).toBeUndefined()
  })
})

describe('background refresh', () => {
  test('a round recomputes the funnels dashboards use, at most one per product, oldest first, a failing one skipped', async () => {
    const a = owner
    const b = await newProduct('Second')
    await capture(b, [['signup', 'x'], ['purchase', 'x']])
    const [a1, a2, unused, b1] = [await newFunnel(a), await newFunnel(a), await newFunnel(a), await newFunnel(b)]
    const broken = await newFunnel(b)
    const metric = await ok(a, 'POST', '/analytics/insights', { name: 'm', kind: 'metric', query: { entity: 'events', metrics: ['count'], range: { from: '-7d' } } })
    await onDashboard(a, [a1, a2, metric.id])
    await onDashboard(b, [b1, broken])
    // A saved query that no longer plans (as after a catalog change): its refresh fails with a 400.
    await sql`update analytics_insights set query = jsonb_set(query, '{steps,0,entity}', '"gone"') where id = ${broken}`
    const mine = new Set([a1, a2, unused, b1, broken, metric.id])
    const round = async (clock?: () => Date) => {
      const done = await refreshRound({ batch: 1000, clock })
      expect(done.ran).toBe(true)
      return done.refreshed.filter((r) => mine.has(r.insightId))
    }
    const first = await round()
    expect(first.filter((r) => r.productId === a.productId)).toHaveLength(1)
    expect(first.filter((r) => r.productId === b.productId)).toHaveLength(1)
    const second = await round()
    const taken = [...first, ...second]
    expect(taken.map((r) => r.insightId).sort()).toEqual([a1, a2, b1, broken].sort())
    expect(taken.find((r) => r.insightId === broken)!.outcome).toBe('refused')
    for (const id of [a1, a2, b1]) expect(taken.find((r) => r.insightId === id)!.outcome).toBe('ok')
    expect(await kept(unused)).toBeUndefined()
    expect(await kept(metric.id)).toBeUndefined()
    // The failing one is taken up again, and no longer ahead of the product's others.
    expect((await round()).map((r) => r.insightId)).toEqual([broken])
    // Before half the TTL nothing is due; past it, the oldest of each product again, as of the round's clock.
    const computed = (await kept(a1))!.getTime()
    expect((await round(() => new Date(computed + TTL / 2 - 60_000))).filter((r) => r.productId === a.productId)).toEqual([])
    const later = new Date(Math.max(computed, (await kept(a2))!.getTime()) + TTL / 2 + 1000)
    const due = (await round(() => later)).filter((r) => r.productId === a.productId)
    expect(due).toHaveLength(1)
    expect((await kept(due[0]!.insightId))!.toISOString()).toBe(later.toISOString())
    // A run of that insight now answers the background's result.
    const answered = await run(a, due[0]!.insightId)
    expect([answered.cached, answered.computed_at]).toEqual([true, later.toISOString()])
  })

  test('one worker at a time: while another holds the lock, a round does nothing', async () => {
    const holder = await sql.reserve()
    try {
      await holder`select pg_advisory_lock(727004)`
      expect(await refreshRound({ batch: 1000 })).toEqual({ ran: false, refreshed: [] })
    } finally {
      await holder`select pg_advisory_unlock(727004)`
      holder.release()
    }
  })

  test('an api worker refreshes on its own timer', async () => {
    const c = await newProduct('Third')
    const id = await newFunnel(c)
    await onDashboard(c, [id])
    const worker = await startProcess('api', { ANALYTICS_FUNNEL_REFRESH_INTERVAL_MS: '200', ANALYTICS_FUNNEL_REFRESH_BATCH: '1000' })
    try {
      await eventually(() => kept(id), 15_000, 'the worker refreshed the dashboard funnel')
      expect((await run(c, id)).cached).toBe(true)
    } finally {
      await worker.stop()
    }
  })
})
