// Capture from browsers and apps: the publishable keys (ptk_) managed through the catalog, and the public capture route on
// two real workers: key (401/404), origins and preflight, sendBeacon and gzip bodies, bounds (413, 400, 429), revocation.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { gzipSync } from 'node:zlib'
import { sql } from '../../shared/db/client'
import { call, newPlatformKey, newProduct, ok } from '../helpers'
import { awayFromWindowEdge, pub, startPublicPair, uniqueIp, type Pair } from '../realtime/public-helpers'

const KEY_EVENTS_PER_SECOND = 1000
const IP_REQUESTS_PER_MINUTE = 20

let pair: Pair
let owner: Awaited<ReturnType<typeof newProduct>>
let other: Awaited<ReturnType<typeof newProduct>>

beforeAll(async () => {
  ;[pair, owner, other] = await Promise.all([
    startPublicPair({ CAPTURE_KEY_EVENTS_PER_SECOND: String(KEY_EVENTS_PER_SECOND), CAPTURE_IP_RATE_LIMIT: String(IP_REQUESTS_PER_MINUTE) }),
    newProduct('Capture test'), newProduct('Capture other'),
  ])
})
afterAll(async () => {
  await pair.stop()
})

const manage = (who: { token: string; productId: string }, method: string, path: string, body?: unknown) =>
  call(method, path, { token: who.token, productId: who.productId, body })

async function newKey(who = owner, allowedOrigins?: string[]) {
  return ok(await manage(who, 'POST', '/tracking/capture-keys', { name: 'site', ...(allowedOrigins ? { allowedOrigins } : {}) }), 'create capture key').body as
    { id: string; key: string; allowedOrigins: string[] }
}

const event = (name: string, extra: Record<string, unknown> = {}) => ({ event: name, identity: { anonymous_id: 'anon-1' }, ...extra })
const capturePath = (productId: string, key?: string) => `/${productId}/capture${key === undefined ? '' : `?key=${encodeURIComponent(key)}`}`
const stored = async (productId: string, name: string) =>
  (await sql<{ n: number }[]>`select count(*)::int as n from tracked_events where product_id = ${productId} and event = ${name}`)[0]!.n

describe('capture keys in the catalog', () => {
  test('create, list, replace origins and revoke; origins are checked and normalized', async () => {
    const created = await newKey(owner, ['https://Shop.Example.com', 'http://127.0.0.1:8080', 'https://shop.example.com'])
    expect(created.key).toMatch(/^ptk_[A-Za-z0-9_-]{43}$/)
    expect(created.allowedOrigins).toEqual(['https://shop.example.com', 'http://127.0.0.1:8080'])
    const listed = ok(await manage(owner, 'GET', '/tracking/capture-keys'), 'list').body
    expect(listed.keys.find((k: any) => k.id === created.id)).toEqual(expect.objectContaining({ key: created.key, name: 'site' }))

    const updated = ok(await manage(owner, 'PUT', `/tracking/capture-keys/${created.id}/origins`, { allowedOrigins: [] }), 'update').body
    expect(updated.allowedOrigins).toEqual([])
    for (const bad of ['https://shop.example.com/', 'https://*.example.com', 'shop.example.com', 'ftp://x.example', 'https://x.example/path']) {
      const refused = await manage(owner, 'PUT', `/tracking/capture-keys/${created.id}/origins`, { allowedOrigins: ['https://ok.example', bad] })
      expect({ bad, status: refused.status, path: refused.body.fields?.[0]?.path }).toEqual({ bad, status: 400, path: '/body/allowedOrigins/1' })
    }
    const tooMany = await manage(owner, 'POST', '/tracking/capture-keys', { name: 'x', allowedOrigins: Array.from({ length: 21 }, (_, i) => `https://s${i}.example`) })
    expect(tooMany.status).toBe(400)

    expect(ok(await manage(owner, 'DELETE', `/tracking/capture-keys/${created.id}`), 'revoke').body).toEqual({ id: created.id, revoked: true })
    expect((await manage(owner, 'DELETE', `/tracking/capture-keys/${created.id}`)).status).toBe(404)
    const after = ok(await manage(owner, 'GET', '/tracking/capture-keys'), 'list').body
    expect(after.keys.map((k: any) => k.id)).not.toContain(created.id)
  })

  test("another product's key id is 404 on every operation", async () => {
    const theirs = await newKey(other)
    expect((await manage(owner, 'DELETE', `/tracking/capture-keys/${theirs.id}`)).status).toBe(404)
    expect((await manage(owner, 'PUT', `/tracking/capture-keys/${theirs.id}/origins`, { allowedOrigins: [] })).status).toBe(404)
  })

  test('a platform key with the Tracking area manages capture keys; one without it gets 403', async () => {
    const tracking = await newPlatformKey(owner, ['tracking'])
    const mail = await newPlatformKey(owner, ['mail'])
    expect((await call('POST', '/tracking/capture-keys', { token: tracking.key, body: { name: 'from key' } })).status).toBe(200)
    expect((await call('POST', '/tracking/capture-keys', { token: mail.key, body: { name: 'from key' } })).status).toBe(403)
  })
})

