// Idempotent publishes (Idempotency-Key) and broadcasts, over the public routes of two workers and the platform API's
// tools: run on one Redis and again on the cluster (scripts/test), where the claim, the quota and the shards are steps.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { windowOf } from '../../shared/fixed-window'
import { channelTop, readHistory } from '../../shared/realtime/broker'
import { idempotencyClaimKey } from '../../shared/realtime/keys'
import { IDEMPOTENCY_WINDOW_MS, keyedRequest, publishInOneStep } from '../../shared/realtime/publish-request'
import { redis } from '../../shared/redis/client'
import { call, needsOneRedis } from '../helpers'
import { pub, realtimeProduct, startPublicPair, type Pair, type RealtimeProduct } from './public-helpers'

let pair: Pair
let p: RealtimeProduct
const KEEP = { ttlSeconds: 300, size: 100 }

beforeAll(async () => {
  ;[pair, p] = await Promise.all([startPublicPair(), realtimeProduct([{ name: 'chat', history: KEEP }, { name: 'live', history: null }])])
})
afterAll(async () => {
  await pair.stop()
})

const publish = (body: unknown, key?: string, worker = pair.a) =>
  pub(worker, 'POST', `/${p.productId}/realtime/messages`, { key: p.key, body, ...(key !== undefined ? { headers: { 'idempotency-key': key } } : {}) })
const broadcast = (body: unknown, key?: string, worker = pair.a) =>
  pub(worker, 'POST', `/${p.productId}/realtime/messages/broadcast`, { key: p.key, body, ...(key !== undefined ? { headers: { 'idempotency-key': key } } : {}) })
const entries = async (channel: string) =>
  (await readHistory(p.productId, channel, { historyTtlSeconds: KEEP.ttlSeconds, historySize: KEEP.size }, { last_n: 100 })).entries

describe('POST /messages with an Idempotency-Key', () => {
  test('a repeat answers the first publication (Idempotent-Replayed: true) and publishes nothing, on either worker', async () => {
    const channel = `chat:${randomUUID()}`
    const key = randomUUID()
    const first = await publish({ channel, data: { text: 'hi', n: 1 } }, key)
    expect(first.status).toBe(200)
    expect(first.headers.get('idempotent-replayed')).toBeNull()
    expect(first.body).toEqual({ id: expect.any(String), channel, offset: 1, epoch: expect.any(String) })
    // The same request, its object keys in another order, through the other worker.
    const again = await publish({ channel, data: { n: 1, text: 'hi' } }, key, pair.b)
    expect(again.status).toBe(200)
    expect(again.headers.get('idempotent-replayed')).toBe('true')
    expect(again.body).toEqual(first.body)
    expect((await entries(channel)).map((e) => e.id)).toEqual([first.body.id])
    // Without the key, the same body is a new publish.
    expect((await publish({ channel, data: { text: 'hi', n: 1 } })).body.offset).toBe(2)
  })

  test('the same key with another body, another channel or as a broadcast is 409 invalid_idempotent_request, and publishes nothing', async () => {
    const channel = `chat:${randomUUID()}`
    const key = randomUUID()
    expect((await publish({ channel, data: 1 }, key)).status).toBe(200)
    for (const [route, body] of [[publish, { channel, data: 2 }], [publish, { channel: `chat:${randomUUID()}`, data: 1 }], [broadcast, { channels: [channel], data: 1 }]] as const) {
      const refused = await route(body, key)
      expect(refused.status).toBe(409)
      expect(refused.body).toMatchObject({ error: 'invalid_idempotent_request' })
    }
    expect(await channelTop(p.productId, channel)).toMatchObject({ offset: 1 })
  })

  test('twenty concurrent requests with one key on two workers publish once and all answer that publication', async () => {
    const channel = `chat:${randomUUID()}`
    const key = randomUUID()
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => publish({ channel, data: 'once' }, key, i % 2 ? pair.a : pair.b)))
    expect(answers.map((a) => a.status)).toEqual(Array(20).fill(200))
    expect(new Set(answers.map((a) => JSON.stringify(a.body))).size).toBe(1)
    expect(answers.filter((a) => a.headers.get('idempotent-replayed') === null)).toHaveLength(1)
    expect(await entries(channel)).toHaveLength(1)
  })

  test('an ephemeral channel\'s repeat answers its id alone', async () => {
    const channel = `live:${randomUUID()}`
    const key = randomUUID()
    const first = await publish({ channel, data: 1 }, key)
    expect(first.body).toEqual({ id: expect.any(String), channel })
    expect((await publish({ channel, data: 1 }, key)).body).toEqual(first.body)
  })

  test('a key outside 1 to 256 characters is 400 invalid_idempotency_key naming the header; nothing is published', async () => {
    const channel = `chat:${randomUUID()}`
    const refused = await publish({ channel, data: 1 }, 'k'.repeat(257))
    expect(refused.status).toBe(400)
    expect(refused.body).toMatchObject({ error: 'invalid_idempotency_key', fields: [{ path: '/headers/idempotency-key' }] })
    expect(await channelTop(p.productId, channel)).toBeNull()
    expect((await publish({ channel, data: 1 }, 'k'.repeat(256))).status).toBe(200)
  })

  test('a request refused before it publishes (an unregistered namespace) leaves the key free for another request', async () => {
    const key = randomUUID()
    expect((await publish({ channel: 'nowhere:x', data: 1 }, key)).status).toBe(404)
    expect((await publish({ channel: `chat:${randomUUID()}`, data: 2 }, key)).status).toBe(200)
  })

  test('the platform API\'s realtime_messages_publish shares the product\'s keys: a repeat there answers replayed: true', async () => {
    const channel = `chat:${randomUUID()}`
    const key = randomUUID()
    const first = await publish({ channel, data: 'both' }, key)
    const tool = await call('POST', '/realtime/messages', { token: p.token, productId: p.productId, body: { channel, data: 'both', idempotencyKey: key } })
    expect(tool.status).toBe(200)
    expect(tool.body).toEqual({ ...first.body, replayed: true })
    const bad = await call('POST', '/realtime/messages', { token: p.token, productId: p.productId, body: { channel, data: 'other', idempotencyKey: key } })
    expect(bad.status).toBe(409)
    const long = await call('POST', '/realtime/messages', { token: p.token, productId: p.productId, body: { channel, data: 1, idempotencyKey: '' } })
    expect(long.status).toBe(400)
    expect(long.body.fields[0].path).toBe('/body/idempotencyKey')
    expect(await entries(channel)).toHaveLength(1)
  })
})

