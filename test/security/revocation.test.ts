// Revocation survives Redis: PostgreSQL is the authority for revoked keys. Real processes (an api worker, a public
// worker, gateways) on a redis-server of this file's own, which it kills and starts again empty (no persistence), with
// real WebSocket clients. A revoke while Redis is down still takes effect everywhere; a Redis restarted empty does not
// bring a revoked key's tokens back.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import postgres from 'postgres'
import { config } from '../../shared/config'
import { InvalidatedCache } from '../../shared/cache/invalidated-cache'
import { RevocationCache, revokedAmong, type TokenCredential } from '../../shared/realtime/revocations'
import { OwnRedis } from '../faults/own-redis'
import { startFaultProxy } from '../faults/proxy'
import { signToken } from '../../shared/realtime/tokens'
import { freePort, newPlatformKey, startProcess, type Worker } from '../helpers'
import { startGateway, type GatewayProcess, WsClient } from '../gateway/ws-helpers'
import { createKey, manage, pub, realtimeProduct, type RealtimeProduct } from '../realtime/public-helpers'

let redisServer: OwnRedis
let api: Worker
let publicWorker: Worker
/** Sweeps its live connections against PostgreSQL only every minute: what it does sooner, Redis returning made it do. */
let slowSweep: GatewayProcess
/** Sweeps every second. */
let fastSweep: GatewayProcess
let product: RealtimeProduct

const env = () => ({ REDIS_URL: redisServer.url, REDIS_COMMAND_TIMEOUT_MS: '500' })

beforeAll(async () => {
  redisServer = new OwnRedis(await freePort())
  await redisServer.start()
  ;[api, publicWorker, slowSweep, fastSweep, product] = await Promise.all([
    startProcess('api', { ...env() }),
    startProcess('public', { ...env(), TRUST_PROXY: '1' }),
    startGateway({ ...env(), GATEWAY_REVOCATION_SWEEP_MS: '60000' }),
    startGateway({ ...env(), GATEWAY_REVOCATION_SWEEP_MS: '1000' }),
    realtimeProduct([{ name: 'chat' }]),
  ])
}, 60_000)

afterAll(async () => {
  await Promise.all([api?.stop(), publicWorker?.stop(), slowSweep?.stop(), fastSweep?.stop()])
  await redisServer?.stop()
})

/** A token signed for `keyId` (signing does not look at the key: only the gateway's revocation check does). */
const tokenOf = async (keyId: string) => (await signToken({
  productId: product.productId, apiKeyId: keyId, subject: `user-${randomUUID().slice(0, 8)}`, channels: [{ name: 'chat:x', ops: ['subscribe'] }],
})).token

/** The first frame or close a connect with `token` gets: a reply, or the close code and reason. */
async function tryConnect(gateway: GatewayProcess, token: string): Promise<{ reply: string } | { code: number; reason: string }> {
  const client = await WsClient.open(gateway.wsUrl)
  const answer = await Promise.race([client.request({ type: 'connect', token }).then((f) => ({ reply: f.type as string }), () => null), client.closed])
  const closed = await Promise.race([client.closed, Bun.sleep(200).then(() => null)])
  client.close()
  return closed ?? answer!
}

async function connected(gateway: GatewayProcess, keyId: string): Promise<WsClient> {
  const client = await WsClient.open(gateway.wsUrl)
  expect(await client.request({ type: 'connect', token: await tokenOf(keyId) })).toMatchObject({ type: 'reply', to: 'connect' })
  return client
}

/** A call to the api worker process over HTTP (its Redis is this file's). */
async function apiCall(method: string, path: string, token: string, productId?: string) {
  const response = await fetch(api.url + path, {
    method, headers: { authorization: `Bearer ${token}`, ...(productId ? { 'x-product-id': productId } : {}) },
  })
  return { status: response.status, body: await response.json().catch(() => null) }
}

