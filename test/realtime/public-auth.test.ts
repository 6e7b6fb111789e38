// Public routes, every guard on two real workers: API key (401/404/403), revocation across workers, browser origins
// and CORS, per-IP rate limit across workers, body limits, health and unknown routes.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { config } from '../../shared/config'
import { sql } from '../../shared/db/client'
import { call, startProcess } from '../helpers'
import { awayFromWindowEdge, createKey, pub, realtimeProduct, startPublicPair, uniqueIp, type Pair, type RealtimeProduct } from './public-helpers'

let pair: Pair
let p: RealtimeProduct
let other: RealtimeProduct

beforeAll(async () => {
  ;[pair, p, other] = await Promise.all([startPublicPair(), realtimeProduct(), realtimeProduct()])
})
afterAll(async () => {
  await pair.stop()
})

/** Every public route, with a request that succeeds for a fully scoped key of product `p`. */
const routes = (productId: string) => [
  { scope: 'tokens:issue', method: 'POST', path: `/${productId}/realtime/tokens/issue`, body: { subject: 'u1', channels: [{ name: 'chat:lobby', ops: ['subscribe'] }] } },
  { scope: 'messages:publish', method: 'POST', path: `/${productId}/realtime/messages`, body: { channel: 'chat:lobby', data: { text: 'hi' } } },
  { scope: 'channels:read', method: 'GET', path: `/${productId}/realtime/channels/chat:lobby` },
  { scope: 'history:read', method: 'GET', path: `/${productId}/realtime/channels/chat:lobby/history?last_n=10` },
  { scope: 'presence:read', method: 'GET', path: `/${productId}/realtime/channels/chat:lobby/presence` },
]

const invalidKeyBody = (hint: unknown = expect.any(String)) => ({ error: 'invalid_api_key', message: 'invalid_api_key', hint, gatewayUrl: config.gatewayUrl })

