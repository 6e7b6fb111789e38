// Insights and dashboards: every rule and limit of the spec's Dashboard and Tile, the decided status codes, version
// history with restore, another product's resources invisible (404), and all of it as MCP tools.
import { beforeAll, describe, expect, test } from 'bun:test'
import { call, newPlatformKey, newProduct, ok as checked } from '../helpers'

type Owner = Awaited<ReturnType<typeof newProduct>>
const as = (owner: Owner, method: string, path: string, body?: unknown) => call(method, path, { token: owner.token, productId: owner.productId, body })
const ok = async (owner: Owner, method: string, path: string, body?: unknown) => {
  const result = await as(owner, method, path, body)
  if (result.status !== 200) throw new Error(`${method} ${path}: ${result.status} ${JSON.stringify(result.body)}`)
  return result.body
}
const METRIC = { entity: 'events', metrics: ['count'], range: { from: '-7d' }, bucket: 'day' }
const layout = (x = 0, y = 0, w = 6, h = 4) => ({ x, y, w, h })
const slug = () => `d-${crypto.randomUUID().slice(0, 12)}`

let owner: Owner
let other: Owner
let insight: { id: string }
beforeAll(async () => {
  owner = await newProduct('Dashboards')
  other = await newProduct('Someone else')
  insight = await ok(owner, 'POST', '/analytics/insights', { name: 'Signups', kind: 'metric', query: METRIC })
})

describe('insights', () => {
  test('saved queries are checked against the catalog at save time; get, list, update, run, and 404 for another product', async () => {
    const bad = await as(owner, 'POST', '/analytics/insights', { name: 'x', kind: 'metric', query: { ...METRIC, metrics: ['revenue'] } })
    expect([bad.status, bad.body.fields[0].path]).toEqual([400, '/body/query/metrics/0'])
    // Checked as a run would check it: range, time zone and bucket count too, not only names.
    const unrunnable: [string, Record<string, unknown>, string][] = [
      ['metric', { ...METRIC, timezone: 'Mars/Olympus' }, '/body/query/timezone'],
      ['metric', { ...METRIC, range: { from: '2026-02-30T00:00:00Z' } }, '/body/query/range/from'],
      ['metric', { ...METRIC, bucket: 'day', timezone: 'Asia/Tokyo', range: { from: '0001-01-01T00:00:00Z', to: '0001-01-03T00:00:00Z' } }, '/body/query/range/from'],
      ['metric', { ...METRIC, bucket: 'hour', range: { from: '2020-01-01T00:00:00Z', to: '2026-01-01T00:00:00Z' } }, '/body/query/bucket'],
      ['funnel', { steps: [{ entity: 'events', event: 'a' }, { entity: 'events', event: 'b' }], identity: 'users_id', range: { from: '-999999w' } }, '/body/query/range/from'],
      ['funnel', { steps: [{ entity: 'events', event: 'a' }, { entity: 'events', event: 'b' }], identity: 'users_id', range: { from: 'now', to: '-1d' } }, '/body/query/range/from'],
    ]
    for (const [kind, query, path] of unrunnable) {
      const refused = await as(owner, 'POST', '/analytics/insights', { name: 'x', kind, query })
      expect([path, refused.status, refused.body.fields?.map((f: { path: string }) => f.path)]).toEqual([path, 400, [path]])
    }
    const wrongShape = await as(owner, 'POST', '/analytics/insights', { name: 'x', kind: 'funnel', query: METRIC })
    expect([wrongShape.status, wrongShape.body.fields.map((f: { path: string }) => f.path)]).toEqual([400, expect.arrayContaining(['/body/query/steps'])])
    const funnel = await ok(owner, 'POST', '/analytics/insights', {
      name: 'Activation', kind: 'funnel', query: { steps: [{ entity: 'events', event: 'signup' }, { entity: 'events', event: 'purchase' }], identity: 'users_id', range: { from: '-30d' } },
    })
    expect(funnel).toMatchObject({ name: 'Activation', kind: 'funnel', description: null, created_by: expect.any(String) })
    expect((await ok(owner, 'GET', `/analytics/insights/${funnel.id}`)).query.identity).toBe('users_id')
    expect((await ok(owner, 'GET', '/analytics/insights')).insights.map((i: { id: string }) => i.id)).toContain(funnel.id)
    const renamed = await ok(owner, 'PATCH', `/analytics/insights/${funnel.id}`, { name: 'Activation (30 d)' })
    expect([renamed.name, renamed.query.identity]).toEqual(['Activation (30 d)', 'users_id'])
    expect(await ok(owner, 'PATCH', `/analytics/insights/${funnel.id}`, {})).toEqual(renamed) // no field: nothing written
    const run = await ok(owner, 'POST', `/analytics/insights/${funnel.id}/run`)
    expect(run).toMatchObject({ insight_id: funnel.id, kind: 'funnel', result: { steps: [{ count: 0 }, { count: 0 }] } })
    expect((await ok(owner, 'POST', `/analytics/insights/${insight.id}/run`)).result.rows.length).toBeGreaterThanOrEqual(7)
    for (const [method, path] of [['GET', ''], ['PATCH', ''], ['DELETE', ''], ['POST', '/run']] as const) {
      expect((await as(other, method, `/analytics/insights/${funnel.id}${path}`, method === 'PATCH' ? { name: 'x' } : undefined)).status).toBe(404)
    }
    expect((await as(owner, 'GET', '/analytics/insights/not-a-uuid')).status).toBe(404)
  })
})

