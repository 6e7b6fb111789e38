// POST /messages on two real workers: inline and stored (ref) payloads, gzip, limits, quota across workers, history.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { config } from '../../shared/config'
import { INLINE_CAP_BYTES, s3 } from '../../shared/realtime/payloads'
import { checkPublishQuota, DEFAULT_LIMITS, hardLimit, quotaKey } from '../../shared/realtime/publish-quota'
import { redis } from '../../shared/redis/client'
import { awayFromWindowEdge, manage, pub, realtimeProduct, startPublicPair, type Pair, type RealtimeProduct } from './public-helpers'
import { call } from '../helpers'

let pair: Pair
let p: RealtimeProduct

beforeAll(async () => {
  ;[pair, p] = await Promise.all([
    startPublicPair(),
    realtimeProduct([{ name: 'chat', presence: true, history: { ttlSeconds: 300, size: 100 } }, { name: 'live' }]),
  ])
})
afterAll(async () => {
  await pair.stop()
})

const publish = (body: unknown, options: { worker?: typeof pair.a; product?: RealtimeProduct } = {}) => {
  const product = options.product ?? p
  return pub(options.worker ?? pair.a, 'POST', `/${product.productId}/realtime/messages`, { key: product.key, body })
}
const gzipped = (product: RealtimeProduct, body: unknown, worker = pair.a) =>
  pub(worker, 'POST', `/${product.productId}/realtime/messages`, {
    key: product.key, raw: Bun.gzipSync(JSON.stringify(body)), headers: { 'content-encoding': 'gzip', 'content-type': 'application/json' },
  })
/** A string whose JSON serialization is exactly `bytes` long. */
const dataOf = (bytes: number) => 'x'.repeat(bytes - 2)

