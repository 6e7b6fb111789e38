// Every Redis key of the realtime data plane, in one place. Quota and rate-limit keys live with their own modules.
//
// Each key carries a hash tag naming its shard (`{s12}`), so all keys of one shard sit on one Redis node (and one Redis
// Cluster slot): one Lua script can then touch a channel's history, metadata and its shard's fan-out stream atomically.
// `productId` is a UUID (no colon), so `<productId>:<channel>` is unambiguous even though channel names contain colons.
// A channel's name is therefore always the key's end: a per-channel key's type goes before it (`presn:`), never after it
// as a suffix (`pres:<p>:X:n` would be the roster of channel `X:n`).
//
// | key                                   | type   | holds                                                             |
// | ------------------------------------- | ------ | ----------------------------------------------------------------- |
// | rt:{sN}:fan                           | stream | every publish of shard N, for the gateways (trimmed by age: MINID) |
// | rt:{sN}:fan:n                         | string | the shard's fan-out sequence: entry `n` of the stream carries n    |
// | rt:{sN}:fan:archived                  | string | highest `n` delivered to the archiver's group (counts trimmed gaps) |
// | rt:{sN}:fan:dead                      | list   | fan-out entries PostgreSQL refused to archive, newest first, capped |
// | rt:{sN}:fanb3:<productId>              | hash   | fan-out bytes the product appended, per time slice (budget)        |
// | rt:{sN}:histb:<productId>             | hash   | history bytes per channel of the product; `#` = their sum          |
// | rt:{sN}:histx:<productId>             | zset   | channel → when its history keys expire (ms), to drop it from histb |
// | rt:{sN}:hist:<productId>:<channel>    | stream | history entries; stream id `<offset>-0`; fields t, i, d or r       |
// | rt:{sN}:meta:<productId>:<channel>    | hash   | `e` = epoch, `o` = top offset, `b` = bytes charged (entries + channel) |
// | rt:{sN}:presi:<productId>:<channel>   | hash   | presence: identity → info (JSON text)                              |
// | rt:{sN}:presn:<productId>:<channel>   | hash   | presence: identity → number of live connections                    |
// | rt:{sN}:presx:<productId>:<channel>   | zset   | presence: `<len(identity)>:<identity><connectionId>` → expiry (ms) |
// | rt:{sN}:presgone:<productId>:<channel>| zset   | webhooks: identity → when its last entry went, while its removal waits out the grace |
// | rt:{sN}:presh:<productId>:<channel>   | hash   | webhooks: identity → `a`/`d` (add announced / dropped) `:` its latest entry's expiry (ms) |
// | rt:{sN}:occl:<productId>:<channel>    | zset   | occupancy: gateway id → when its lease on the channel expires (ms)  |
// | rt:{sN}:occgone:<productId>:<channel> | string | webhooks: when the channel's last subscriber went, while `vacated` waits |
// | rt:{sN}:occmute:<productId>:<channel> | string | webhooks: exists while the channel's `occupied` was dropped (so is its `vacated`) |
// | rt:{sN}:occn:<productId>:<channel>    | hash   | active channels: gateway id → its subscriptions on the channel      |
// | rt:{sN}:chans:<productId>             | zset   | active channels: the product's occupied channels of shard N, all score 0 (by name) |
// | rt:{sN}:chanx:<productId>             | zset   | active channels: channel → its latest lease's expiry (ms), to drop it once every lease expired |
// | rt:{sN}:chann:<productId>             | hash   | active channels: channel → its subscriptions on every gateway (the sum of its occn) |
// | rt:{sN}:hookb3:<productId>             | hash   | webhooks: event bytes the product appended, per time slice (budget) |
// | rt:{sN}:hookd:<productId>             | string | webhooks: events of the product dropped by the budget (counts for the retention) |
// | rt:{sN}:hooks                         | stream | webhook events of shard N, read by the webhooks process (group `webhooks`) |
// | rt:{sN}:hooks:due                     | zset   | `p:`/`o:` + `<productId>:<channel>` → when its presence/occupancy next needs a check |
// | rt:{sN}:idem:<productId>:<keyHash>:<channel> | string | what an Idempotency-Key published on the channel: `fingerprint id offset epoch` (its window) |
// | rt:idem:<productId>:<keyHash>         | string | the fingerprint of the request that used the Idempotency-Key (its window) |
// History and meta keys expire after the namespace's retention window of idleness; presence keys 30 s after the last expiry.
// The layout of before (`pres:<p>:<ch>` and its `:n`, `:exp`, `:gone`, `occ:<p>:<ch>` and its `:gone`, `hookn:`) is read
// by nothing (renamed whole, so no old key is mistaken for a new one): a Redis still holding it loses that short-lived
// presence and occupancy state once (docs/realtime-data-plane.md, "Layout change").
import { shardOf } from './shards'
import { keepBounded } from '../cache/bounded'

