// The failover generation (shared/realtime/lua/generation.lua) on the suite's Redis: an epoch numbered under another
// replication id is as none, for publish, history and positions alike; and the publish function asks INFO at most once
// a second. The failover, restart and failover-and-back cases with real servers are in test/faults (redis-failover,
// redis-restart, redis-failover-back).
import { afterAll, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { publish, readHistory, subscriptionPosition } from '../../shared/realtime/broker'
import { channelKeys } from '../../shared/realtime/keys'
import { closeRedis, redis } from '../../shared/redis/client'
import { needsOneRedis } from '../helpers'

afterAll(async () => {
  await closeRedis()
})

const policy = { historyTtlSeconds: 60, historySize: 10 }

test('an epoch numbered under another replication id (another master, before a failover) is as none: history serves nothing of it, a position and a publish start a new one', async () => {
  const productId = randomUUID()
  const channel = 'chat:generation'
  const first = await publish({ productId, channel, policy, data: '1' })
  expect((await publish({ productId, channel, policy, data: '2' })).epoch).toBe(first.epoch!)
  await redis().hset(channelKeys(productId, channel).meta, 'g', 'e'.repeat(40))
  expect(await readHistory(productId, channel, policy, { offset: 1, epoch: first.epoch! })).toMatchObject({ recovered: false, entries: [] })
  const position = await subscriptionPosition(productId, channel, policy)
  expect(position.epoch).not.toBe(first.epoch)
  expect(position.offset).toBe(0)
  const next = await publish({ productId, channel, policy, data: '3' })
  expect(next).toEqual({ id: expect.any(String), epoch: position.epoch, offset: 1 })
})

test.skipIf(needsOneRedis)('the publish function asks INFO replication at most once a second, not at each publish', async () => {
  const productId = randomUUID()
  const infoCalls = async () => Number(/^cmdstat_info:calls=(\d+)/m.exec(await redis().info('commandstats'))?.[1] ?? 0)
  // A second begun afresh: the publishes below fall within one trust period, or across one boundary.
  await publish({ productId, channel: 'chat:warm', policy, data: '0' })
  const before = await infoCalls()
  const started = Date.now()
  for (let i = 0; i < 50; i++) await publish({ productId, channel: `chat:generation-${i % 5}`, policy, data: String(i) })
  const elapsed = Date.now() - started
  // Our own INFO commandstats counts itself once.
  expect(await infoCalls() - before).toBeLessThanOrEqual(2 + Math.floor(elapsed / 1000))
})