describe('POST /messages', () => {
  test('publish via worker A; history via worker B returns it with the same offset and epoch', async () => {
    const channel = `chat:${randomUUID()}`
    const first = await publish({ channel, data: { text: 'hello', n: 1 } })
    expect(first.status).toBe(200)
    expect(first.body).toEqual({ id: expect.any(String), channel, offset: 1, epoch: expect.any(String) })
    const second = await publish({ channel, data: null }, { worker: pair.b })
    expect(second.body).toMatchObject({ offset: 2, epoch: first.body.epoch })
    const history = await pub(pair.b, 'GET', `/${p.productId}/realtime/channels/${channel}/history?last_n=10`, { key: p.key })
    expect(history.status).toBe(200)
    expect(history.body).toEqual({
      channel, offset: 2, epoch: first.body.epoch, recovered: true,
      entries: [
        { id: first.body.id, offset: 1, epoch: first.body.epoch, publishedAt: expect.any(String), data: { text: 'hello', n: 1 } },
        { id: second.body.id, offset: 2, epoch: first.body.epoch, publishedAt: expect.any(String), data: null },
      ],
    })
  })

  test('a namespace without history: delivered, no offset or epoch', async () => {
    const result = await publish({ channel: 'live:scores', data: [1, 2, 3] })
    expect(result.status).toBe(200)
    expect(result.body).toEqual({ id: expect.any(String), channel: 'live:scores' })
  })

  test('a namespace deleted through an upper-case X-Product-Id is gone on every worker at once', async () => {
    const q = await realtimeProduct([{ name: 'chat' }])
    const body = { channel: 'chat:1', data: 1 }
    for (const worker of [pair.a, pair.b]) {
      expect((await pub(worker, 'POST', `/${q.productId}/realtime/messages`, { key: q.key, body })).status).toBe(200) // cached
    }
    const deleted = await call('DELETE', '/realtime/namespaces/chat', { token: q.token, productId: q.productId.toUpperCase() })
    expect(deleted.status).toBe(200)
    for (const worker of [pair.a, pair.b]) {
      const result = await pub(worker, 'POST', `/${q.productId}/realtime/messages`, { key: q.key, body })
      expect({ status: result.status, error: result.body.error }).toEqual({ status: 404, error: 'namespace_not_registered' })
    }
  })

  test('unregistered namespace: 404 naming the channel', async () => {
    const result = await publish({ channel: 'ghost:1', data: 1 })
    expect(result.status).toBe(404)
    expect(result.body).toMatchObject({ error: 'namespace_not_registered', fields: [{ path: '/body/channel' }] })
  })

  test('validation: data is required (null is a value), channel must be a channel name', async () => {
    const cases: [unknown, string[]][] = [
      [{ channel: 'chat:1' }, ['/body/data']],
      [{ data: 1 }, ['/body/channel']],
      [{ channel: 'nocolon', data: 1 }, ['/body/channel']],
      [{ channel: 'chat:a b', data: 1 }, ['/body/channel']],
      [{ channel: 'chat:1', data: 1, extra: true }, ['/body/extra']],
      [[], ['/body']],
    ]
    for (const [body, fields] of cases) {
      const result = await publish(body)
      expect({ body, status: result.status }).toEqual({ body, status: 400 })
      expect([...new Set(result.body.fields.map((f: any) => f.path))]).toEqual(fields)
    }
    const notJson = await pub(pair.a, 'POST', `/${p.productId}/realtime/messages`, { key: p.key, raw: 'nope' })
    expect({ status: notJson.status, error: notJson.body.error }).toEqual({ status: 400, error: 'invalid_json' })
  })

  test('data that JSON cannot carry or that nests too deep is a 400, never a 500 — also inside a gzip body', async () => {
    const path = `/${p.productId}/realtime/messages`
    const infinite = await pub(pair.a, 'POST', path, { key: p.key, raw: '{"channel":"chat:1","data":{"n":1e999}}' })
    expect({ status: infinite.status, fields: infinite.body.fields }).toEqual({ status: 400, fields: [{ path: '/body/data/n', message: 'must be a finite number' }] })
    const deep = `{"channel":"chat:1","data":${'['.repeat(50_000)}${']'.repeat(50_000)}}`
    for (const [raw, headers] of [[deep, {}], [Bun.gzipSync(deep), { 'content-encoding': 'gzip' }]] as const) {
      const result = await pub(pair.a, 'POST', path, { key: p.key, raw, headers })
      expect({ status: result.status, error: result.body.error }).toEqual({ status: 400, error: 'invalid_json' })
    }
    const issue = await pub(pair.b, 'POST', `/${p.productId}/realtime/tokens/issue`, { key: p.key, raw: '['.repeat(30_000) + ']'.repeat(30_000) })
    expect({ status: issue.status, error: issue.body.error }).toEqual({ status: 400, error: 'invalid_json' })
  })

  test('serialized data at the inline cap is inline; above it without payload storage: 503 payload_storage_not_provisioned', async () => {
    const q = await realtimeProduct([{ name: 'chat', history: { ttlSeconds: 300, size: 10 } }])
    const atCap = await gzipped(q, { channel: 'chat:big', data: dataOf(INLINE_CAP_BYTES) })
    expect(atCap.status).toBe(200)
    expect(atCap.body.ref).toBeUndefined()
    const over = await gzipped(q, { channel: 'chat:big', data: dataOf(INLINE_CAP_BYTES + 1) }, pair.b)
    expect(over.status).toBe(503)
    expect(over.body).toMatchObject({ error: 'payload_storage_not_provisioned', size: INLINE_CAP_BYTES + 1 })
    // UTF-8 bytes count, not characters: 100 000 three-byte characters are ~300 KB.
    const wide = await gzipped(q, { channel: 'chat:big', data: '€'.repeat(100_000) })
    expect(wide.status).toBe(503)
  })

  test('gzip body with ~300 KiB data and payload storage: stored in S3, published as ref, readable via the other worker', async () => {
    const q = await realtimeProduct([{ name: 'chat', history: { ttlSeconds: 300, size: 10 } }])
    const storage = await manage(q, 'PUT', '/realtime/payload-storage', {})
    const data = { blob: 'y'.repeat(300 * 1024) }
    const channel = 'chat:files'
    const result = await gzipped(q, { channel, data })
    expect(result.status).toBe(200)
    const size = Buffer.byteLength(JSON.stringify(data))
    expect(result.body).toEqual({
      id: expect.any(String), channel, offset: 1, epoch: expect.any(String),
      ref: { bucket_key: `${q.productId}/${channel}/${result.body.id}`, size, content_type: 'application/json' },
    })
    const stat = await (await s3()).statObject(storage.bucket, result.body.ref.bucket_key)
    expect(stat.size).toBe(size)
    const history = await pub(pair.b, 'GET', `/${q.productId}/realtime/channels/${channel}/history?last_n=1`, { key: q.key })
    expect(history.body.entries).toEqual([{ id: result.body.id, offset: 1, epoch: result.body.epoch, publishedAt: expect.any(String), ref: result.body.ref }])
    expect(history.body.entries[0].data).toBeUndefined()
  })

  test('an over-cap publish repeated under its Idempotency-Key answers the first ref and stores no second payload', async () => {
    const q = await realtimeProduct([{ name: 'chat', history: { ttlSeconds: 300, size: 10 } }])
    const storage = await manage(q, 'PUT', '/realtime/payload-storage', {})
    const channel = `chat:${randomUUID()}`
    const body = { channel, data: { blob: 'z'.repeat(300 * 1024) } }
    const send = (worker: typeof pair.a) => pub(worker, 'POST', `/${q.productId}/realtime/messages`, {
      key: q.key, raw: Bun.gzipSync(JSON.stringify(body)),
      headers: { 'content-encoding': 'gzip', 'content-type': 'application/json', 'idempotency-key': 'upload-1' },
    })
    const first = await send(pair.a)
    expect(first.status).toBe(200)
    const again = await send(pair.b)
    expect(again.status).toBe(200)
    expect(again.headers.get('idempotent-replayed')).toBe('true')
    expect(again.body).toEqual(first.body)
    const objects: string[] = []
    for await (const object of (await s3()).listObjectsV2(storage.bucket, `${q.productId}/${channel}/`, true)) objects.push(object.name)
    expect(objects).toEqual([first.body.ref.bucket_key])
  })

  test('gzip: decompressed size is capped (413), bad gzip is 400, other encodings 415', async () => {
    const path = `/${p.productId}/realtime/messages`
    const bomb = Bun.gzipSync(JSON.stringify({ channel: 'chat:1', data: ' '.repeat(config.realtime.maxDecompressedBytes) }))
    expect(bomb.byteLength).toBeLessThan(65_536)
    const big = await pub(pair.a, 'POST', path, { key: p.key, raw: bomb, headers: { 'content-encoding': 'gzip' } })
    expect({ status: big.status, error: big.body.error }).toEqual({ status: 413, error: 'payload_too_large' })
    const bad = await pub(pair.a, 'POST', path, { key: p.key, raw: 'not gzip', headers: { 'content-encoding': 'gzip' } })
    expect({ status: bad.status, error: bad.body.error }).toEqual({ status: 400, error: 'invalid_body' })
    const br = await pub(pair.a, 'POST', path, { key: p.key, raw: '{}', headers: { 'content-encoding': 'br' } })
    expect({ status: br.status, error: br.body.error }).toEqual({ status: 415, error: 'unsupported_encoding' })
  })
})

