// Every Redis key of the realtime data plane, in one place. Quota and rate-limit keys live with their own modules.
//
// Each key carries a hash tag naming its shard (`{s12}`), so all keys of one shard sit on one Redis node (and one Redis
// Cluster slot): one Lua script can then touch a channel's history, metadata and its shard's fan-out stream atomically.
// `productId` is a UUID (no colon), so `<productId>:<channel>` is unambiguous even though channel names contain colons.
//
// | key                                   | type   | holds                                                             |
// | ------------------------------------- | ------ | ----------------------------------------------------------------- |
// | rt:{sN}:fan                           | stream | every publish of shard N, for the gateways (MAXLEN ~ FAN_MAXLEN)   |
// | rt:{sN}:fan:n                         | string | the shard's fan-out sequence: entry `n` of the stream carries n    |
// | rt:{sN}:hist:<productId>:<channel>    | stream | history entries; stream id `<offset>-0`; fields t, i, d or r       |
// | rt:{sN}:meta:<productId>:<channel>    | hash   | `e` = epoch, `o` = top offset                                      |
// | rt:{sN}:pres:<productId>:<channel>    | hash   | presence: identity → info (JSON text)                              |
// | rt:{sN}:pres:<productId>:<channel>:n  | hash   | presence: identity → number of live connections                    |
// | rt:{sN}:pres:<productId>:<channel>:exp| zset   | presence: `<len(identity)>:<identity><connectionId>` → expiry (ms) |
// History and meta keys expire after the namespace's retention window of idleness; presence keys 30 s after the last expiry.
import { shardOf } from './shards'

/** Approximate length kept in each shard's fan-out stream (`XADD ... MAXLEN ~`). A gateway further behind must recover. */
export const FAN_MAXLEN = 10_000

/** `{s12}`: the hash tag shared by every key of shard 12. */
export const shardTag = (shard: number) => `{s${shard}}`

/** The fan-out stream of one shard; gateways `XREAD BLOCK` it. */
export const fanKey = (shard: number) => `rt:${shardTag(shard)}:fan`

/**
 * The counter numbering a shard's fan-out entries 1, 2, 3...: every script that appends to the stream increments it and
 * writes the number into the entry (`n`), so a reader sees a trimmed or lost entry as a jump and never skips silently.
 */
export const fanSeqKey = (shard: number) => `rt:${shardTag(shard)}:fan:n`

/** Every fan-out stream key, shard 0 first. */
export const fanKeys = (shards: number) => Array.from({ length: shards }, (_, shard) => fanKey(shard))

export interface ChannelKeys {
  shard: number
  fan: string
  fanSeq: string
  hist: string
  meta: string
  pres: string
  presCount: string
  presExp: string
}

/** All keys of one channel (and its shard's fan-out stream). */
export function channelKeys(productId: string, channel: string, shard = shardOf(productId, channel)): ChannelKeys {
  const tag = shardTag(shard)
  const name = `${productId}:${channel}`
  return {
    shard,
    fan: fanKey(shard),
    fanSeq: fanSeqKey(shard),
    hist: `rt:${tag}:hist:${name}`,
    meta: `rt:${tag}:meta:${name}`,
    pres: `rt:${tag}:pres:${name}`,
    presCount: `rt:${tag}:pres:${name}:n`,
    presExp: `rt:${tag}:pres:${name}:exp`,
  }
}