/**
 * Time slices of the fan-out budget window (config.realtime.fanoutRetentionMs): a product's appended bytes are counted
 * per slice, and the slices of the last window (plus the current one) are summed. docs/realtime-data-plane.md, "Budgets".
 */
export const FAN_BUDGET_SLICES = 10

/** `{s12}`: the hash tag shared by every key of shard 12. */
export const shardTag = (shard: number) => `{s${shard}}`

/** The fan-out stream of one shard; gateways `XREAD BLOCK` it. */
export const fanKey = (shard: number) => `rt:${shardTag(shard)}:fan`

/**
 * The counter numbering a shard's fan-out entries 1, 2, 3...: every script that appends to the stream increments it and
 * writes the number into the entry (`n`), so a reader sees a trimmed or lost entry as a jump and never skips silently.
 */
export const fanSeqKey = (shard: number) => `rt:${shardTag(shard)}:fan:n`

/** The highest fan-out sequence number delivered to the archiver's consumer group on a shard (services/archiver). */
export const fanArchivedKey = (shard: number) => `rt:${shardTag(shard)}:fan:archived`
/** The archiver's dead letters of the shard: JSON `{streamId, fields, error, at}`, newest first, at most ARCHIVE_DEAD_LETTERS_MAX. */
export const fanDeadKey = (shard: number) => `rt:${shardTag(shard)}:fan:dead`

/** Every fan-out stream key, shard 0 first. */
export const fanKeys = (shards: number) => Array.from({ length: shards }, (_, shard) => fanKey(shard))

/** The webhook events of one shard (docs/webhooks.md, "Realtime events"); the webhooks process reads it as group `webhooks`. */
export const hooksKey = (shard: number) => `rt:${shardTag(shard)}:hooks`

/** When each channel of a shard next needs a webhook check (an entry or lease expiring, a removal's grace ending). */
export const hooksDueKey = (shard: number) => `rt:${shardTag(shard)}:hooks:due`

export interface ChannelKeys {
  shard: number
  fan: string
  fanSeq: string
  hist: string
  meta: string
  pres: string
  presCount: string
  presExp: string
  /** The product's fan-out byte budget on this shard (per time slice). */
  fanBudget: string
  /** Webhooks: identities whose last presence entry went, by when (their removal waits out the grace). */
  presGone: string
  /** Webhooks: identity → whether its add was announced, and its latest entry's expiry (outlives the roster). */
  presHook: string
  /** Occupancy: gateway id → when its lease on the channel (it has subscribers there) expires. */
  occ: string
  /** Webhooks: when the channel's last subscriber went (its `vacated` waits out the grace). */
  occGone: string
  /** Webhooks: exists while the channel's `occupied` was dropped by the budget (its `vacated` is then dropped too). */
  occMuted: string
  /** Active channels: gateway id → how many subscriptions it has on the channel (reported with its lease). */
  occCount: string
  /** Active channels: the product's index on this shard (./active-channels.ts). */
  index: ProductChannelIndex
  /** Webhooks: the product's event bytes on this shard (per time slice). */
  hookBudget: string
  /** Webhooks: how many of the product's events on this shard the budget dropped (within the retention). */
  hookDropped: string
  hooks: string
  hooksDue: string
  /** The product's history bytes on this shard, per channel and in total (`#`). */
  histBytes: string
  /** The product's channels with history on this shard, scored by when their keys expire. */
  histExpiry: string
}

/**
 * The product's occupied channels on one shard, kept by the occupancy script beside the leases (in the shard's slot)
 * and read a page at a time by ./active-channels.ts: one index per (product, shard), so a product never sees another's.
 */
export interface ProductChannelIndex {
  /** zset, every member scored 0: the channels by name (ZRANGEBYLEX pages). */
  names: string
  /** zset: channel → its latest lease's expiry (ms); past it every gateway holding the channel is gone. */
  expiry: string
  /** hash: channel → its subscriptions summed over the gateways holding it. */
  subscriptions: string
}