const issue = (key: string) => pub(publicWorker, 'POST', `/${product.productId}/realtime/tokens/issue`, { key, body: { subject: 'u', channels: [{ name: 'chat:x', ops: ['subscribe'] }] } })
const listEmails = (key: string) => pub(publicWorker, 'GET', `/${product.productId}/mail/emails`, { key })

const REVOKED = { code: 4001, reason: 'invalid token: api key revoked' }
const within = <T>(ms: number, promise: Promise<T>) => Promise.race([promise, Bun.sleep(ms).then(() => 'not in time' as const)])

async function waitUntil(check: () => Promise<boolean>, ms: number): Promise<boolean> {
  for (const deadline = Date.now() + ms; Date.now() < deadline; await Bun.sleep(100)) if (await check()) return true
  return false
}

const readiness = async (worker: { url: string }) => {
  const answer = await fetch(`${worker.url}/readyz`).catch(() => null)
  return { status: answer?.status, body: (await answer?.json().catch(() => null)) as Record<string, string> | null }
}
const ready = async (worker: { url: string }) => (await readiness(worker)).status === 200

describe('a key revoked while Redis is down', () => {
  test('the revoke answers 200; the public worker refuses the key at once; a gateway sweeping PostgreSQL closes its connections while Redis is still down; once Redis returns every gateway has', async () => {
    const rtk = await createKey(product)
    const lmk = (await manage(product, 'POST', '/mail/api-keys', { name: 'sender', scope: 'full_access' })) as { id: string; key: string }
    const plk = await newPlatformKey(product, ['mail'])
    expect((await issue(rtk.key)).status).toBe(200)
    expect((await listEmails(lmk.key)).status).toBe(200)
    expect((await apiCall('GET', '/mail/api-keys', plk.key)).status).toBe(200)
    const onSlow = await connected(slowSweep, rtk.id)
    const onFast = await connected(fastSweep, rtk.id)

    await redisServer.stop()
    // What is asserted is a worker that knows its invalidations are lost: until the close reaches it (milliseconds, or
    // a loaded host's scheduling later) its cache is still trusted, as documented.
    expect(await waitUntil(async () => (await readiness(publicWorker)).body?.invalidations === 'down', 5000)).toBe(true)
    const revoked = await apiCall('DELETE', `/governance/api/v1/products/${product.productId}/public-keys/${rtk.id}`, product.token)
    expect(revoked).toEqual({ status: 200, body: { id: rtk.id, revoked: true } })
    expect(await apiCall('DELETE', `/mail/api-keys/${lmk.id}`, product.token, product.productId)).toEqual({ status: 200, body: { id: lmk.id, revoked: true } })
    expect(await apiCall('DELETE', `/products/${product.productId}/platform-keys/${plk.id}`, product.token)).toEqual({ status: 200, body: { id: plk.id, revoked: true } })

    // Redis still down. The public worker and the api read keys from PostgreSQL: refused at once; an active key still works.
    expect((await issue(rtk.key)).status).toBe(401)
    expect((await listEmails(lmk.key)).status).toBe(401)
    expect((await apiCall('GET', '/mail/api-keys', plk.key)).status).toBe(401)
    expect((await issue(product.key)).status).toBe(200)
    // The gateway that sweeps every second closes the live connection and refuses a new one, Redis or not.
    expect(await within(5000, onFast.closed)).toEqual(REVOKED)
    expect(await tryConnect(fastSweep, await tokenOf(rtk.id))).toEqual(REVOKED)
    expect(await tryConnect(fastSweep, await tokenOf(product.keyId))).toEqual({ reply: 'reply' })

    await Bun.sleep(1000)
    expect(await within(0, onSlow.closed)).toBe('not in time') // its sweep is a minute away, and nothing was announced
    await redisServer.start()
    // Back: within seconds the slow gateway, resubscribed, has swept its connections against PostgreSQL.
    expect(await within(8000, onSlow.closed)).toEqual(REVOKED)
    expect(await tryConnect(slowSweep, await tokenOf(rtk.id))).toEqual(REVOKED)
    expect(await tryConnect(slowSweep, await tokenOf(product.keyId))).toEqual({ reply: 'reply' })
    expect(await waitUntil(() => ready(publicWorker), 8000)).toBe(true)
    expect((await issue(rtk.key)).status).toBe(401)
    expect((await listEmails(lmk.key)).status).toBe(401)
  }, 60_000)
})