test('two updates of different fields of one insight at once: both stand', async () => {
  for (let round = 0; round < 5; round++) {
    const target = await ok(owner, 'POST', '/analytics/insights', { name: 'before', kind: 'metric', query: METRIC })
    await Promise.all([
      ok(owner, 'PATCH', `/analytics/insights/${target.id}`, { name: `renamed ${round}` }),
      ok(owner, 'PATCH', `/analytics/insights/${target.id}`, { description: `described ${round}` }),
      ok(owner, 'PATCH', `/analytics/insights/${target.id}`, { query: { ...METRIC, bucket: 'week' } }),
    ])
    const after = await ok(owner, 'GET', `/analytics/insights/${target.id}`)
    expect([after.name, after.description, after.query.bucket]).toEqual([`renamed ${round}`, `described ${round}`, 'week'])
  }
})

describe('dashboards', () => {
  test('create: every field present, tile ids assigned, titles null by default, tags default []', async () => {
    const created = await ok(owner, 'POST', '/analytics/dashboards', {
      slug: slug(), name: 'Growth', tiles: [{ type: 'insight', insight_id: insight.id, layout: layout() }, { type: 'text', markdown: '# Notes', title: 'Read me', layout: layout(6) }],
    })
    expect(Object.keys(created).sort()).toEqual(['created_at', 'created_by', 'id', 'name', 'product_id', 'slug', 'tags', 'tiles', 'updated_at'])
    expect(created).toMatchObject({ product_id: owner.productId, name: 'Growth', tags: [] })
    expect(created.tiles).toEqual([
      { id: expect.any(String), type: 'insight', insight_id: insight.id, title: null, layout: layout() },
      { id: expect.any(String), type: 'text', markdown: '# Notes', title: 'Read me', layout: layout(6) },
    ])
    const given = crypto.randomUUID()
    const kept = await ok(owner, 'POST', '/analytics/dashboards', { slug: slug(), name: 'x', tiles: [{ id: given, type: 'text', markdown: '', layout: layout() }] })
    expect(kept.tiles[0].id).toBe(given)
  })

  test('every rule and limit of the spec is a 400 naming the field', async () => {
    const tile = { type: 'text', markdown: 'x', layout: layout() }
    const body = { slug: slug(), name: 'x', tiles: [tile] }
    const cases: [Record<string, unknown>, string][] = [
      [{ ...body, slug: 'A-bad' }, '/body/slug'],
      [{ ...body, slug: 'x' }, '/body/slug'], // at least two characters
      [{ ...body, slug: `a${'b'.repeat(64)}` }, '/body/slug'],
      [{ ...body, slug: '-lead' }, '/body/slug'],
      [{ ...body, name: '' }, '/body/name'],
      [{ ...body, name: 'n'.repeat(121) }, '/body/name'],
      [{ ...body, tags: Array.from({ length: 21 }, (_, i) => `t${i}`) }, '/body/tags'],
      [{ ...body, tags: ['t'.repeat(41)] }, '/body/tags/0'],
      [{ ...body, tiles: Array.from({ length: 41 }, () => tile) }, '/body/tiles'],
      [{ ...body, tiles: [{ ...tile, layout: { x: 0, y: 0, w: 13, h: 1 } }] }, '/body/tiles/0/layout/w'],
      [{ ...body, tiles: [{ ...tile, layout: { x: 0, y: 0, w: 0, h: 1 } }] }, '/body/tiles/0/layout/w'],
      [{ ...body, tiles: [{ ...tile, layout: { x: -1, y: 0, w: 1, h: 1 } }] }, '/body/tiles/0/layout/x'],
      [{ ...body, tiles: [{ ...tile, layout: { x: 0, y: 0.5, w: 1, h: 1 } }] }, '/body/tiles/0/layout/y'],
      [{ ...body, tiles: [{ ...tile, layout: { x: 0, y: 0, w: 1 } }] }, '/body/tiles/0/layout/h'],
      [{ ...body, tiles: [{ ...tile, layout: { ...layout(), z: 1 } }] }, '/body/tiles/0/layout/z'],
      [{ ...body, tiles: [{ ...tile, markdown: 'm'.repeat(4001) }] }, '/body/tiles/0/markdown'],
      [{ ...body, tiles: [{ ...tile, title: 't'.repeat(121) }] }, '/body/tiles/0/title'],
      [{ ...body, tiles: [{ ...tile, insight_id: insight.id }] }, '/body/tiles/0/insight_id'], // not a text tile field
      [{ ...body, tiles: [{ type: 'insight', insight_id: insight.id, markdown: 'x', layout: layout() }] }, '/body/tiles/0/markdown'],
      [{ ...body, tiles: [{ type: 'insight', layout: layout() }] }, '/body/tiles/0/insight_id'],
      [{ ...body, tiles: [{ type: 'chart', layout: layout() }] }, '/body/tiles/0/type'],
      [{ ...body, tiles: [{ ...tile, id: 'not-a-uuid' }] }, '/body/tiles/0/id'],
      [{ slug: slug(), name: 'x' }, '/body/tiles'],
    ]
    for (const [request, path] of cases) {
      const result = await as(owner, 'POST', '/analytics/dashboards', request)
      expect([path, result.status, result.body.fields?.map((f: { path: string }) => f.path)]).toEqual([path, 400, [path]])
    }
    // Many faults at once, in the second of several tiles: every one is named, each at its own field.
    const faulty = { type: 'text', markdown: 'm'.repeat(4001), title: 't'.repeat(121), layout: { x: -1, y: -1, w: 13, h: 13 } }
    const many = await as(owner, 'POST', '/analytics/dashboards', { ...body, tiles: [{ ...tile, layout: { x: 0, y: 0, w: 0, h: 1 } }, faulty, tile] })
    expect([many.status, many.body.fields?.map((f: { path: string }) => f.path).sort()]).toEqual([400, [
      '/body/tiles/0/layout/w', '/body/tiles/1/layout/h', '/body/tiles/1/layout/w', '/body/tiles/1/layout/x', '/body/tiles/1/layout/y',
      '/body/tiles/1/markdown', '/body/tiles/1/title',
    ]])
    const id = crypto.randomUUID()
    const twice = await as(owner, 'POST', '/analytics/dashboards', { ...body, tiles: [{ ...tile, id }, { ...tile, id }] })
    expect([twice.status, twice.body.fields[0].path]).toEqual([400, '/body/tiles/1/id'])
    const cased = await as(owner, 'POST', '/analytics/dashboards', { ...body, tiles: [{ ...tile, id }, { ...tile, id: id.toUpperCase() }] })
    expect([cased.status, cased.body.fields[0].path]).toEqual([400, '/body/tiles/1/id']) // the same uuid in another case
  })

  test('a tile naming an insight that is not the product\'s is 422 naming the tile; a taken slug is 409, also under two concurrent creates', async () => {
    const foreign = await ok(other, 'POST', '/analytics/insights', { name: 'theirs', kind: 'metric', query: METRIC })
    for (const insightId of [foreign.id, crypto.randomUUID()]) {
      const result = await as(owner, 'POST', '/analytics/dashboards', {
        slug: slug(), name: 'x', tiles: [{ type: 'text', markdown: '', layout: layout() }, { type: 'insight', insight_id: insightId, layout: layout() }],
      })
      expect([result.status, result.body.fields[0].path]).toEqual([422, '/body/tiles/1/insight_id'])
    }
    const taken = slug()
    const results = await Promise.all([1, 2].map(() => as(owner, 'POST', '/analytics/dashboards', { slug: taken, name: 'race', tiles: [] })))
    expect(results.map((r) => r.status).sort()).toEqual([200, 409])
    expect((await as(other, 'POST', '/analytics/dashboards', { slug: taken, name: 'mine', tiles: [] })).status).toBe(200) // slugs are per product
  })

  test('get by slug or uuid; PATCH changes only what is given, tiles replace the arrangement, slug is refused; update and delete take a uuid only', async () => {
    const s = slug()
    const created = await ok(owner, 'POST', '/analytics/dashboards', { slug: s, name: 'Before', tags: ['ops'], tiles: [{ type: 'text', markdown: 'a', layout: layout() }] })
    expect((await ok(owner, 'GET', `/analytics/dashboards/${s}`)).id).toBe(created.id)
    expect((await ok(owner, 'GET', `/analytics/dashboards/${created.id}`)).slug).toBe(s)
    const renamed = await ok(owner, 'PATCH', `/analytics/dashboards/${created.id}`, { name: 'After' })
    expect([renamed.name, renamed.tags, renamed.tiles]).toEqual(['After', ['ops'], created.tiles])
    // Every field of the body is optional, so the body itself is (the spec marks it so): none changes nothing.
    const untouched = await ok(owner, 'PATCH', `/analytics/dashboards/${created.id}`)
    expect([untouched.name, untouched.tags, untouched.tiles, untouched.updated_at]).toEqual(['After', ['ops'], created.tiles, renamed.updated_at])
    const emptyBody = await ok(owner, 'PATCH', `/analytics/dashboards/${created.id}`, {})
    expect(emptyBody.updated_at).toBe(renamed.updated_at) // nothing changed, so nothing was written
    expect((await ok(owner, 'GET', `/analytics/dashboards/${created.id}/versions`)).versions.map((v: { version: number }) => v.version)).toEqual([2, 1])
    expect(Date.parse(renamed.updated_at)).toBeGreaterThanOrEqual(Date.parse(created.updated_at))
    const retiled = await ok(owner, 'PATCH', `/analytics/dashboards/${created.id}`, { tiles: [{ type: 'insight', insight_id: insight.id, layout: layout(0, 4) }] })
    expect(retiled.tiles.map((t: { type: string }) => t.type)).toEqual(['insight'])
    expect(retiled.name).toBe('After')
    const slugChange = await as(owner, 'PATCH', `/analytics/dashboards/${created.id}`, { slug: slug() })
    expect([slugChange.status, slugChange.body.fields[0].path]).toEqual([400, '/body/slug'])
    expect((await as(owner, 'PATCH', `/analytics/dashboards/${s}`, { name: 'x' })).status).toBe(400) // a slug is not an id here
    expect((await as(owner, 'DELETE', `/analytics/dashboards/${s}`)).status).toBe(400)
    expect((await as(owner, 'PATCH', `/analytics/dashboards/${created.id}`, { tiles: [{ type: 'insight', insight_id: crypto.randomUUID(), layout: layout() }] })).status).toBe(422)
    expect((await ok(owner, 'GET', `/analytics/dashboards/${s}`)).tiles).toEqual(retiled.tiles) // the refused PATCH changed nothing
    expect((await as(owner, 'GET', `/analytics/dashboards/${'x'.repeat(65)}`)).status).toBe(400)
    expect((await as(owner, 'GET', '/analytics/dashboards/no-such-dashboard')).status).toBe(404)
  })

  test('list: newest first, tag exact, q a case-insensitive substring of name or slug', async () => {
    const product = await newProduct()
    const make = (s: string, name: string, tags: string[]) => ok(product, 'POST', '/analytics/dashboards', { slug: s, name, tags, tiles: [] })
    await make('alpha-board', 'Revenue', ['finance'])
    await make('beta-board', 'Signups 100%', ['growth', 'fin'])
    await make('gamma', 'Churn', ['finance', 'growth'])
    const list = async (query: string) => (await ok(product, 'GET', `/analytics/dashboards${query}`)).dashboards.map((d: { slug: string }) => d.slug)
    expect(await list('')).toEqual(['gamma', 'beta-board', 'alpha-board'])
    expect(await list('?tag=finance')).toEqual(['gamma', 'alpha-board'])
    expect(await list('?tag=fin')).toEqual(['beta-board']) // exact, not a prefix
    expect(await list('?q=BOARD')).toEqual(['beta-board', 'alpha-board'])
    expect(await list('?q=revenue')).toEqual(['alpha-board'])
    expect(await list('?q=100%25')).toEqual(['beta-board']) // % is a character, not a wildcard
    expect(await list('?q=_')).toEqual([])
    expect(await list('?tag=growth&q=gam')).toEqual(['gamma'])
    expect((await as(product, 'GET', `/analytics/dashboards?tag=${'t'.repeat(41)}`)).status).toBe(400)
    expect((await as(product, 'GET', `/analytics/dashboards?q=${'q'.repeat(121)}`)).status).toBe(400)
  })

  test('an insight a dashboard uses cannot be deleted (409 naming the dashboard); deleting the dashboard leaves its insights', async () => {
    const used = await ok(owner, 'POST', '/analytics/insights', { name: 'used', kind: 'metric', query: METRIC })
    const s = slug()
    const board = await ok(owner, 'POST', '/analytics/dashboards', { slug: s, name: 'x', tiles: [{ type: 'insight', insight_id: used.id, layout: layout() }] })
    const refused = await as(owner, 'DELETE', `/analytics/insights/${used.id}`)
    expect([refused.status, refused.body.error, refused.body.dashboards]).toEqual([409, 'insight_in_use', [{ id: board.id, slug: s }]])
    expect(await ok(owner, 'DELETE', `/analytics/dashboards/${board.id}`)).toEqual({ id: board.id, deleted: true })
    expect((await as(owner, 'GET', `/analytics/dashboards/${board.id}`)).status).toBe(404)
    expect((await ok(owner, 'GET', `/analytics/insights/${used.id}`)).id).toBe(used.id) // still there
    expect(await ok(owner, 'DELETE', `/analytics/insights/${used.id}`)).toEqual({ id: used.id, deleted: true }) // now unused
    expect((await as(owner, 'DELETE', `/analytics/dashboards/${board.id}`)).status).toBe(404)
  })

  test('deleting an insight while a dashboard naming it is being saved: one of them wins whole, and a refusal always names the dashboard', async () => {
    for (let round = 0; round < 8; round++) {
      const raced = await ok(owner, 'POST', '/analytics/insights', { name: `raced ${round}`, kind: 'metric', query: METRIC })
      const s = slug()
      const [saved, deleted] = await Promise.all([
        as(owner, 'POST', '/analytics/dashboards', { slug: s, name: 'x', tiles: [{ type: 'insight', insight_id: raced.id, layout: layout() }] }),
        as(owner, 'DELETE', `/analytics/insights/${raced.id}`),
      ])
      if (saved.status === 200) {
        expect([deleted.status, deleted.body.dashboards]).toEqual([409, [{ id: saved.body.id, slug: s }]])
        expect((await ok(owner, 'GET', `/analytics/dashboards/${s}`)).tiles[0].insight_id).toBe(raced.id)
      } else {
        expect([saved.status, deleted.status]).toEqual([422, 200])
        expect((await as(owner, 'GET', `/analytics/dashboards/${s}`)).status).toBe(404)
      }
    }
  })

  test('another product\'s dashboard is 404 on every operation', async () => {
    const s = slug()
    const theirs = await ok(other, 'POST', '/analytics/dashboards', { slug: s, name: 'theirs', tiles: [] })
    for (const [method, path, body] of [
      ['GET', `/analytics/dashboards/${theirs.id}`], ['GET', `/analytics/dashboards/${s}`], ['PATCH', `/analytics/dashboards/${theirs.id}`, { name: 'x' }],
      ['DELETE', `/analytics/dashboards/${theirs.id}`], ['GET', `/analytics/dashboards/${theirs.id}/versions`],
      ['POST', `/analytics/dashboards/${theirs.id}/restore`, { version: 1 }],
    ] as const) {
      expect([method, path, (await as(owner, method, path, body)).status]).toEqual([method, path, 404])
    }
    expect((await ok(owner, 'GET', '/analytics/dashboards')).dashboards.map((d: { id: string }) => d.id)).not.toContain(theirs.id)
  })
})