describe('API key', () => {
  test('a valid key reaches every route, on both workers', async () => {
    for (const route of routes(p.productId)) {
      for (const worker of [pair.a, pair.b]) {
        const result = await pub(worker, route.method, route.path, { key: p.key, body: route.body })
        expect({ path: route.path, status: result.status }).toEqual({ path: route.path, status: 200 })
      }
    }
  })

  test('missing, malformed or unknown key: 401 invalid_api_key with hint and gatewayUrl, on every route', async () => {
    const unknown = 'rtk_' + 'A'.repeat(43)
    for (const route of routes(p.productId)) {
      for (const key of [undefined, '', 'rtk_short', 'lmk_' + 'A'.repeat(43), unknown]) {
        const result = await pub(pair.a, route.method, route.path, { key, body: route.body })
        expect({ path: route.path, key, status: result.status, body: result.body }).toEqual({ path: route.path, key, status: 401, body: invalidKeyBody() })
      }
    }
  })

  test('a key in ?api_key= or Authorization: Bearer is refused, and the hint says X-Api-Key', async () => {
    const path = `/${p.productId}/realtime/channels/chat:lobby`
    const inQuery = await pub(pair.a, 'GET', `${path}?api_key=${p.key}`)
    const inQueryToo = await pub(pair.a, 'GET', `${path}?api_key=${p.key}`, { key: p.key })
    const bearer = await pub(pair.a, 'GET', path, { headers: { authorization: `Bearer ${p.key}` } })
    for (const result of [inQuery, inQueryToo, bearer]) {
      expect(result.status).toBe(401)
      expect(result.body).toEqual(invalidKeyBody(expect.stringContaining('X-Api-Key')))
    }
  })

  test('unknown and revoked keys get identical bodies', async () => {
    const { id, key } = await createKey(p)
    const path = `/${p.productId}/realtime/channels/chat:lobby`
    expect((await pub(pair.a, 'GET', path, { key })).status).toBe(200)
    expect((await call('DELETE', `/governance/api/v1/products/${p.productId}/public-keys/${id}`, { token: p.token })).status).toBe(200)
    const revoked = await pub(pair.a, 'GET', path, { key })
    const unknown = await pub(pair.a, 'GET', path, { key: 'rtk_' + 'B'.repeat(43) })
    expect(revoked.status).toBe(401)
    expect(revoked.body).toEqual(unknown.body)
  })

  test('revocation is immediate on every worker, although both had the key cached', async () => {
    const { id, key } = await createKey(p)
    const path = `/${p.productId}/realtime/channels/chat:lobby`
    for (let i = 0; i < 3; i++) {
      expect((await pub(pair.a, 'GET', path, { key })).status).toBe(200)
      expect((await pub(pair.b, 'GET', path, { key })).status).toBe(200)
    }
    expect((await call('DELETE', `/governance/api/v1/products/${p.productId}/public-keys/${id}`, { token: p.token })).status).toBe(200)
    expect((await pub(pair.b, 'GET', path, { key })).status).toBe(401)
    expect((await pub(pair.a, 'GET', path, { key })).status).toBe(401)
  })

  test('a scope change is immediate too', async () => {
    const { id, key } = await createKey(p)
    const path = `/${p.productId}/realtime/channels/chat:lobby`
    expect((await pub(pair.b, 'GET', path, { key })).status).toBe(200)
    const changed = await call('PUT', `/governance/api/v1/products/${p.productId}/public-keys/${id}/scope`, { token: p.token, body: { scope: ['tokens:issue'] } })
    expect(changed.status).toBe(200)
    const result = await pub(pair.b, 'GET', path, { key })
    expect(result.status).toBe(403)
    expect(result.body.error).toBe('insufficient_scope')
  })

  test("a valid key on another product's path: 404, never 403, on every route", async () => {
    for (const route of routes(other.productId)) {
      const result = await pub(pair.b, route.method, route.path, { key: p.key, body: route.body })
      expect({ path: route.path, status: result.status, error: result.body.error }).toEqual({ path: route.path, status: 404, error: 'not_found' })
    }
    const notAUuid = await pub(pair.b, 'GET', '/not-a-product/realtime/channels/chat:lobby', { key: p.key })
    expect(notAUuid.status).toBe(404)
  })

  test("a key without the route's scope: 403 insufficient_scope, on every route", async () => {
    for (const route of routes(p.productId)) {
      const others = ['tokens:issue', 'messages:publish', 'history:read', 'presence:read', 'channels:read'].filter((s) => s !== route.scope)
      const { key } = await createKey(p, others)
      const result = await pub(pair.a, route.method, route.path, { key, body: route.body })
      expect({ path: route.path, status: result.status, error: result.body.error }).toEqual({ path: route.path, status: 403, error: 'insufficient_scope' })
      const allowed = await createKey(p, [route.scope])
      expect((await pub(pair.a, route.method, route.path, { key: allowed.key, body: route.body })).status).toBe(200)
    }
  })
})