describe('the capture route', () => {
  test('a batch is stored under the key’s product, on both workers, and answers {accepted}', async () => {
    const { key } = await newKey()
    for (const worker of [pair.a, pair.b]) {
      const name = `signup-${randomUUID()}`
      const result = await pub(worker, 'POST', capturePath(owner.productId, key), { body: { events: [event(name), event(name, { properties: { plan: 'pro' } })] } })
      expect({ status: result.status, body: result.body }).toEqual({ status: 200, body: { accepted: 2 } })
      expect(await stored(owner.productId, name)).toBe(2)
    }
  })

  test('sendBeacon bodies (text/plain JSON) and gzip bodies are accepted', async () => {
    const { key } = await newKey()
    const name = `beacon-${randomUUID()}`
    const beacon = await pub(pair.a, 'POST', capturePath(owner.productId, key), {
      raw: JSON.stringify({ events: [event(name)] }), headers: { 'content-type': 'text/plain;charset=UTF-8' },
    })
    expect(beacon.status).toBe(200)
    const gzipped = await pub(pair.a, 'POST', capturePath(owner.productId, key), {
      raw: gzipSync(JSON.stringify({ events: Array.from({ length: 500 }, () => event(name)) })),
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
    })
    expect({ status: gzipped.status, body: gzipped.body }).toEqual({ status: 200, body: { accepted: 500 } })
    expect(await stored(owner.productId, name)).toBe(501)
  })

  test('a gzip bomb is refused with 413 (decompressed past 1 MiB), as is a plain body past 1 MiB', async () => {
    const { key } = await newKey()
    const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024, 0x20)) // 64 MiB of spaces in ~64 KiB
    expect(bomb.byteLength).toBeLessThan(1024 * 1024)
    const refused = await pub(pair.a, 'POST', capturePath(owner.productId, key), { raw: bomb, headers: { 'content-encoding': 'gzip' } })
    expect({ status: refused.status, error: refused.body.error }).toEqual({ status: 413, error: 'payload_too_large' })
    const big = await pub(pair.a, 'POST', capturePath(owner.productId, key), { raw: ' '.repeat(1024 * 1024 + 1) })
    expect({ status: big.status, error: big.body.error }).toEqual({ status: 413, error: 'payload_too_large' })
    const brotli = await pub(pair.a, 'POST', capturePath(owner.productId, key), { body: { events: [event('x')] }, headers: { 'content-encoding': 'br' } })
    expect(brotli.status).toBe(415)
  })

  test('bad input is 400 naming the field, and nothing of the batch is stored', async () => {
    const { key } = await newKey()
    const name = `bad-${randomUUID()}`
    const events = [event(name), event(name), event(name), { event: name, identity: { anonymous_id: '  ' } }]
    const result = await pub(pair.a, 'POST', capturePath(owner.productId, key), { body: { events } })
    expect(result.status).toBe(400)
    expect(result.body.fields).toEqual([expect.objectContaining({ path: '/body/events/3/identity' })])
    const shape = await pub(pair.a, 'POST', capturePath(owner.productId, key), { body: { events: [event(name), { event: name }] } })
    expect({ status: shape.status, paths: shape.body.fields.map((f: any) => f.path) }).toEqual({ status: 400, paths: ['/body/events/1/identity'] })
    const many = await pub(pair.a, 'POST', capturePath(owner.productId, key), { body: { events: Array.from({ length: 1001 }, () => event(name)) } })
    expect(many.status).toBe(400)
    const json = await pub(pair.a, 'POST', capturePath(owner.productId, key), { raw: '{"events": [' })
    expect({ status: json.status, error: json.body.error }).toEqual({ status: 400, error: 'invalid_json' })
    expect(await stored(owner.productId, name)).toBe(0)
  })

  test('missing, malformed and unknown keys are 401; a revoked key answers as an unknown one, at once on both workers', async () => {
    const path = capturePath(owner.productId)
    const body = { events: [event('k')] }
    for (const key of [undefined, '', 'ptk_short', 'rtk_' + 'A'.repeat(43), 'ptk_' + 'A'.repeat(43)]) {
      const result = await pub(pair.a, 'POST', capturePath(owner.productId, key), { body })
      expect({ key, status: result.status, error: result.body.error }).toEqual({ key, status: 401, error: 'invalid_api_key' })
    }
    expect((await pub(pair.a, 'POST', path, { body })).body.hint).toContain('key')
    const { id, key } = await newKey()
    for (const worker of [pair.a, pair.b]) expect((await pub(worker, 'POST', capturePath(owner.productId, key), { body })).status).toBe(200)
    ok(await manage(owner, 'DELETE', `/tracking/capture-keys/${id}`), 'revoke')
    const unknown = await pub(pair.a, 'POST', capturePath(owner.productId, 'ptk_' + 'B'.repeat(43)), { body })
    for (const worker of [pair.a, pair.b]) {
      const revoked = await pub(worker, 'POST', capturePath(owner.productId, key), { body })
      expect({ status: revoked.status, body: revoked.body }).toEqual({ status: 401, body: unknown.body })
    }
  })

  test("a key of another product is 404, exactly as a product that does not exist, and stores nothing there", async () => {
    const mine = await newKey(owner)
    const name = `probe-${randomUUID()}`
    const body = { events: [event(name)] }
    const theirs = await pub(pair.a, 'POST', capturePath(other.productId, mine.key), { body })
    const nobody = await pub(pair.a, 'POST', capturePath(randomUUID(), mine.key), { body })
    expect({ status: theirs.status, body: theirs.body }).toEqual({ status: 404, body: nobody.body })
    expect(nobody.status).toBe(404)
    expect(await stored(other.productId, name)).toBe(0)
    const preflight = await pub(pair.a, 'OPTIONS', capturePath(other.productId, mine.key), { headers: { origin: 'https://a.example' } })
    expect(preflight.status).toBe(404)
  })
})

