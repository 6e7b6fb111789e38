// Realtime usage as analytics entities: counted by a real public worker and two real gateways while messages flow, flushed
// in batches, and charted with analytics_metric_query.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { sql } from '../../shared/db/client'
import { signToken } from '../../shared/realtime/tokens'
import { UsageRecorder } from '../../shared/realtime/usage'
import { call, startProcess } from '../helpers'
import { type GatewayProcess, replied, startGateway, WsClient } from '../gateway/ws-helpers'
import { pub, realtimeProduct, type RealtimeProduct, startPublicPair, type Pair } from '../realtime/public-helpers'

const FAST_FLUSH = { REALTIME_USAGE_FLUSH_MS: '150' }
let gateways: GatewayProcess[]
let pair: Pair
let product: RealtimeProduct
beforeAll(async () => {
  ;[gateways, pair, product] = await Promise.all([
    Promise.all([startGateway(FAST_FLUSH), startGateway(FAST_FLUSH)]),
    startPublicPair(FAST_FLUSH),
    realtimeProduct([{ name: 'live', clientEvents: true }]),
  ])
}, 30_000)
afterAll(async () => {
  await Promise.all([...(gateways ?? []).map((g) => g.stop()), pair?.stop()])
})

const query = async (body: Record<string, unknown>) => {
  const result = await call('POST', '/analytics/query', { token: product.token, productId: product.productId, body })
  if (result.status !== 200) throw new Error(`query: ${result.status} ${JSON.stringify(result.body)}`)
  return result.body.rows
}
async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, ms = 8000): Promise<T> {
  let value = await read()
  for (const deadline = Date.now() + ms; !done(value) && Date.now() < deadline; await Bun.sleep(100)) value = await read()
  return value
}

test('publishes, deliveries and bytes per namespace, and connections, counted across two gateways and a public worker', async () => {
  const channel = `live:room-${crypto.randomUUID().slice(0, 8)}`
  const clients = await Promise.all(gateways.map(async (gateway, i) => {
    const client = await WsClient.open(gateway.wsUrl)
    const { token } = await signToken({ productId: product.productId, apiKeyId: product.keyId, subject: `s${i}`, channels: [{ name: channel, ops: ['subscribe', 'publish'] }] })
    replied(await client.request({ type: 'connect', token }), 'connect')
    replied(await client.request({ type: 'subscribe', channel }), 'subscribe')
    return client
  }))
  const bodies = ['{"n":1}', '{"n":22}', '{"n":333}']
  for (const data of bodies) {
    expect((await pub(pair.a, 'POST', `/${product.productId}/realtime/messages`, { key: product.key, body: { channel, data: JSON.parse(data) } })).status).toBe(200)
  }
  expect(await clients[0]!.request({ type: 'publish', channel, data: { hi: true } })).toMatchObject({ type: 'reply' }) // a client event
  await clients[1]!.next((f) => f.type === 'publication' && (f as { data?: { hi?: boolean } }).data?.hi === true)
  const expected = { namespace: 'live', publishes: 4, deliveries: 3 * 2 + 1, bytes: bodies.join('').length + '{"hi":true}'.length }
  const range = { from: '-1h', to: new Date(Date.now() + 120_000).toISOString() }
  const rows = await until(() => query({ entity: 'realtime_usage', metrics: ['publishes', 'deliveries', 'bytes', 'deliveries_per_publish'], dimensions: ['namespace'], range }),
    (r) => r[0]?.deliveries === expected.deliveries && r[0]?.publishes === expected.publishes)
  expect(rows).toEqual([{ ...expected, deliveries_per_publish: expected.deliveries / expected.publishes }])

  const connections = () => query({ entity: 'realtime_connections', metrics: ['opened', 'closed'], range })
  expect(await until(connections, (r) => r[0]?.opened === 2)).toEqual([{ opened: 2, closed: 0 }])
  for (const client of clients) client.close()
  expect(await until(connections, (r) => r[0]?.closed === 2)).toEqual([{ opened: 2, closed: 2 }])
  const byGateway = await query({ entity: 'realtime_connections', metrics: ['opened'], dimensions: ['gateway'], range })
  expect(byGateway.map((r: { opened: number }) => r.opened)).toEqual([1, 1])
}, 30_000)

test('flushes are one upsert per table: counts from two processes for the same minute add up; a deleted product\'s counts are dropped without blocking the rest', async () => {
  const own = await realtimeProduct([{ name: 'n' }])
  const at = Date.UTC(2026, 0, 1, 12, 0, 30)
  const [a, b] = [new UsageRecorder('a'), new UsageRecorder('b')]
  a.count(own.productId, 'n:x', { publishes: 2, bytes: 10 }, at)
  b.count(own.productId, 'n:y', { publishes: 1, deliveries: 5, bytes: 4 }, at + 10_000)
  await Promise.all([a.flush(), b.flush()])
  const read = async () => (await sql`select publishes, deliveries, bytes from realtime_usage where product_id = ${own.productId}`).map((r) => ({ ...r }))
  expect(await read()).toEqual([{ publishes: '3', deliveries: '5', bytes: '14' }])
  const mixed = new UsageRecorder('c')
  mixed.count(crypto.randomUUID(), 'n:x', { publishes: 1 }, at) // a product that no longer exists
  mixed.count(own.productId, 'n:x', { publishes: 1 }, at)
  await mixed.flush()
  expect(await read()).toEqual([{ publishes: '4', deliveries: '5', bytes: '14' }])
})

test('a publish through the platform API (realtime_messages_publish) is counted by the api process: flushed while it runs, and on stop', async () => {
  const own = await realtimeProduct([{ name: 'api' }])
  const [flushing, stopping] = await Promise.all([startProcess('api', FAST_FLUSH), startProcess('api', { REALTIME_USAGE_FLUSH_MS: '600000' })])
  const publish = async (worker: { url: string }, data: unknown) => (await fetch(`${worker.url}/realtime/messages`, {
    method: 'POST', body: JSON.stringify({ channel: 'api:x', data }),
    headers: { authorization: `Bearer ${own.token}`, 'x-product-id': own.productId, 'content-type': 'application/json' },
  })).status
  // What the analytics entity answers for the product (as the dashboards chart it).
  const charted = async () => {
    const result = await call('POST', '/analytics/query', { token: own.token, productId: own.productId, body: {
      entity: 'realtime_usage', metrics: ['publishes', 'bytes'], dimensions: ['namespace'],
      range: { from: '-1h', to: new Date(Date.now() + 120_000).toISOString() },
    } })
    if (result.status !== 200) throw new Error(`query: ${result.status} ${JSON.stringify(result.body)}`)
    return result.body.rows as { namespace: string; publishes: number; bytes: number }[]
  }
  try {
    expect(await publish(flushing, { n: 1 })).toBe(200)
    expect(await publish(stopping, { n: 22 })).toBe(200) // its next flush is 10 minutes away: only stopping writes it
    expect(await until(charted, (rows) => rows[0]?.publishes === 1)).toEqual([{ namespace: 'api', publishes: 1, bytes: '{"n":1}'.length }])
  } finally {
    await Promise.all([flushing.stop(), stopping.stop()])
  }
  expect(await charted()).toEqual([{ namespace: 'api', publishes: 2, bytes: '{"n":1}'.length + '{"n":22}'.length }])
}, 30_000)
