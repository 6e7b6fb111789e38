// The spec's 503 row: when the data plane cannot serve (fan-out, history, presence), the public routes answer
// 503 unavailable in the error shape — never a 500. The failure is real: this product's Redis keys hold the wrong type.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { redis } from '../../shared/redis/client'
import { channelKeys } from '../../shared/realtime/keys'
import { pub, realtimeProduct, startPublicPair, type Pair, type RealtimeProduct, uniqueIp } from './public-helpers'

let pair: Pair
let product: RealtimeProduct

beforeAll(async () => {
  ;[pair, product] = await Promise.all([startPublicPair(), realtimeProduct()])
})
afterAll(() => pair.stop())

test('publish and history read are 503 unavailable while the channel history cannot be written or read', async () => {
  const channel = 'chat:broken-history'
  const keys = channelKeys(product.productId, channel)
  await redis().set(keys.hist, 'not a stream')
  await redis().hset(keys.meta, 'e', 'epoch-x', 'o', '1') // an existing epoch, so the publish script writes the stream
  const ip = uniqueIp()
  const published = await pub(pair.a, 'POST', `/${product.productId}/realtime/messages`, { key: product.key, ip, body: { channel, data: { n: 1 } } })
  expect(published.status).toBe(503)
  expect(published.body.error).toBe('unavailable')
  const history = await pub(pair.b, 'GET', `/${product.productId}/realtime/channels/${channel}/history?last_n=5`, { key: product.key, ip })
  expect(history.status).toBe(503)
  expect(history.body.error).toBe('unavailable')

  await redis().del(keys.hist, keys.meta) // the same channel works again once Redis can serve it
  const again = await pub(pair.a, 'POST', `/${product.productId}/realtime/messages`, { key: product.key, ip, body: { channel, data: { n: 2 } } })
  expect(again.status).toBe(200)
  expect(again.body.offset).toBe(1)
})

test('presence read is 503 unavailable while the roster cannot be read', async () => {
  const channel = 'chat:broken-roster'
  const keys = channelKeys(product.productId, channel)
  await redis().set(keys.presExp, 'not a sorted set')
  const roster = await pub(pair.a, 'GET', `/${product.productId}/realtime/channels/${channel}/presence`, { key: product.key, ip: uniqueIp() })
  expect(roster.status).toBe(503)
  expect(roster.body.error).toBe('unavailable')
  await redis().del(keys.presExp)
  expect((await pub(pair.a, 'GET', `/${product.productId}/realtime/channels/${channel}/presence`, { key: product.key, ip: uniqueIp() })).status).toBe(200)
})