describe('browser origins', () => {
  test('a listed origin gets CORS headers; another is 403 without them; no Origin (apps, servers) is accepted', async () => {
    const { key } = await newKey(owner, ['https://shop.example.com'])
    const body = { events: [event('o')] }
    const allowed = await pub(pair.a, 'POST', capturePath(owner.productId, key), { body, headers: { origin: 'https://shop.example.com' } })
    expect({ status: allowed.status, cors: allowed.headers.get('access-control-allow-origin') }).toEqual({ status: 200, cors: 'https://shop.example.com' })
    const refused = await pub(pair.a, 'POST', capturePath(owner.productId, key), { body, headers: { origin: 'https://evil.example' } })
    expect({ status: refused.status, error: refused.body.error, cors: refused.headers.get('access-control-allow-origin') })
      .toEqual({ status: 403, error: 'origin_not_allowed', cors: null })
    expect((await pub(pair.a, 'POST', capturePath(owner.productId, key), { body })).status).toBe(200)
  })

  test('a key listing no origins is accepted from any origin', async () => {
    const { key } = await newKey()
    const result = await pub(pair.a, 'POST', capturePath(owner.productId, key), { body: { events: [event('o')] }, headers: { origin: 'https://anywhere.example' } })
    expect({ status: result.status, cors: result.headers.get('access-control-allow-origin') }).toEqual({ status: 200, cors: 'https://anywhere.example' })
  })

  test('preflight: 204 for an allowed origin; 403 for another or none; 401 for an unknown key', async () => {
    const { key } = await newKey(owner, ['https://shop.example.com'])
    const yes = await pub(pair.a, 'OPTIONS', capturePath(owner.productId, key), { headers: { origin: 'https://shop.example.com', 'access-control-request-method': 'POST' } })
    expect(yes.status).toBe(204)
    expect(yes.headers.get('access-control-allow-origin')).toBe('https://shop.example.com')
    expect(yes.headers.get('access-control-allow-methods')).toContain('POST')
    expect(yes.headers.get('access-control-allow-headers')).toContain('Content-Encoding')
    const no = await pub(pair.a, 'OPTIONS', capturePath(owner.productId, key), { headers: { origin: 'https://evil.example' } })
    expect({ status: no.status, cors: no.headers.get('access-control-allow-origin') }).toEqual({ status: 403, cors: null })
    expect((await pub(pair.a, 'OPTIONS', capturePath(owner.productId, key))).status).toBe(403)
    expect((await pub(pair.a, 'OPTIONS', capturePath(owner.productId, 'ptk_' + 'C'.repeat(43)), { headers: { origin: 'https://shop.example.com' } })).status).toBe(401)
  })

  test('replacing the origins takes effect at once on both workers, although both had the key cached', async () => {
    const { id, key } = await newKey(owner, ['https://one.example'])
    const body = { events: [event('o')] }
    for (const worker of [pair.a, pair.b]) expect((await pub(worker, 'POST', capturePath(owner.productId, key), { body, headers: { origin: 'https://one.example' } })).status).toBe(200)
    ok(await manage(owner, 'PUT', `/tracking/capture-keys/${id}/origins`, { allowedOrigins: ['https://two.example'] }), 'update')
    for (const worker of [pair.a, pair.b]) {
      expect((await pub(worker, 'POST', capturePath(owner.productId, key), { body, headers: { origin: 'https://one.example' } })).status).toBe(403)
      expect((await pub(worker, 'POST', capturePath(owner.productId, key), { body, headers: { origin: 'https://two.example' } })).status).toBe(200)
    }
  })
})