describe('a Redis restarted empty', () => {
  test('revoked keys stay revoked: the gateways (one started after the restart too) refuse their tokens 4001, the public worker refuses the keys', async () => {
    const rtk = await createKey(product)
    const lmk = (await manage(product, 'POST', '/mail/api-keys', { name: 'sender', scope: 'full_access' })) as { id: string; key: string }
    expect((await issue(rtk.key)).status).toBe(200)
    expect((await listEmails(lmk.key)).status).toBe(200)
    const live = await connected(slowSweep, rtk.id)
    const token = await tokenOf(rtk.id) // issued before the revocation, valid for an hour
    // The api announces only on a connection made again since the last test's restart (ioredis retries after a backoff
    // of up to half a second); a revoke before that is left to the gateways' sweeps and the caches' TTL, as
    // docs/realtime-management.md says of a revoke while Redis is down.
    expect(await waitUntil(() => ready(api), 5000)).toBe(true)

    // Revoked with Redis up: announced, so the live connection closes at once.
    expect((await apiCall('DELETE', `/governance/api/v1/products/${product.productId}/public-keys/${rtk.id}`, product.token)).status).toBe(200)
    expect((await apiCall('DELETE', `/mail/api-keys/${lmk.id}`, product.token, product.productId)).status).toBe(200)
    expect(await within(3000, live.closed)).toEqual(REVOKED)

    await redisServer.stop()
    await redisServer.start()
    expect(await redisServer.size()).toBe(0)
    expect(await waitUntil(async () => (await ready(publicWorker)) && (await ready(slowSweep)), 10_000)).toBe(true)
    expect(await tryConnect(slowSweep, token)).toEqual(REVOKED)
    expect(await tryConnect(fastSweep, token)).toEqual(REVOKED)
    const fresh = await startGateway(env())
    try {
      expect(await tryConnect(fresh, token)).toEqual(REVOKED)
      expect(await tryConnect(fresh, await tokenOf(product.keyId))).toEqual({ reply: 'reply' })
    } finally {
      await fresh.stop()
    }
    expect((await issue(rtk.key)).status).toBe(401)
    expect((await listEmails(lmk.key)).status).toBe(401)
    expect((await issue(product.key)).status).toBe(200)
  }, 60_000)
})