describe('browser origins', () => {
  const path = () => `/${p.productId}/realtime/channels/chat:lobby`

  test('https://<subdomain>.{developerDomain} is accepted on every route, with CORS headers', async () => {
    for (const route of routes(p.productId)) {
      for (const origin of [`https://app.${config.developerDomain}`, `https://a.b-c.${config.developerDomain}`]) {
        const result = await pub(pair.a, route.method, route.path, { key: p.key, body: route.body, headers: { origin } })
        expect(result.status).toBe(200)
        expect(result.headers.get('access-control-allow-origin')).toBe(origin)
      }
    }
  })

  test('other origins: 403 origin_not_allowed without CORS headers, on every route', async () => {
    const refused = ['https://evil.example', `https://${config.developerDomain}`, `http://app.${config.developerDomain}`,
      `https://app.${config.developerDomain}.evil.example`, `https://app.${config.developerDomain}:8443`, 'null']
    for (const route of routes(p.productId)) {
      for (const origin of refused) {
        const result = await pub(pair.b, route.method, route.path, { key: p.key, body: route.body, headers: { origin } })
        expect({ origin, status: result.status, error: result.body.error }).toEqual({ origin, status: 403, error: 'origin_not_allowed' })
        expect(result.headers.get('access-control-allow-origin')).toBeNull()
      }
    }
  })

  test('an unknown route answers an allowed page with CORS headers too, and another origin without', async () => {
    const allowed = `https://app.${config.developerDomain}`
    const seen = await pub(pair.a, 'GET', `/${p.productId}/realtime/nope`, { key: p.key, headers: { origin: allowed } })
    expect({ status: seen.status, cors: seen.headers.get('access-control-allow-origin') }).toEqual({ status: 404, cors: allowed })
    const other = await pub(pair.a, 'GET', `/${p.productId}/realtime/nope`, { key: p.key, headers: { origin: 'https://evil.example' } })
    expect({ status: other.status, cors: other.headers.get('access-control-allow-origin') }).toEqual({ status: 404, cors: null })
  })

  test('errors to an allowed origin still carry CORS headers, so the page can read them', async () => {
    const origin = `https://app.${config.developerDomain}`
    const result = await pub(pair.a, 'GET', path(), { headers: { origin } })
    expect(result.status).toBe(401)
    expect(result.headers.get('access-control-allow-origin')).toBe(origin)
  })

  test('preflight: 204 with methods and headers for an allowed origin; 403 without CORS headers otherwise', async () => {
    const origin = `https://app.${config.developerDomain}`
    const ok = await pub(pair.a, 'OPTIONS', `/${p.productId}/realtime/messages`, {
      headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'x-api-key, content-type' },
    })
    expect(ok.status).toBe(204)
    expect(ok.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/)
    expect(ok.headers.get('access-control-allow-origin')).toBe(origin)
    expect(ok.headers.get('access-control-allow-methods')).toContain('POST')
    const allowHeaders = ok.headers.get('access-control-allow-headers')!.toLowerCase()
    for (const name of ['x-api-key', 'content-type', 'content-encoding']) expect(allowHeaders).toContain(name)
    const refusals: Record<string, string>[] = [{ origin: 'https://evil.example', 'access-control-request-method': 'POST' }, {}]
    for (const headers of refusals) {
      const refused = await pub(pair.b, 'OPTIONS', `/${p.productId}/realtime/messages`, { headers })
      expect(refused.status).toBe(403)
      expect(refused.headers.get('access-control-allow-origin')).toBeNull()
      expect(refused.headers.get('access-control-allow-methods')).toBeNull()
    }
  })
})

describe('request rate limit', () => {
  test(`${config.realtime.ipRequestsPerMinute} requests per minute per IP, counted across both workers; then 429 rate_limited`, async () => {
    await awayFromWindowEdge(60, 5000)
    const ip = uniqueIp()
    const path = `/${p.productId}/realtime/channels/chat:lobby`
    const statuses = await Promise.all(Array.from({ length: config.realtime.ipRequestsPerMinute }, (_, i) =>
      pub(i % 2 ? pair.a : pair.b, 'GET', path, { key: p.key, ip }).then((r) => r.status)))
    expect(statuses.every((s) => s === 200)).toBe(true)
    for (const worker of [pair.a, pair.b]) {
      const limited = await pub(worker, 'GET', path, { key: p.key, ip })
      expect(limited.status).toBe(429)
      expect(limited.body.error).toBe('rate_limited')
      const retryAfter = Number(limited.headers.get('retry-after'))
      expect(retryAfter).toBeGreaterThanOrEqual(1)
      expect(retryAfter).toBeLessThanOrEqual(60)
    }
    // Another address is unaffected; requests without a valid key count too (so keys cannot be guessed at speed).
    expect((await pub(pair.a, 'GET', path, { key: p.key, ip: uniqueIp() })).status).toBe(200)
    expect((await pub(pair.a, 'GET', path, { ip })).status).toBe(429)
    // Behind the trusted proxy, only the address it appended counts: a client-supplied address in front changes nothing.
    const spoofed = await pub(pair.b, 'GET', path, { key: p.key, headers: { 'x-forwarded-for': `${uniqueIp()}, ${ip}` } })
    expect(spoofed.status).toBe(429)
  })
})

