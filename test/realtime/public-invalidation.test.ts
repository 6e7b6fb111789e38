// The invalidation subscription survives a dropped Redis connection: workers notice, stop caching, resubscribe, and
// revocation is immediate again afterwards. The drop is real: Redis kills every pub/sub client connection.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { onInvalidation, publishInvalidation } from '../../shared/realtime/invalidation'
import { redis } from '../../shared/redis'
import { call } from '../helpers'
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
  const stop = await onInvalidation((m) => heard.push('productId' in m ? m.productId : m.keyHash), (live) => events.push(live))
  try {
    await redis().call('CLIENT', 'KILL', 'TYPE', 'pubsub')
    // The first connection reports live too (in either order with the kill): look for a drop followed by a return.
    expect(await until(() => events.includes(false) && events.slice(events.indexOf(false)).includes(true))).toBe(true)
    await publishInvalidation({ kind: 'namespaces', productId: 'after-reconnect' })
    expect(await until(() => heard.includes('after-reconnect'))).toBe(true)
  } finally {
    await stop()
  }
})

test('after the invalidation connection drops and returns, revocation is still immediate on every worker', async () => {
  const { id, key } = await createKey(p)
  const path = `/${p.productId}/realtime/channels/chat:lobby`
  for (const worker of [pair.a, pair.b]) expect((await pub(worker, 'GET', path, { key })).status).toBe(200) // cached
  await redis().call('CLIENT', 'KILL', 'TYPE', 'pubsub')
  for (const worker of [pair.a, pair.b]) {
    expect(await until(async () => (await fetch(`${worker.url}/readyz`)).status === 200)).toBe(true)
    expect((await pub(worker, 'GET', path, { key })).status).toBe(200) // cached again
  }
  expect((await call('DELETE', `/governance/api/v1/products/${p.productId}/public-keys/${id}`, { token: p.token })).status).toBe(200)
  for (const worker of [pair.a, pair.b]) expect((await pub(worker, 'GET', path, { key })).status).toBe(401)
})