describe('the gateway revocation cache', () => {
  // The cache answers from PostgreSQL (the real public_keys table), so these run in-process against the test database.
  // A token is checked on its credential and its product: these are the product's keys.
  const of = (akid: string): TokenCredential => ({ akid, pid: product.productId })
  test('a known key id costs no query; concurrent checks share one; an active answer is asked again after its TTL; a revocation heard is kept', async () => {
    const queries: TokenCredential[][] = []
    const cache = new RevocationCache(100, 200, (ids) => (queries.push(ids), revokedAmong(ids)))
    const active = await createKey(product)
    const gone = await createKey(product)
    expect((await manage(product, 'DELETE', `/governance/api/v1/products/${product.productId}/public-keys/${gone.id}`)).revoked).toBe(true)
    expect(await Promise.all([cache.isRevoked(of(active.id)), cache.isRevoked(of(active.id))])).toEqual([false, false])
    expect(queries).toEqual([[of(active.id)]])
    expect(await cache.isRevoked(of(active.id))).toBe(false)
    expect(queries.length).toBe(1)
    expect(await cache.isRevoked(of(gone.id))).toBe(true)
    expect(await cache.isRevoked(of(randomUUID()))).toBe(true) // no such key: nothing it signed may connect
    expect(await cache.isRevoked(of('not-a-uuid'))).toBe(true)
    await Bun.sleep(250)
    const asked = queries.length
    expect(await cache.isRevoked(of(active.id))).toBe(false)
    expect(queries.length).toBe(asked + 1)
    expect(await cache.isRevoked(of(gone.id))).toBe(true) // a revoked answer outlives the TTL
    expect(queries.length).toBe(asked + 1)
    // A revocation heard is kept when the active answers are dropped (after a gap in invalidations).
    cache.markRevoked(active.id)
    cache.forgetActive()
    expect(await cache.isRevoked(of(active.id))).toBe(true)
    expect(queries.length).toBe(asked + 1)
  })

  test('a revocation heard while a check of the same key is in flight wins over that check\'s "active" answer', async () => {
    const active = await createKey(product)
    const cache = new RevocationCache(100, 60_000, async (ids) => {
      const answer = await revokedAmong(ids) // PostgreSQL still says active...
      await Bun.sleep(100) // ...and the invalidation arrives before the check returns
      return answer
    })
    const checking = cache.isRevoked(of(active.id))
    await Bun.sleep(20)
    cache.markRevoked(active.id)
    expect(await checking).toBe(true)
    expect(await cache.isRevoked(of(active.id))).toBe(true)
  })

  test('bounded by count: past the bound the oldest answer goes, and is asked again when needed', async () => {
    const queries: TokenCredential[][] = []
    const cache = new RevocationCache(3, 60_000, (ids) => (queries.push(ids), revokedAmong(ids)))
    const first = await createKey(product)
    expect(await cache.isRevoked(of(first.id))).toBe(false)
    for (let i = 0; i < 10; i++) expect(await cache.isRevoked(of(randomUUID()))).toBe(true)
    expect(cache.size).toBe(3)
    expect(queries.length).toBe(11)
    expect(await cache.isRevoked(of(first.id))).toBe(false)
    expect(queries.length).toBe(12)
  })

  test('PostgreSQL unreachable: a recently expired "not revoked" answer still answers, a revocation heard still holds; an unseen key id, or one whose answer was dropped after an invalidation gap, cannot be told (throws)', async () => {
    const db = new URL(config.databaseUrl)
    const link = await startFaultProxy({ host: db.hostname, port: Number(db.port || 5432) })
    const proxied = postgres(link.url(config.databaseUrl), { max: 1, connect_timeout: 1, onnotice: () => {} })
    try {
      const cache = new RevocationCache(100, 150, (ids) => revokedAmong(ids, proxied))
      const active = await createKey(product)
      const heard = randomUUID()
      expect(await cache.isRevoked(of(active.id))).toBe(false)
      await Bun.sleep(200)
      link.cut()
      expect(await cache.isRevoked(of(active.id))).toBe(false)
      cache.markRevoked(heard)
      expect(await cache.isRevoked(of(heard))).toBe(true)
      await expect(cache.isRevoked(of(randomUUID()))).rejects.toThrow()
      cache.forgetActive()
      await expect(cache.isRevoked(of(active.id))).rejects.toThrow()
      await link.restore()
      expect(await cache.isRevoked(of(active.id))).toBe(false)
    } finally {
      await proxied.end({ timeout: 1 })
      await link.close()
    }
  })
})

describe('per-worker caches are bounded by count', () => {
  test('past the bound the oldest entry goes and is loaded again when needed; the newest stay', async () => {
    const cache = new InvalidatedCache<string>(3)
    cache.setCaching(true)
    const loads: string[] = []
    const get = (key: string) => cache.get(key, async () => (loads.push(key), `value of ${key}`))
    for (const key of ['a', 'b', 'c', 'd', 'e']) expect(await get(key)).toBe(`value of ${key}`)
    expect(cache.size).toBe(3)
    for (const key of ['c', 'd', 'e']) await get(key)
    expect(loads).toEqual(['a', 'b', 'c', 'd', 'e'])
    await get('a')
    expect(loads).toEqual(['a', 'b', 'c', 'd', 'e', 'a'])
    expect(cache.size).toBe(3)
  })
})
