// POST /messages counts its IP limit, its quota and publishes in one script (one Redis round trip): the order and the
// counting stay those of three steps. The IP limit first (a request it refuses counts nothing else and publishes
// nothing), then the quota (a publish it refuses stores nothing), then the publish; every request counted once.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { config } from '../../shared/config'
import { windowOf } from '../../shared/fixed-window'
import { channelTop, readHistory } from '../../shared/realtime/broker'
import { publishInOneStep } from '../../shared/realtime/publish-request'
import { redis } from '../../shared/redis/client'
import { DEFAULT_LIMITS, quotaKey } from '../../shared/realtime/publish-quota'
import { needsOneRedis } from '../helpers'
import { awayFromWindowEdge, pub, realtimeProduct, startPublicPair, uniqueIp, type Pair, type RealtimeProduct } from './public-helpers'

let pair: Pair
let p: RealtimeProduct

beforeAll(async () => {
  ;[pair, p] = await Promise.all([startPublicPair(), realtimeProduct([{ name: 'chat', history: { ttlSeconds: 300, size: 100 } }])])
})
afterAll(async () => {
  await pair.stop()
})

const IP_LIMIT = config.realtime.ipRequestsPerMinute
const QUOTA_LIMIT = DEFAULT_LIMITS.burst + 2 * DEFAULT_LIMITS.sustainedPerSecond * DEFAULT_LIMITS.windowSeconds
const ipKey = (ip: string) => `pub:rl:ip:${ip}:${Math.floor(Date.now() / 60_000)}`
const quotaNow = (productId: string) => quotaKey(productId, Math.floor(Date.now() / (DEFAULT_LIMITS.windowSeconds * 1000)))
const counter = async (key: string) => Number((await redis().get(key)) ?? 0)
const publish = (product: RealtimeProduct, body: unknown, ip: string, options: { key?: string; worker?: typeof pair.a; headers?: Record<string, string> } = {}) =>
  pub(options.worker ?? pair.a, 'POST', `/${product.productId}/realtime/messages`, { key: options.key ?? product.key, body, ip, headers: options.headers })

/** Both windows far enough from their edges that a test's counters stay in one window. */
const awayFromEdges = async () => {
  await awayFromWindowEdge(60, 3000)
  await awayFromWindowEdge(DEFAULT_LIMITS.windowSeconds, 3000)
}

describe('POST /messages: IP limit, quota and publish in one round trip', () => {
  test('a publish counts its request once and its quota once, on either worker, and the offset advances by one each', async () => {
    const q = await realtimeProduct([{ name: 'chat', history: { ttlSeconds: 300, size: 100 } }])
    await awayFromEdges()
    const ip = uniqueIp()
    const channel = `chat:${randomUUID()}`
    // The first request of a key not yet cached looks it up in PostgreSQL, so its IP limit is counted before the lookup.
    for (const [n, worker] of [[1, pair.a], [2, pair.b], [3, pair.a]] as const) {
      const result = await publish(q, { channel, data: n }, ip, { worker })
      expect(result.status).toBe(200)
      expect(result.body.offset).toBe(n)
      expect(await counter(ipKey(ip))).toBe(n)
      expect(await counter(quotaNow(q.productId))).toBe(n)
    }
  })

  test('refused by the IP limit: 429 rate_limited with Retry-After; the quota is not counted and nothing is published', async () => {
    const q = await realtimeProduct([{ name: 'chat', history: { ttlSeconds: 300, size: 100 } }])
    await awayFromEdges()
    const ip = uniqueIp()
    const channel = `chat:${randomUUID()}`
    expect((await publish(q, { channel, data: 1 }, ip)).status).toBe(200) // the key is cached on worker A from here
    await redis().set(ipKey(ip), IP_LIMIT, 'EX', 65)
    for (const worker of [pair.a, pair.b]) {
      const refused = await publish(q, { channel, data: 2 }, ip, { worker })
      expect(refused.status).toBe(429)
      expect(refused.body).toMatchObject({ error: 'rate_limited', limit: IP_LIMIT })
      const retryAfter = Number(refused.headers.get('retry-after'))
      expect(retryAfter).toBeGreaterThanOrEqual(1)
      expect(retryAfter).toBeLessThanOrEqual(60)
    }
    expect(await counter(ipKey(ip))).toBe(IP_LIMIT + 2)
    expect(await counter(quotaNow(q.productId))).toBe(1)
    expect(await channelTop(q.productId, channel)).toEqual({ offset: 1, epoch: expect.any(String) })
  })

  test('refused by the quota: 429 quota_exceeded with Retry-After; the request is counted, nothing is stored, the offset stays', async () => {
    const q = await realtimeProduct([{ name: 'chat', history: { ttlSeconds: 300, size: 100 } }])
    await awayFromEdges()
    const ip = uniqueIp()
    const channel = `chat:${randomUUID()}`
    const first = await publish(q, { channel, data: 1 }, ip)
    expect(first.body.offset).toBe(1)
    await redis().set(quotaNow(q.productId), QUOTA_LIMIT, 'EX', 30)
    for (const worker of [pair.a, pair.b]) {
      const refused = await publish(q, { channel, data: 2 }, ip, { worker })
      expect(refused.status).toBe(429)
      expect(refused.body).toMatchObject({ error: 'quota_exceeded', limit: QUOTA_LIMIT, windowSeconds: DEFAULT_LIMITS.windowSeconds })
      const retryAfter = Number(refused.headers.get('retry-after'))
      expect(retryAfter).toBeGreaterThanOrEqual(1)
      expect(retryAfter).toBeLessThanOrEqual(DEFAULT_LIMITS.windowSeconds)
    }
    expect(await counter(ipKey(ip))).toBe(3)
    expect(await counter(quotaNow(q.productId))).toBe(QUOTA_LIMIT + 2)
    expect(await channelTop(q.productId, channel)).toEqual({ offset: 1, epoch: first.body.epoch })
    const history = await pub(pair.b, 'GET', `/${q.productId}/realtime/channels/${channel}/history?last_n=10`, { key: q.key })
    expect(history.body.entries.map((entry: { data: unknown }) => entry.data)).toEqual([1])
  })

  test('a request that fails before the publish is still counted once by the IP limit, and answers 429 past it', async () => {
    await awayFromEdges()
    const ip = uniqueIp()
    const channel = `chat:${randomUUID()}`
    expect((await publish(p, { channel: 'nope:1', data: 1 }, ip)).status).toBe(404) // unregistered namespace
    expect((await publish(p, { channel, data: 1 }, ip, { key: 'rtk_' + 'x'.repeat(40) })).status).toBe(401)
    expect((await publish(p, { channel: 'chat:' }, ip)).status).toBe(400)
    expect(await counter(ipKey(ip))).toBe(3)
    await redis().set(ipKey(ip), IP_LIMIT, 'EX', 65)
    // Past the limit, the IP limit answers first, whatever else is wrong with the request; the quota is never counted.
    const quotaBefore = await counter(quotaNow(p.productId))
    for (const options of [{ key: 'rtk_' + 'x'.repeat(40) }, { key: '' }, {}]) {
      const limited = await publish(p, { channel: 'nope:1', data: 1 }, ip, options)
      expect({ status: limited.status, error: limited.body.error }).toEqual({ status: 429, error: 'rate_limited' })
    }
    expect(await counter(ipKey(ip))).toBe(IP_LIMIT + 3)
    expect(await counter(quotaNow(p.productId))).toBe(quotaBefore)
  })

  test('a request from a refused origin is not counted by the IP limit, as before', async () => {
    await awayFromEdges()
    const ip = uniqueIp()
    const refused = await publish(p, { channel: 'chat:1', data: 1 }, ip, { headers: { origin: 'https://evil.example' } })
    expect(refused.status).toBe(403)
    expect(await counter(ipKey(ip))).toBe(0)
  })
})

