// The invalidation subscription survives a dropped Redis connection: workers notice, stop caching, resubscribe, and
// revocation is immediate again afterwards. The drop is real: Redis kills every pub/sub client connection.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { INVALIDATION_CHANNEL, onInvalidation, publishInvalidation, REMEMBERED_ANNOUNCEMENTS } from '../../shared/cache/invalidation'
import { Cluster, type Redis } from 'ioredis'
import { config } from '../../shared/config'
import { redis } from '../../shared/redis/client'
import { startFaultProxy } from '../faults/proxy'
import { call, needsOneRedis, onEveryRedisNode, startProcess, watchFences } from '../helpers'
import { createKey, pub, realtimeProduct, startPublicPair, type Pair, type RealtimeProduct } from './public-helpers'

let pair: Pair
let p: RealtimeProduct

beforeAll(async () => {
  ;[pair, p] = await Promise.all([startPublicPair(), realtimeProduct()])
})
afterAll(() => pair.stop())

const until = async (check: () => Promise<boolean> | boolean, ms = 10_000) => {
  for (const deadline = Date.now() + ms; Date.now() < deadline; await Bun.sleep(25)) if (await check()) return true
  return false
}

test('a subscription reports the dropped connection and the resubscription, and hears messages again', async () => {
  const events: boolean[] = []
  const heard: string[] = []
  const stop = await onInvalidation((m) => heard.push('productId' in m ? m.productId : 'keyHash' in m ? m.keyHash : m.kind), (live) => events.push(live))
  try {
    await onEveryRedisNode('CLIENT', 'KILL', 'TYPE', 'pubsub')
    // The first connection reports live too (in either order with the kill): look for a drop followed by a return.
    expect(await until(() => events.includes(false) && events.slice(events.indexOf(false)).includes(true))).toBe(true)
    await publishInvalidation({ kind: 'namespaces', productId: 'after-reconnect' })
    expect(await until(() => heard.includes('after-reconnect'))).toBe(true)
  } finally {
    await stop()
  }
})

/** Every node a message may be published on: each master and replica of a cluster, or the one Redis. */
function publishers(): { publish(channel: string, text: string): Promise<unknown> }[] {
  const client = redis()
  return client instanceof Cluster ? client.nodes('all') : [client]
}

/** Publishes a marker on every node and waits until each is heard: whatever those nodes relayed before has arrived. */
async function drained(heard: string[]): Promise<void> {
  const markers = publishers().map(() => `marker-${crypto.randomUUID()}`)
  await Promise.all(publishers().map((node, i) => node.publish(INVALIDATION_CHANNEL, JSON.stringify({ kind: 'namespaces', productId: markers[i] }))))
  expect(await until(() => markers.every((marker) => heard.includes(marker)))).toBe(true)
}

test('an announcement is acted on once however many nodes it is heard from; a message without an id every time; an id is forgotten past the bound', async () => {
  const heard: string[] = []
  const stop = await onInvalidation((m) => heard.push('productId' in m ? m.productId : m.kind))
  try {
    // Through the platform's own publish: on a cluster it tells every node, and this subscriber hears each copy.
    await publishInvalidation({ kind: 'namespaces', productId: 'announced-once' })
    await drained(heard)
    expect(heard.filter((name) => name === 'announced-once')).toEqual(['announced-once'])

    const node = publishers()[0]!
    const copy = JSON.stringify({ kind: 'namespaces', productId: 'same-id', announcement: 'a-1' })
    await node.publish(INVALIDATION_CHANNEL, copy)
    await node.publish(INVALIDATION_CHANNEL, copy)
    const bare = JSON.stringify({ kind: 'namespaces', productId: 'no-id' })
    await node.publish(INVALIDATION_CHANNEL, bare)
    await node.publish(INVALIDATION_CHANNEL, bare)
    await drained(heard)
    expect(heard.filter((name) => name === 'same-id')).toHaveLength(1)
    expect(heard.filter((name) => name === 'no-id')).toHaveLength(2)
    // Memory is bounded: after as many other ids as it remembers, the first one is acted on again.
    for (let i = 0; i < REMEMBERED_ANNOUNCEMENTS; i++) {
      void node.publish(INVALIDATION_CHANNEL, JSON.stringify({ kind: 'signing_keys', announcement: `filler-${i}` }))
    }
    await node.publish(INVALIDATION_CHANNEL, copy)
    await drained(heard)
    expect(heard.filter((name) => name === 'same-id')).toHaveLength(2)
    expect(heard.filter((name) => name === 'signing_keys').length).toBeGreaterThanOrEqual(REMEMBERED_ANNOUNCEMENTS)
  } finally {
    await stop()
  }
})

