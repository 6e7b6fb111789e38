// The shard's generation key (shared/realtime/lua/generation.lua): made by the first publish on the node, this node's
// run_id then its replication id; trusted by a publish only while the run_id is the node's own. The failover and
// restart cases with real servers are in test/faults (redis-failover, redis-restart); here, on the suite's Redis (one
// or a cluster), what a key of another node and a key of this node under an older replication id do.
import { afterAll, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { publish, readHistory, subscriptionPosition } from '../../shared/realtime/broker'
import { channelKeys } from '../../shared/realtime/keys'
import { closeRedis, redis } from '../../shared/redis/client'

afterAll(async () => {
  await closeRedis()
})

const policy = { historyTtlSeconds: 60, historySize: 10 }
const HEX40 = /^[0-9a-f]{40}$/

/** A channel with two publications: its keys, its epoch, the generation key's value and the meta's generation. */
async function published(): Promise<{ productId: string; channel: string; keys: ReturnType<typeof channelKeys>; epoch: string; value: string; g: string }> {
  const productId = randomUUID()
  const channel = 'chat:generation'
  const first = await publish({ productId, channel, policy, data: '1' })
  expect((await publish({ productId, channel, policy, data: '2' })).epoch).toBe(first.epoch!)
  const keys = channelKeys(productId, channel)
  const value = (await redis().get(keys.gen))!
  const g = (await redis().hget(keys.meta, 'g'))!
  return { productId, channel, keys, epoch: first.epoch!, value, g }
}

test('a publish finds or makes its shard\'s generation key: the node\'s run_id, then the replication id its epoch is stamped with', async () => {
  const { value, g } = await published()
  expect(value.length).toBe(80)
  expect(value.slice(0, 40)).toMatch(HEX40)
  expect(value.slice(40)).toBe(g)
  expect(g).toMatch(HEX40)
})

test('a generation key of another node (a replica\'s copy, a moved slot, a restarted process) is replaced: the channel starts a new epoch, and history and positions follow it', async () => {
  const { productId, channel, keys, epoch, value } = await published()
  // Another node's key, and the channel's epoch numbered under that node's replication id.
  await redis().set(keys.gen, `${'f'.repeat(40)}${'e'.repeat(40)}`)
  await redis().hset(keys.meta, 'g', 'e'.repeat(40))
  const next = await publish({ productId, channel, policy, data: '3' })
  expect(next.epoch).not.toBe(epoch)
  expect(next.offset).toBe(1)
  expect(await redis().get(keys.gen)).toBe(value) // this node's again
  const history = await readHistory(productId, channel, policy, { last_n: 10 })
  expect({ epoch: history.epoch, data: history.entries.map((e) => e.data) }).toEqual({ epoch: next.epoch!, data: [3] })
  expect(await subscriptionPosition(productId, channel, policy)).toEqual({ epoch: next.epoch!, offset: 1 })
})

test('this node\'s key under an older replication id (a master back after a partial resync) keeps the epochs stamped with it, for publish, history and positions alike', async () => {
  const { productId, channel, keys, epoch, value } = await published()
  const other = randomUUID()
  await publish({ productId: other, channel, policy, data: '1' })
  const otherKeys = channelKeys(other, channel)
  // The keys are the shard's: every channel of the suite on these shards reads them, so they are put back whatever
  // happens (left with another replication id, they would make later channels there continue under it).
  try {
    const older = 'b'.repeat(40)
    await redis().set(keys.gen, `${value.slice(0, 40)}${older}`)
    await redis().hset(keys.meta, 'g', older)
    const next = await publish({ productId, channel, policy, data: '3' })
    expect(next).toEqual({ id: expect.any(String), epoch, offset: 3 })
    const history = await readHistory(productId, channel, policy, { last_n: 10 })
    expect({ epoch: history.epoch, data: history.entries.map((e) => e.data) }).toEqual({ epoch, data: [1, 2, 3] })
    expect(await subscriptionPosition(productId, channel, policy)).toEqual({ epoch, offset: 3 })
    // A channel stamped with the node's current replication id is of another generation under such a key: a new epoch.
    await redis().set(otherKeys.gen, `${value.slice(0, 40)}${'c'.repeat(40)}`)
    expect((await publish({ productId: other, channel, policy, data: '2' })).offset).toBe(1)
  } finally {
    await redis().set(keys.gen, value)
    await redis().set(otherKeys.gen, value)
  }
})