describe('version history', () => {
  test('every create, update and restore keeps a version (who, when, the whole definition); restore writes a new one', async () => {
    const board = await ok(owner, 'POST', '/analytics/dashboards', { slug: slug(), name: 'v1', tiles: [{ type: 'text', markdown: 'one', layout: layout() }] })
    await ok(owner, 'PATCH', `/analytics/dashboards/${board.id}`, { name: 'v2', tags: ['x'] })
    await ok(owner, 'PATCH', `/analytics/dashboards/${board.id}`, { tiles: [] })
    const versions = (await ok(owner, 'GET', `/analytics/dashboards/${board.id}/versions`)).versions
    expect(versions.map((v: { version: number; reason: string; definition: { name: string } }) => [v.version, v.reason, v.definition.name])).toEqual([[3, 'update', 'v2'], [2, 'update', 'v2'], [1, 'create', 'v1']])
    expect(versions[2]).toMatchObject({ created_by: expect.any(String), definition: { name: 'v1', tags: [], tiles: board.tiles } })
    const restored = await ok(owner, 'POST', `/analytics/dashboards/${board.id}/restore`, { version: 1 })
    expect([restored.name, restored.tags, restored.tiles, restored.slug]).toEqual(['v1', [], board.tiles, board.slug])
    const after = (await ok(owner, 'GET', `/analytics/dashboards/${board.id}/versions`)).versions
    expect([after[0].version, after[0].reason]).toEqual([4, 'restore of version 1'])
    expect((await as(owner, 'POST', `/analytics/dashboards/${board.id}/restore`, { version: 99 })).status).toBe(404)
  })
})