test('every node is told, and each is sent a PING on the same connection after the PUBLISH (the fence the publish waits for)', async () => {
  // Redis writes the client it queued last first, so a PUBLISH's reply can leave before its subscribers' copies.
  const fences = await watchFences(publishers() as unknown as Redis[])
  try {
    const productId = `fenced-${crypto.randomUUID()}`
    await publishInvalidation({ kind: 'namespaces', productId })
    expect(await fences.unfenced(productId)).toEqual([])
  } finally {
    fences.stop()
  }
})

test('the listener gets the announcement as published, without its id', async () => {
  const messages: unknown[] = []
  const stop = await onInvalidation((m) => messages.push(m))
  try {
    await publishInvalidation({ kind: 'namespaces', productId: 'Shown-As-Lower' })
    const mine = () => messages.filter((m) => (m as { productId?: string }).productId === 'shown-as-lower')
    expect(await until(() => mine().length > 0)).toBe(true)
    expect(mine()).toEqual([{ kind: 'namespaces', productId: 'shown-as-lower' }])
  } finally {
    await stop()
  }
})

test('after the invalidation connection drops and returns, revocation is still immediate on every worker', async () => {
  const { id, key } = await createKey(p)
  const path = `/${p.productId}/realtime/channels/chat:lobby`
  for (const worker of [pair.a, pair.b]) expect((await pub(worker, 'GET', path, { key })).status).toBe(200) // cached
  await onEveryRedisNode('CLIENT', 'KILL', 'TYPE', 'pubsub')
  for (const worker of [pair.a, pair.b]) {
    expect(await until(async () => (await fetch(`${worker.url}/readyz`)).status === 200)).toBe(true)
    expect((await pub(worker, 'GET', path, { key })).status).toBe(200) // cached again
  }
  expect((await call('DELETE', `/governance/api/v1/products/${p.productId}/public-keys/${id}`, { token: p.token })).status).toBe(200)
  for (const worker of [pair.a, pair.b]) expect((await pub(worker, 'GET', path, { key })).status).toBe(401)
})

test.skipIf(needsOneRedis)('when the invalidation link dies without a reset, the worker notices by itself: a revocation it could not hear takes effect in seconds, not at the cache TTL', async () => {
  const url = new URL(config.redisUrl)
  const link = await startFaultProxy({ host: url.hostname, port: Number(url.port) })
  const worker = await startProcess('public', {
    TRUST_PROXY: '1', REDIS_URL: link.url(config.redisUrl),
    REDIS_COMMAND_TIMEOUT_MS: '500', CACHE_TTL_MS: '60000', // the cache alone would trust the key for a minute
  })
  try {
    const { id, key } = await createKey(p)
    const path = `/${p.productId}/realtime/channels/chat:lobby`
    expect(await until(async () => (await fetch(`${worker.url}/readyz`)).status === 200)).toBe(true)
    expect((await pub(worker, 'GET', path, { key })).status).toBe(200) // cached
    link.blackhole() // the worker's connections go silent; no close reaches it, and it never hears the revocation
    expect((await call('DELETE', `/governance/api/v1/products/${p.productId}/public-keys/${id}`, { token: p.token })).status).toBe(200)
    expect(await until(async () => (await pub(worker, 'GET', path, { key })).status === 401, 15_000)).toBe(true)
  } finally {
    await worker.stop()
    await link.close()
  }
}, 40_000)
