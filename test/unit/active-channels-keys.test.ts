// The active channels' keys on a Redis Cluster: every key the occupancy script and the list script take for a channel
// sits in its shard's one slot (the scripts would be refused CROSSSLOT otherwise), computed as Redis does.
import { expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { channelKeys, productChannelIndex, shardTag } from '../../shared/realtime/keys'
import { keySlot } from '../../shared/redis/key-slot'

test('the occupancy script\'s keys and the product\'s channel index of a channel are all in the slot of its shard', () => {
  for (let i = 0; i < 50; i++) {
    const productId = randomUUID()
    const keys = channelKeys(productId, `chat:room-${i}:${'x'.repeat(i)}`)
    const slot = keySlot(shardTag(keys.shard))
    const taken = [keys.occ, keys.occGone, keys.hooks, keys.hooksDue, keys.hookBudget, keys.occMuted, keys.hookDropped, keys.occCount,
      keys.index.names, keys.index.expiry, keys.index.subscriptions]
    expect(taken.map(keySlot)).toEqual(taken.map(() => slot))
    expect(Object.values(productChannelIndex(productId, keys.shard))).toEqual(Object.values(keys.index))
    // One index per product: another product's index on the same shard shares no key with it.
    const other = Object.values(productChannelIndex(randomUUID(), keys.shard))
    expect(other.filter((key) => Object.values(keys.index).includes(key))).toEqual([])
  }
})
