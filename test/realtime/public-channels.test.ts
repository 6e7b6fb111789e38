// Channel reads on two real workers: history (window, cursor, parameter rules), presence roster, channel status,
// URL-encoded and malformed channel names, unregistered namespaces.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { enterPresence } from '../../shared/realtime/presence'
import { ok } from '../helpers'
import { pub, realtimeProduct, startPublicPair, type Pair, type RealtimeProduct } from './public-helpers'

let pair: Pair
let p: RealtimeProduct

beforeAll(async () => {
  ;[pair, p] = await Promise.all([
    startPublicPair(),
    realtimeProduct([
      { name: 'chat', presence: true, history: { ttlSeconds: 300, size: 100 } },
      { name: 'live' }, // no presence, no history
    ]),
  ])
})
afterAll(async () => {
  await pair.stop()
})

const base = () => `/${p.productId}/realtime`
const get = (path: string, worker = pair.a) => pub(worker, 'GET', base() + path, { key: p.key })
/** Setup: a publish that fails says so here, with its status and body. */
const publish = async (channel: string, data: unknown) => ok(await pub(pair.a, 'POST', `${base()}/messages`, { key: p.key, body: { channel, data } }), `publish to ${channel}`)
const fieldPaths = (result: { body: any }) => [...new Set((result.body.fields as { path: string }[]).map((f) => f.path))].sort()

describe('GET /channels/{channel}/history', () => {
  test('last_n, last_ms and cursor reads', async () => {
    const channel = `chat:${randomUUID()}`
    const published = []
    for (let i = 1; i <= 5; i++) published.push((await publish(channel, { i })).body)
    const epoch = published[0].epoch

    const lastTwo = await get(`/channels/${channel}/history?last_n=2`, pair.b)
    expect(lastTwo.body).toMatchObject({ channel, offset: 5, epoch, recovered: true })
    expect(lastTwo.body.entries.map((e: any) => e.data)).toEqual([{ i: 4 }, { i: 5 }])

    const recent = await get(`/channels/${channel}/history?last_ms=60000`)
    expect(recent.body.entries.map((e: any) => e.offset)).toEqual([1, 2, 3, 4, 5])

    const cursor = await get(`/channels/${channel}/history?offset=3&epoch=${epoch}`, pair.b)
    expect(cursor.body).toMatchObject({ offset: 5, epoch, recovered: true })
    expect(cursor.body.entries.map((e: any) => [e.offset, e.data])).toEqual([[4, { i: 4 }], [5, { i: 5 }]])
    for (const entry of cursor.body.entries) expect('ref' in entry).toBe(false)

    const stale = await get(`/channels/${channel}/history?offset=3&epoch=not-the-epoch`)
    expect(stale.body).toMatchObject({ entries: [], offset: 5, epoch, recovered: false })
  })

  test('a namespace with history off answers an empty result, not an error', async () => {
    await publish('live:1', { a: 1 })
    const result = await get('/channels/live:1/history?last_n=10')
    expect(result.status).toBe(200)
    expect(result.body).toEqual({ channel: 'live:1', entries: [], offset: 0, epoch: '', recovered: true })
  })

  test('exactly one of window or cursor: 400 naming the fields', async () => {
    const cases: [string, string[]][] = [
      ['', ['/query/epoch', '/query/last_ms', '/query/last_n', '/query/offset']],
      ['?offset=1', ['/query/epoch']],
      ['?epoch=abc', ['/query/offset']],
      ['?last_n=5&offset=1&epoch=abc', ['/query/epoch', '/query/last_n', '/query/offset']],
      ['?last_ms=100&offset=1', ['/query/last_ms', '/query/offset']],
      ['?last_n=5&last_ms=100', ['/query/last_ms', '/query/last_n']],
      ['?last_n=0', ['/query/last_n']],
      ['?last_n=1001', ['/query/last_n']],
      ['?last_n=2.5', ['/query/last_n']],
      ['?last_ms=0x10', ['/query/last_ms']],
      ['?last_ms=', ['/query/last_ms']],
      ['?last_n=abc', ['/query/last_n']],
      ['?last_ms=0', ['/query/last_ms']],
      ['?last_ms=-5', ['/query/last_ms']],
      ['?offset=-1&epoch=abc', ['/query/offset']],
      ['?offset=99999999999999999999&epoch=abc', ['/query/offset']],
      ['?last_n=5&nope=1', ['/query/nope']],
    ]
    for (const [query, fields] of cases) {
      const result = await get(`/channels/chat:x/history${query}`)
      expect({ query, status: result.status, error: result.body.error }).toEqual({ query, status: 400, error: 'validation_failed' })
      expect(fieldPaths(result)).toEqual(fields)
    }
    expect((await get('/channels/chat:x/history?last_n=1000')).status).toBe(200)
    expect((await get('/channels/chat:x/history?last_ms=0.5')).status).toBe(200)
  })
})