export function productChannelIndex(productId: string, shard: number): ProductChannelIndex {
  const tag = shardTag(shard)
  return { names: `rt:${tag}:chans:${productId}`, expiry: `rt:${tag}:chanx:${productId}`, subscriptions: `rt:${tag}:chann:${productId}` }
}

/** What publishKeys answers: the channel's shard and the keys a publish writes, never changed by a caller. */
export interface PublishKeys {
  shard: number
  keys: readonly [hist: string, meta: string, fan: string, fanSeq: string, fanBudget: string, histBytes: string, histExpiry: string]
}

/**
 * The keys one publish writes, in publish.lua's KEYS order (hist, meta, fan, fan sequence, fanb, histb, histx), and
 * the channel's shard: the names channelKeys gives them, made here alone so a publish does not make the other fifteen.
 * Remembered for the channels met lately (the shard without one given), as shardOf remembers their shards: the seven
 * names were made at every publish.
 */
export function publishKeys(productId: string, channel: string, shard?: number): PublishKeys {
  if (shard !== undefined) return makePublishKeys(productId, channel, shard)
  const name = `${productId}\0${channel}`
  let known = publishKeysKnown.get(name)
  if (known === undefined) {
    known = makePublishKeys(productId, channel, shardOf(productId, channel))
    keepBounded(publishKeysKnown, PUBLISH_KEYS_KNOWN_MAX, name, known)
  }
  return known
}

/**
 * At most this many channels' keys, dropped whole when full: about 1.5 KB each with the longest names (128-character
 * channels), so at most about 8 MB however many channels a key's holder cycles through.
 */
const PUBLISH_KEYS_KNOWN_MAX = 5_000
const publishKeysKnown = new Map<string, PublishKeys>()

function makePublishKeys(productId: string, channel: string, shard: number): PublishKeys {
  const tag = shardTag(shard)
  return Object.freeze({
    shard,
    keys: Object.freeze([`rt:${tag}:hist:${productId}:${channel}`, `rt:${tag}:meta:${productId}:${channel}`, fanKey(shard), fanSeqKey(shard),
      `rt:${tag}:fanb3:${productId}`, `rt:${tag}:histb:${productId}`, `rt:${tag}:histx:${productId}`] as const),
  })
}

/** All keys of one channel (and its shard's fan-out stream). */
export function channelKeys(productId: string, channel: string, shard = shardOf(productId, channel)): ChannelKeys {
  const tag = shardTag(shard)
  const name = `${productId}:${channel}`
  const [hist, meta, fan, fanSeq, fanBudget, histBytes, histExpiry] = publishKeys(productId, channel, shard).keys
  return {
    shard,
    fan,
    fanSeq,
    hist,
    meta,
    pres: `rt:${tag}:presi:${name}`,
    presCount: `rt:${tag}:presn:${name}`,
    presExp: `rt:${tag}:presx:${name}`,
    presGone: `rt:${tag}:presgone:${name}`,
    presHook: `rt:${tag}:presh:${name}`,
    occ: `rt:${tag}:occl:${name}`,
    occGone: `rt:${tag}:occgone:${name}`,
    occMuted: `rt:${tag}:occmute:${name}`,
    occCount: `rt:${tag}:occn:${name}`,
    index: productChannelIndex(productId, shard),
    hookBudget: `rt:${tag}:hookb3:${productId}`,
    hookDropped: `rt:${tag}:hookd:${productId}`,
    hooks: hooksKey(shard),
    hooksDue: hooksDueKey(shard),
    fanBudget,
    histBytes,
    histExpiry,
  }
}

/**
 * An idempotency key's claim: the fingerprint of the request that first used the key on the product, for the key's
 * window (publish-request.ts). `keyHash` is the key's SHA-256 (hex), so the key's own bytes never reach a key name.
 * No hash tag: on one Redis the publish script reads it; on a cluster it is claimed in a step of its own.
 */
export const idempotencyClaimKey = (productId: string, keyHash: string) => `rt:idem:${productId}:${keyHash}`

/** What an idempotency key published on a channel (`id offset epoch`, or `id`): in the channel's slot, written by its publish. */
export const idempotencyMarkerKey = (productId: string, channel: string, keyHash: string, shard = shardOf(productId, channel)) =>
  `rt:${shardTag(shard)}:idem:${productId}:${keyHash}:${channel}`