describe('rate bounds', () => {
  test('events per key per second: a batch past the bound is 429 with Retry-After and is not stored', async () => {
    const { key } = await newKey()
    const name = `rate-${randomUUID()}`
    await awayFromWindowEdge(1, 600)
    const first = await pub(pair.a, 'POST', capturePath(owner.productId, key), { body: { events: Array.from({ length: KEY_EVENTS_PER_SECOND - 50 }, () => event(name)) } })
    const second = await pub(pair.b, 'POST', capturePath(owner.productId, key), { body: { events: Array.from({ length: 100 }, () => event(name)) } })
    expect(first.status).toBe(200)
    expect({ status: second.status, error: second.body.error, retryAfter: second.headers.get('retry-after') }).toEqual({ status: 429, error: 'rate_limited', retryAfter: '1' })
    expect(await stored(owner.productId, name)).toBe(KEY_EVENTS_PER_SECOND - 50)
  })

  test('requests per client IP per minute, across both workers, apart from the other public routes', async () => {
    const { key } = await newKey()
    const ip = uniqueIp()
    await awayFromWindowEdge(60, 5000)
    for (let i = 0; i < IP_REQUESTS_PER_MINUTE; i++) {
      const result = await pub(i % 2 ? pair.a : pair.b, 'POST', capturePath(owner.productId, key), { ip, body: { events: [event('ip')] } })
      expect(result.status).toBe(200)
    }
    const over = await pub(pair.a, 'POST', capturePath(owner.productId, key), { ip, body: { events: [event('ip')] } })
    expect({ status: over.status, error: over.body.error }).toEqual({ status: 429, error: 'rate_limited' })
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    // Key guessing from that address is bounded too: an unknown key is refused by the limit before any lookup.
    expect((await pub(pair.b, 'POST', capturePath(owner.productId, 'ptk_' + 'D'.repeat(43)), { ip, body: { events: [event('ip')] } })).status).toBe(429)
  })
})