describe('POST /messages/broadcast', () => {
  test('one payload to several channels: each answered on its own, with its offset, and an unregistered one refused alone', async () => {
    const [a, b, live] = [`chat:${randomUUID()}`, `chat:${randomUUID()}`, `live:${randomUUID()}`]
    expect((await publish({ channel: b, data: 'before' })).body.offset).toBe(1)
    const result = await broadcast({ channels: [a, b, 'nowhere:x', live], data: { text: 'all' } })
    expect(result.status).toBe(200)
    expect(result.body.results).toEqual([
      { status: 200, id: expect.any(String), channel: a, offset: 1, epoch: expect.any(String) },
      { status: 200, id: expect.any(String), channel: b, offset: 2, epoch: expect.any(String) },
      { status: 404, channel: 'nowhere:x', error: 'namespace_not_registered', message: expect.any(String), fields: [{ path: '/body/channels/2', message: expect.any(String) }] },
      { status: 200, id: expect.any(String), channel: live },
    ])
    expect(new Set(result.body.results.filter((r: any) => r.id).map((r: any) => r.id)).size).toBe(3)
    expect((await entries(a)).map((e) => e.data)).toEqual([{ text: 'all' }])
    expect((await entries(b)).map((e) => e.data)).toEqual(['before', { text: 'all' }])
  })

  test('a hundred channels spread over the shards publish once each; the platform API\'s tool does the same', async () => {
    const channels = Array.from({ length: 100 }, (_, i) => `chat:wide-${i}-${randomUUID()}`)
    const result = await broadcast({ channels, data: 1 })
    expect(result.body.results.map((r: any) => [r.channel, r.status, r.offset])).toEqual(channels.map((c) => [c, 200, 1]))
    const tool = await call('POST', '/realtime/messages/broadcast', { token: p.token, productId: p.productId, body: { channels: channels.slice(0, 3), data: 2 } })
    expect(tool.status).toBe(200)
    expect(tool.body.results.map((r: any) => r.offset)).toEqual([2, 2, 2])
  })

  test('bad requests are 4xx naming the field: no channels, 101, a repeated one; a body over 64 KiB is 413, gzip 415', async () => {
    const c = `chat:${randomUUID()}`
    for (const [body, status, path] of [
      [{ channels: [], data: 1 }, 400, '/channels'],
      [{ channels: Array.from({ length: 101 }, (_, i) => `chat:${i}`), data: 1 }, 400, '/channels'],
      [{ channels: [c, c], data: 1 }, 400, '/channels'],
      [{ channels: [c] }, 400, '/data'],
    ] as const) {
      const refused = await broadcast(body)
      expect(refused.status).toBe(status)
      expect(JSON.stringify(refused.body.fields)).toContain(path)
    }
    // The body limit of every route but POST /messages (one payload goes to up to 100 channels), and no gzip.
    const over = await broadcast({ channels: [c], data: 'x'.repeat(65_536) })
    expect(over.status).toBe(413)
    expect(over.body).toMatchObject({ error: 'payload_too_large', limit: 65_536 })
    const gzipped = await pub(pair.a, 'POST', `/${p.productId}/realtime/messages/broadcast`, {
      key: p.key, raw: Bun.gzipSync(JSON.stringify({ channels: [c], data: 1 })), headers: { 'content-encoding': 'gzip', 'content-type': 'application/json' },
    })
    expect(gzipped.status).toBe(415)
    expect(await channelTop(p.productId, c)).toBeNull()
  })

  test('concurrent broadcasts under one key on two workers publish once per channel', async () => {
    const channels = Array.from({ length: 5 }, () => `chat:${randomUUID()}`)
    const key = randomUUID()
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => broadcast({ channels, data: 'once' }, key, i % 2 ? pair.a : pair.b)))
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(200))
    // Every answer names the same publications, and each channel was published by exactly one of the requests: the
    // others answer it from its marker, replayed. An answer that published nothing itself says so in the header.
    const plain = (results: any[]) => JSON.stringify(results.map(({ replayed: _, ...rest }) => rest))
    expect(new Set(answers.map((a) => plain(a.body.results))).size).toBe(1)
    for (let k = 0; k < channels.length; k++) expect(answers.filter((a) => a.body.results[k].replayed !== true)).toHaveLength(1)
    for (const a of answers) {
      expect(a.headers.get('idempotent-replayed')).toBe(a.body.results.every((r: any) => r.replayed === true) ? 'true' : null)
    }
    // On one Redis the whole request is one script, so one request publishes every channel. On a cluster it is one
    // script per shard: a repeat that reaches a shard before the first request publishes that shard's channels itself
    // (docs/realtime-data-plane.md, "Idempotency-Key": serialized per channel's shard).
    if (!needsOneRedis) expect(answers.filter((a) => a.headers.get('idempotent-replayed') === 'true')).toHaveLength(9)
    for (const channel of channels) expect(await entries(channel)).toHaveLength(1)
  })
})