describe('publish quota', () => {
  test(`default hard limit ${hardLimit(DEFAULT_LIMITS)} per ${DEFAULT_LIMITS.windowSeconds} s window: every publish up to it passes, the next is refused`, async () => {
    expect(hardLimit(DEFAULT_LIMITS)).toBe(1100)
    const productId = randomUUID()
    const windowMs = DEFAULT_LIMITS.windowSeconds * 1000
    const now = Math.floor(Date.now() / windowMs) * windowMs + 2500 // a fixed instant inside one window
    const results = await Promise.all(Array.from({ length: 1100 }, () => checkPublishQuota(productId, now)))
    expect(results.every((r) => r.allowed)).toBe(true) // no rejection at (or far above) the sustained rate
    const over = await checkPublishQuota(productId, now)
    expect(over).toEqual({ allowed: false, count: 1101, limit: 1100, retryAfter: 8 })
    // The next window starts from zero.
    expect((await checkPublishQuota(productId, now + windowMs)).count).toBe(1)
  })

  test('counted across both workers: 429 quota_exceeded with Retry-After on either worker', async () => {
    const q = await realtimeProduct([{ name: 'chat' }])
    await awayFromWindowEdge(DEFAULT_LIMITS.windowSeconds, 3000)
    // Fill the product's current window up to two below the limit, as if other publishes had come first.
    const window = Math.floor(Date.now() / (DEFAULT_LIMITS.windowSeconds * 1000))
    await redis().set(quotaKey(q.productId, window), 1098, 'EX', 30)
    expect((await publish({ channel: 'chat:1', data: 1 }, { product: q, worker: pair.a })).status).toBe(200)
    expect((await publish({ channel: 'chat:1', data: 2 }, { product: q, worker: pair.b })).status).toBe(200)
    for (const worker of [pair.a, pair.b]) {
      const refused = await publish({ channel: 'chat:1', data: 3 }, { product: q, worker })
      expect(refused.status).toBe(429)
      expect(refused.body).toMatchObject({ error: 'quota_exceeded', limit: 1100 })
      const retryAfter = Number(refused.headers.get('retry-after'))
      expect(retryAfter).toBeGreaterThanOrEqual(1)
      expect(retryAfter).toBeLessThanOrEqual(DEFAULT_LIMITS.windowSeconds)
    }
    // Another product is unaffected; reads are not counted by the quota.
    expect((await publish({ channel: 'chat:1', data: 1 })).status).toBe(200)
    expect((await pub(pair.a, 'GET', `/${q.productId}/realtime/channels/chat:1`, { key: q.key })).status).toBe(200)
  })
})
