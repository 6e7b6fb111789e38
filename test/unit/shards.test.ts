// The channel → shard hash every process must agree on (shared/realtime/shards.ts): pinned values, so a change to the
// hash (which would move every channel to a new shard, with a new epoch and an empty roster) fails here first.
import { expect, test } from 'bun:test'
import { channelKeys, publishKeys } from '../../shared/realtime/keys'
import { fnv1a32, shardOf } from '../../shared/realtime/shards'

/** FNV-1a over the UTF-8 bytes, written out the plain way: the reference the fast path must match. */
function reference(text: string): number {
  let hash = 0x811c9dc5
  for (const byte of new TextEncoder().encode(text)) hash = Math.imul(hash ^ byte, 0x01000193)
  return hash >>> 0
}

test('FNV-1a hashes the UTF-8 bytes, for ASCII names and for names with any other character', () => {
  for (const text of ['', 'a', 'chat:room-1', '4c0e\0chat:room-1', 'chat:café', 'chat:日本', 'chat:😀', `x${'é'.repeat(50)}`]) {
    expect(fnv1a32(text)).toBe(reference(text))
  }
  expect(fnv1a32('a')).toBe(0xe40c292c) // FNV-1a's published test vector
})

test('a channel lands on the same shard every time, remembered or not, and for other shard counts', () => {
  const product = '5b2f6d0e-3a57-4c1b-9d2e-7f00a1b2c3d4'
  // Computed by the hash as it was before this process remembered anything (shards.ts at 561c089).
  const pinned: [channel: string, on16: number, on64: number, fnv: number][] = [
    ['chat:room-1', 7, 7, 2482085889], ['chat:café', 8, 53, 2219347078], ['chat:日本', 13, 49, 1729505568], ['news', 4, 20, 3015796283],
  ]
  for (const [channel, on16, on64, fnv] of pinned) {
    expect(fnv1a32(`${product}\0${channel}`)).toBe(fnv)
    for (let ask = 0; ask < 2; ask++) { // the second time from what this process remembers
      expect(shardOf(product, channel, 16)).toBe(on16)
      expect(shardOf(product, channel, 64)).toBe(on64)
    }
    expect(shardOf(product, channel, 1)).toBe(0)
  }
})

test("a publish's keys are the channel's own names, in publish.lua's order", () => {
  const product = '5b2f6d0e-3a57-4c1b-9d2e-7f00a1b2c3d4'
  for (const channel of ['chat:room-1', 'chat:日本']) {
    const all = channelKeys(product, channel)
    expect(publishKeys(product, channel)).toEqual({
      shard: all.shard, keys: [all.hist, all.meta, all.fan, all.fanSeq, all.fanBudget, all.histBytes, all.histExpiry],
    })
  }
})

test("a channel's publish keys are remembered, the same as made afresh, and no caller can change them", () => {
  const product = '5b2f6d0e-3a57-4c1b-9d2e-7f00a1b2c3d4'
  const first = publishKeys(product, 'chat:remembered')
  expect(publishKeys(product, 'chat:remembered')).toBe(first)
  expect(publishKeys(product, 'chat:remembered', first.shard)).toEqual(first) // made afresh with its shard given
  expect(() => {
    (first.keys as unknown as string[])[0] = 'rt:{s0}:hist:someone-else'
  }).toThrow()
  expect(publishKeys(product, 'chat:remembered').keys[0]).toBe(channelKeys(product, 'chat:remembered').hist)
})