test('an agent can do it all over MCP with a platform key: read the catalog, capture events, save an insight, build a dashboard', async () => {
  const product = await newProduct()
  const key = await newPlatformKey(product, ['analytics', 'tracking'])
  let id = 0
  const tool = async (name: string, args: Record<string, unknown> = {}) => {
    const result = checked(await call('POST', '/mcp', { token: key.key, headers: { accept: 'application/json, text/event-stream' }, body: { jsonrpc: '2.0', id: ++id, method: 'tools/call', params: { name, arguments: args } } }), `MCP ${name}`)
    expect(result.body.result.isError ?? false).toBe(false)
    return JSON.parse(result.body.result.content[0].text)
  }
  expect((await tool('analytics_catalog_get')).entities.length).toBeGreaterThanOrEqual(3)
  // A minute ago: an event stamped at capture time falls on the exclusive end of a range ending now planned in its millisecond.
  const minuteAgo = new Date(Date.now() - 60_000).toISOString()
  expect(await tool('tracking_events_capture', { body: { events: [{ event: 'signup', timestamp: minuteAgo, identity: { users_id: 'u1' } }] } })).toEqual({ accepted: 1 })
  const saved = await tool('analytics_insight_create', { body: { name: 'Signups', kind: 'metric', query: { entity: 'events', metrics: ['count'], range: { from: '-1d' } } } })
  expect((await tool('analytics_insight_run', { path: { id: saved.id } })).result.rows).toEqual([{ count: 1 }])
  const board = await tool('analytics_dashboard_create', { body: { slug: 'agent-built', name: 'Agent', tiles: [{ type: 'insight', insight_id: saved.id, layout: layout() }] } })
  expect((await tool('analytics_dashboard_get', { path: { idOrSlug: 'agent-built' } })).id).toBe(board.id)
  expect((await tool('analytics_dashboard_update', { path: { id: board.id } })).name).toBe('Agent') // no body: nothing changes
  const openapi = (await call('GET', '/openapi.json')).body
  expect(openapi.paths['/analytics/dashboards/{idOrSlug}'].patch.requestBody.required).toBe(false) // published under get's path (same shape)
  expect(openapi.paths['/analytics/dashboards'].post.requestBody.required).toBe(true)
})