// The one script spans the counters' keys and the channel's: one Redis only (on a cluster the route takes three steps).
describe.skipIf(needsOneRedis)('publishInOneStep', () => {
  const input = (productId: string, channel: string) => ({ productId, channel, policy: { historyTtlSeconds: 60, historySize: 10 }, data: '1', id: randomUUID() })
  const published = (offset: number) => ({ channels: [{ published: { id: expect.any(String), offset, epoch: expect.any(String) }, replayed: false }] })

  test('the IP limit past its count refuses first: the quota is not counted and nothing is published', async () => {
    const [ip, quota] = [windowOf(`test:limits:${randomUUID()}`, 60), windowOf(`test:limits:${randomUUID()}`, 60)]
    const productId = randomUUID()
    const limits = { ip: { window: ip, limit: 1 }, quota: { window: quota, limit: 5 } }
    expect(await publishInOneStep([input(productId, 'chat:a')], limits)).toEqual(published(1))
    expect(await publishInOneStep([input(productId, 'chat:a')], limits)).toEqual({ ipRefused: 2 })
    expect([await counter(ip.key), await counter(quota.key)]).toEqual([2, 1])
    expect(await channelTop(productId, 'chat:a')).toMatchObject({ offset: 1 })
    // The quota refuses after the IP limit counted; the keys expire shortly after their window, as hitWindow's.
    const third = windowOf(`test:limits:${randomUUID()}`, 60)
    expect(await publishInOneStep([input(productId, 'chat:a')], { ip: { window: third, limit: 5 }, quota: { window: quota, limit: 1 } }))
      .toEqual({ channels: [{ overQuota: 2 }] })
    expect([await counter(third.key), await counter(quota.key)]).toEqual([1, 2])
    expect(await channelTop(productId, 'chat:a')).toMatchObject({ offset: 1 })
    const ttl = await redis().ttl(third.key)
    expect(ttl).toBeGreaterThan(60)
    expect(ttl).toBeLessThanOrEqual(65)
    await redis().del(ip.key, quota.key, third.key)
  })

  test('without an IP limit it counts the quota and publishes', async () => {
    const quota = windowOf(`test:limits:${randomUUID()}`, 60)
    expect(await publishInOneStep([input(randomUUID(), 'chat:b')], { quota: { window: quota, limit: 5 } })).toEqual(published(1))
    expect(await counter(quota.key)).toBe(1)
    await redis().del(quota.key)
  })

  test('an input without an id is answered with the id its publish was given; an empty payload is published as it is', async () => {
    // The script answers a publish without its id (the worker gave it); a broadcast's shared payload is sent only with
    // a broadcast, so an empty payload of one channel must not be taken for "the shared one".
    const quota = windowOf(`test:limits:${randomUUID()}`, 60)
    const productId = randomUUID()
    const { id: _, ...anonymous } = { ...input(productId, 'chat:c'), data: '' }
    const outcome = await publishInOneStep([anonymous], { quota: { window: quota, limit: 5 } })
    expect(outcome).toEqual(published(1))
    const [entry] = (await readHistory(productId, 'chat:c', anonymous.policy, { last_n: 1 })).entries
    expect(entry).toMatchObject({ offset: 1, data: '' })
    const answered = 'channels' in outcome ? outcome.channels[0] : undefined
    expect(answered && 'published' in answered ? answered.published.id : null).toBe(entry!.id)
    await redis().del(quota.key)
  })
})
