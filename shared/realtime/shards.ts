// Channel to shard: a stable, consistent hash (FNV-1a, then jump hash) of (productId, channel) onto one of `config.realtime.shards` shards.
import { config } from '../config'
import { keepBounded } from '../cache/bounded'

const MASK64 = (1n << 64n) - 1n
const encoder = new TextEncoder()

/**
 * FNV-1a, 32-bit, over the UTF-8 bytes of `text` (Math.imul keeps it in plain numbers: ~10x faster than BigInt). ASCII
 * text is hashed from its character codes, which are its UTF-8 bytes, without encoding it first.
 */
export function fnv1a32(text: string): number {
  let hash = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i)
    if (code >= 0x80) return fnv1a32Encoded(text)
    hash = Math.imul(hash ^ code, 0x01000193)
  }
  return hash >>> 0
}

function fnv1a32Encoded(text: string): number {
  let hash = 0x811c9dc5
  for (const byte of encoder.encode(text)) hash = Math.imul(hash ^ byte, 0x01000193)
  return hash >>> 0
}

/**
 * Jump consistent hash (Lamping & Veach, 2014): maps a 64-bit key onto [0, buckets). Growing from n to n+1 buckets moves
 * only about 1/(n+1) of the keys. The shard count is still fixed per deployment (a moved channel starts a new history
 * epoch and an empty roster); the consistent hash only limits the damage if it ever changes.
 */
export function jumpHash(key: bigint, buckets: number): number {
  let b = -1
  let j = 0
  while (j < buckets) {
    b = j
    key = (key * 2862933555777919013n + 1n) & MASK64
    j = Math.floor((b + 1) * (Number(1n << 31n) / Number((key >> 33n) + 1n)))
  }
  return b
}

/**
 * The shard (0 ≤ shard < shards) holding a channel's history, presence and fan-out entries. Stable across processes and
 * restarts: every API worker and every gateway must compute the same value, so never change the hash.
 * @example shardOf('4c0e…', 'chat:room-1') // → the same number in [0, 16) in every process
 */
export function shardOf(productId: string, channel: string, shards: number = config.realtime.shards): number {
  if (!Number.isInteger(shards) || shards < 1) throw new Error(`shard count must be a positive integer, got ${shards}`)
  const name = `${productId}\0${channel}`
  if (shards !== config.realtime.shards) return jumpHash(BigInt(fnv1a32(name)), shards)
  let shard = recent.get(name)
  if (shard === undefined) {
    shard = jumpHash(BigInt(fnv1a32(name)), shards)
    keepBounded(recent, RECENT_MAX, name, shard)
  }
  return shard
}

/**
 * The shards of the channels this process met lately (the deployment's shard count): jump hash's BigInt steps cost
 * a publish more than a lookup. At most RECENT_MAX names (a few MB), dropped whole when full, so any number of channels
 * costs a bounded amount of memory.
 */
const recent = new Map<string, number>()
const RECENT_MAX = 20_000