// The one-step script (one Redis): a refusal by the quota, and a keyed retry that completes what the first left undone.
describe.skipIf(needsOneRedis)('publishInOneStep with a key', () => {
  const policy = { historyTtlSeconds: 60, historySize: 10 }
  const input = (productId: string, channel: string) => ({ productId, channel, policy, data: '1', id: randomUUID() })

  test('a repeat publishes only on the channels the first request did not (past the quota there); a request that published nothing frees its key', async () => {
    const productId = randomUUID()
    const keyed = keyedRequest(randomUUID(), Buffer.from('the request'))
    const quota = { window: windowOf(`test:quota:${randomUUID()}`, 60), limit: 1 }
    const first = await publishInOneStep([input(productId, 'chat:a'), input(productId, 'chat:b')], { quota, keyed })
    expect(first).toEqual({ channels: [{ published: expect.objectContaining({ offset: 1 }), replayed: false }, { overQuota: 2 }] })
    // The claim lives as long as the key's window, not longer.
    const pttl = await redis().pttl(idempotencyClaimKey(productId, keyed.keyHash))
    expect(pttl).toBeGreaterThan(IDEMPOTENCY_WINDOW_MS - 5000)
    expect(pttl).toBeLessThanOrEqual(IDEMPOTENCY_WINDOW_MS)
    const room = { window: windowOf(`test:quota:${randomUUID()}`, 60), limit: 5 }
    const again = await publishInOneStep([input(productId, 'chat:a'), input(productId, 'chat:b')], { quota: room, keyed })
    expect(again).toEqual({ channels: [{ published: (first as any).channels[0].published, replayed: true }, { published: expect.objectContaining({ offset: 1 }), replayed: false }] })
    expect(await redis().get(room.window.key)).toBe('1') // the repeat on chat:a was not counted
    // Nothing published: the claim is taken back, and the key can name another request.
    const other = keyedRequest(randomUUID(), Buffer.from('refused'))
    const none = { window: windowOf(`test:quota:${randomUUID()}`, 60), limit: 1 }
    await redis().set(none.window.key, '1')
    expect(await publishInOneStep([input(productId, 'chat:c')], { quota: none, keyed: other })).toEqual({ channels: [{ overQuota: 2 }] })
    expect(await redis().exists(idempotencyClaimKey(productId, other.keyHash))).toBe(0)
    // A marker outlives its claim (a repeat published late): once the claim is gone, the key names a new request, and
    // that request publishes its own data, never answered with the old one's publication.
    await redis().del(idempotencyClaimKey(productId, keyed.keyHash))
    const reused = { keyHash: keyed.keyHash, fingerprint: 'another request' }
    const fresh = await publishInOneStep([input(productId, 'chat:b')], { quota: room, keyed: reused })
    expect(fresh).toEqual({ channels: [{ published: expect.objectContaining({ offset: 2 }), replayed: false }] })
    await redis().del(quota.window.key, room.window.key, none.window.key)
  })
})
