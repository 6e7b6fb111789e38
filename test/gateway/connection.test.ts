// One gateway connection's state machine, driven directly (real PostgreSQL and Redis, a recording transport, and a
// shard read the test releases): what reaches the client, and in which order, while a subscription is being set up.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { redisBackends } from '../../gateway/backends'
import { Connection, type GatewayContext } from '../../gateway/client'
import { Deadlines } from '../../gateway/deadlines'
import { Hub } from '../../gateway/hub'
import { presenceFrame } from '../../gateway/protocol'
import type { Transport } from '../../gateway/transport'
import { config } from '../../shared/config'
import { closeRedis } from '../../shared/redis/client'
import { realtimeProduct, type RealtimeProduct } from '../realtime/public-helpers'

let product: RealtimeProduct
beforeAll(async () => {
  product = await realtimeProduct([{ name: 'chat', presence: true, history: { ttlSeconds: 300, size: 100 } }, { name: 'live', presence: true }])
})
afterAll(async () => {
  await closeRedis()
})

/**
 * A connection whose shard reads wait for `release()`, writing to `frames`. `reading` settles once a subscription asks
 * for its shard: it is then set up as far as it goes before its shard is read.
 */
function harness(channel: string) {
  const frames: Record<string, unknown>[] = []
  const transport: Transport = {
    send: (frame) => void frames.push(JSON.parse(frame)), close() {}, subscribe() {}, unsubscribe() {}, buffered: () => 0,
  }
  let release!: () => void
  const shardRead = new Promise<void>((resolve) => (release = resolve))
  let asked!: () => void
  const reading = new Promise<void>((resolve) => (asked = resolve))
  const deadlines = new Deadlines<Connection>(() => {})
  const shards = { add: () => { asked(); return shardRead }, remove() {} }
  const context: GatewayContext = { hub: new Hub<Connection>(), connections: new Set(), deadlines, shards, backends: redisBackends() }
  const connection = new Connection(transport, context)
  connection.claims = {
    sub: 'ext:tester', ext: true, pid: product.productId, akid: product.keyId, env: config.environment,
    channels: [{ name: channel, ops: ['subscribe', 'presence'] }], exp: Math.floor(Date.now() / 1000) + 600,
  } as Connection['claims']
  return { frames, release, reading, connection, stop: () => connection.cleanup() }
}

for (const namespace of ['chat', 'live']) {
  test(`a presence event arriving while a subscription (${namespace === 'chat' ? 'with' : 'without'} history) is being set up reaches the client after its reply, not before`, async () => {
    const channel = `${namespace}:${randomUUID().slice(0, 8)}`
    const { frames, release, reading, connection, stop } = harness(channel)
    try {
      const subscribed = connection.onMessage(JSON.stringify({ type: 'subscribe', id: 1, channel }))
      await reading // not a fixed wait: on a loaded machine the lookups before it outlasted 100 ms
      connection.deliver(channel, undefined, presenceFrame({ kind: 'join', channel, identity: 'ext:ann', info: 'null' }))
      expect(frames).toEqual([])
      release()
      await subscribed
      expect(frames.map((f) => [f.type, f.to ?? f.identity])).toEqual([['reply', 'subscribe'], ['join', 'ext:ann']])
    } finally {
      stop()
    }
  })
}

test('a subscription ended (continuity lost) while it is being set up: its subscribe is answered `unavailable`, with no `unsubscribe` push besides', async () => {
  const channel = `chat:${randomUUID().slice(0, 8)}`
  const { frames, release, reading, connection, stop } = harness(channel)
  try {
    const subscribed = connection.onMessage(JSON.stringify({ type: 'subscribe', id: 1, channel }))
    await reading
    connection.endSubscription(channel, 'recover')
    release()
    await subscribed
    // one answer for one request: a push as well would have the client subscribe twice, racing its own retry
    expect(frames.map((f) => [f.type, f.id ?? null, f.code ?? f.to ?? null])).toEqual([['error', 1, 'unavailable']])
  } finally {
    stop()
  }
})