describe('body limits', () => {
  test('64 KiB on every route but POST /messages; 256 KiB there', async () => {
    const padded = (bytes: number, body: Record<string, unknown>) => {
      const text = JSON.stringify({ ...body, pad: '' })
      return JSON.stringify({ ...body, pad: 'x'.repeat(bytes - text.length) })
    }
    const issue = `/${p.productId}/realtime/tokens/issue`
    const tokenBody = { subject: 'u1', channels: [{ name: 'chat:lobby', ops: ['subscribe'] }] }
    const atLimit = await pub(pair.a, 'POST', issue, { key: p.key, raw: padded(65_536, tokenBody) })
    expect(atLimit.status).toBe(400) // read in full, then refused for the unknown field "pad"
    expect(atLimit.body.fields).toEqual([{ path: '/body/pad', message: 'is not an allowed field' }])
    const over = await pub(pair.a, 'POST', issue, { key: p.key, raw: padded(65_537, tokenBody) })
    expect({ status: over.status, error: over.body.error }).toEqual({ status: 413, error: 'payload_too_large' })

    const messages = `/${p.productId}/realtime/messages`
    const data = (bytes: number) => {
      const text = JSON.stringify({ channel: 'chat:lobby', data: '' })
      return JSON.stringify({ channel: 'chat:lobby', data: 'x'.repeat(bytes - text.length) })
    }
    const big = await pub(pair.b, 'POST', messages, { key: p.key, raw: data(262_144) })
    expect(big.status).toBe(200)
    const tooBig = await pub(pair.b, 'POST', messages, { key: p.key, raw: data(262_145) })
    expect({ status: tooBig.status, error: tooBig.body.error }).toEqual({ status: 413, error: 'payload_too_large' })
  })
})

describe('process', () => {
  test('/healthz and /readyz; unknown routes are 404 in the error shape', async () => {
    expect((await pub(pair.a, 'GET', '/healthz')).body).toMatchObject({ status: 'ok' })
    expect((await pub(pair.b, 'GET', '/readyz')).body).toEqual({ status: 'ready', postgres: 'ok', redis: 'ok', invalidations: 'ok' })
    for (const path of ['/nope', `/${p.productId}/realtime/nope`, `/${p.productId}/realtime/channels/chat:a/b/c`]) {
      const result = await pub(pair.a, 'GET', path, { key: p.key })
      expect(result.status).toBe(404)
      expect(result.body).toMatchObject({ error: 'not_found', message: expect.any(String) })
      expect(result.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/)
    }
    for (const path of ['/healthz', '/readyz']) expect((await pub(pair.b, 'GET', path)).headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/)
    const wrongMethod = await pub(pair.a, 'GET', `/${p.productId}/realtime/messages`, { key: p.key })
    expect(wrongMethod.status).toBe(404)
  })

  test('workers do cache keys (a revocation written without an invalidation is seen only after the cache TTL); SIGTERM exits 0', async () => {
    // Two TTLs, so neither half depends on how fast this host is: the long one outlasts any slow step, and the short
    // one is surely over after the sleep.
    const SHORT_TTL_MS = 1000
    const [cachesLong, cachesShort] = await Promise.all([
      startProcess('public', { TRUST_PROXY: '1', CACHE_TTL_MS: '60000' }),
      startProcess('public', { TRUST_PROXY: '1', CACHE_TTL_MS: String(SHORT_TTL_MS) }),
    ])
    try {
      const { id, key } = await createKey(p)
      const path = `/${p.productId}/realtime/channels/chat:lobby`
      expect((await pub(cachesLong, 'GET', path, { key })).status).toBe(200)
      // The short-TTL worker's entry lives from when its load ended, between these two instants, for SHORT_TTL_MS.
      const loadedAt = Date.now()
      expect((await pub(cachesShort, 'GET', path, { key })).status).toBe(200)
      const storedBy = Date.now()
      // Bypass the API, so no invalidation is published: only the cache TTL can end the key.
      await sql`update public_keys set revoked_at = now() where id = ${id}`
      const askedAt = Date.now()
      const shortAnswer = (await pub(cachesShort, 'GET', path, { key })).status
      // Still cached there too, when this host took less than most of the TTL to get here (it always does but loaded).
      if (askedAt - loadedAt < SHORT_TTL_MS - 300) expect(shortAnswer).toBe(200)
      expect((await pub(cachesLong, 'GET', path, { key })).status).toBe(200)
      expect((await pub(pair.b, 'GET', path, { key })).status).toBe(401) // never cached it
      await Bun.sleep(Math.max(0, storedBy + SHORT_TTL_MS + 100 - Date.now()))
      expect((await pub(cachesShort, 'GET', path, { key })).status).toBe(401)
      expect((await pub(cachesLong, 'GET', path, { key })).status).toBe(200)
    } finally {
      expect(await Promise.all([cachesLong.stop(), cachesShort.stop()])).toEqual([0, 0])
    }
  })
})