describe('GET /channels/{channel}/presence', () => {
  test('the roster, deduplicated by identity, from either worker', async () => {
    const channel = `chat:${randomUUID()}`
    await enterPresence({ productId: p.productId, channel, identity: 'ext:alice', connectionId: 'c1', info: { name: 'Alice' } })
    await enterPresence({ productId: p.productId, channel, identity: 'ext:alice', connectionId: 'c2', info: { name: 'Alice' } })
    await enterPresence({ productId: p.productId, channel, identity: 'ext:bob', connectionId: 'c3' })
    const result = await get(`/channels/${channel}/presence`, pair.b)
    expect(result.status).toBe(200)
    expect(result.body).toEqual({
      channel,
      members: [
        { identity: 'ext:alice', connections: 2, info: { name: 'Alice' } },
        { identity: 'ext:bob', connections: 1, info: null },
      ],
    })
  })

  test('presence off for the namespace: 403 presence_disabled', async () => {
    const result = await get('/channels/live:1/presence')
    expect(result.status).toBe(403)
    expect(result.body).toMatchObject({ error: 'presence_disabled', message: expect.any(String) })
  })
})

describe('GET /channels/{channel}', () => {
  test('occupancy and stream position', async () => {
    const channel = `chat:${randomUUID()}`
    const empty = await get(`/channels/${channel}`)
    expect(empty.body).toEqual({ channel, namespace: 'chat', presence: { members: 0, connections: 0 }, history: { offset: 0, epoch: '' } })
    const sent = (await publish(channel, 'x')).body
    await enterPresence({ productId: p.productId, channel, identity: 'ext:carol', connectionId: 'c1' })
    const busy = await get(`/channels/${channel}`, pair.b)
    expect(busy.body).toEqual({ channel, namespace: 'chat', presence: { members: 1, connections: 1 }, history: { offset: 1, epoch: sent.epoch } })
    const live = await get('/channels/live:1')
    expect(live.body).toEqual({ channel: 'live:1', namespace: 'live', presence: null, history: null })
  })
})

describe('channel names in paths', () => {
  test('URL-encoded names work on every read', async () => {
    const channel = `chat:room:${randomUUID()}`
    const sent = (await publish(channel, 1)).body
    const encoded = encodeURIComponent(channel)
    expect(encoded).toContain('%3A')
    expect((await get(`/channels/${encoded}`)).body.history).toEqual({ offset: 1, epoch: sent.epoch })
    expect((await get(`/channels/${encoded}/history?last_n=1`)).body.entries[0].id).toBe(sent.id)
    expect((await get(`/channels/${encoded}/presence`)).body).toEqual({ channel, members: [] })
  })

  test('status and presence take no query parameters: an unknown one is a 400 naming it', async () => {
    for (const route of ['', '/presence']) {
      const result = await pub(pair.a, 'GET', `/${p.productId}/realtime/channels/chat:lobby${route}?limit=5`, { key: p.key })
      expect({ route, status: result.status, fields: result.body.fields }).toEqual({
        route, status: 400, fields: [{ path: '/query/limit', message: 'is not an allowed field' }],
      })
    }
  })

  test('malformed names: 400 naming /path/channel, on every read', async () => {
    for (const name of ['nocolon', 'ch', 'chat%3Aa%20b', 'chat%ZZ', 'chat%2Fx', `chat:${'x'.repeat(124)}`]) {
      for (const suffix of ['', '/history?last_n=1', '/presence']) {
        const result = await get(`/channels/${name}${suffix}`)
        expect({ name, suffix, status: result.status }).toEqual({ name, suffix, status: 400 })
        expect(fieldPaths(result)).toEqual(['/path/channel'])
      }
    }
  })

  test('unregistered namespace: 404 on every read', async () => {
    for (const suffix of ['', '/history?last_n=1', '/presence']) {
      const result = await get(`/channels/ghost:1${suffix}`)
      expect({ suffix, status: result.status, error: result.body.error }).toEqual({ suffix, status: 404, error: 'namespace_not_registered' })
    }
  })
})
