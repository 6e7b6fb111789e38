// A product's active channels: the channels some gateway has subscribers on now, by name, a page at a time, each with
// its subscriptions summed over the gateways. The occupancy script keeps one index per (product, shard) beside the
// leases (./lua/occupancy.lua, keys.ts productChannelIndex); a page reads every shard's index from `after` on, one
// script per shard in parallel (each in its shard's slot), and merges them. Nothing here can name another product's keys.
import { config } from '../config'
import { redisScript } from '../redis-script'
import { productChannelIndex } from './keys'
import LIST_LUA from './lua/channels-list.lua' with { type: 'text' }
import NOW_LUA from './lua/now.lua' with { type: 'text' }

const listScript = redisScript<[string[], string]>('realtime channels', NOW_LUA, LIST_LUA)

/** Above every character a channel name may hold ([a-zA-Z0-9._:-]): `prefix + UPPER` bounds the names starting with it. */
const UPPER = '\x7f'

export interface ActiveChannel {
  channel: string
  /** Subscriptions on the channel over every gateway, as each last reported it (at most a second old while it changes). */
  subscriptions: number
}

export interface ActiveChannelsQuery {
  /** Only channels whose name starts with this. */
  prefix?: string
  /** The last channel of the previous page: names after it. */
  after?: string
  /** 1..100. */
  limit: number
}

/**
 * One page of the product's active channels by name (byte order), and whether more follow. Channels whose every
 * gateway died are left out (and dropped from the index as they are met).
 */
export async function listActiveChannels(productId: string, query: ActiveChannelsQuery, shards = config.realtime.shards): Promise<{ channels: ActiveChannel[]; has_more: boolean }> {
  const { prefix, after, limit } = query
  const lower = after !== undefined && (prefix === undefined || after >= prefix) ? `(${after}` : prefix !== undefined ? `[${prefix}` : '-'
  const upper = prefix !== undefined ? `(${prefix}${UPPER}` : '+'
  const want = limit + 1 // one more than the page: it says whether more follow
  const pages = await listScript.runEach(Array.from({ length: shards }, (_, shard) => {
    const index = productChannelIndex(productId, shard)
    return [[index.names, index.expiry, index.subscriptions], [lower, upper, want]] as const
  }))
  // A shard cut short (stale entries ate its reads) is complete only up to its cut: nothing past the lowest cut is
  // answered this time, so no channel is skipped; the next page starts from there.
  let bound: string | undefined
  const channels: ActiveChannel[] = []
  for (const [flat, cut] of pages) {
    if (cut !== '' && (bound === undefined || cut < bound)) bound = cut
    for (let i = 0; i + 1 < flat.length; i += 2) channels.push({ channel: flat[i]!, subscriptions: Math.max(0, Number(flat[i + 1])) })
  }
  const kept = bound === undefined ? channels : channels.filter(({ channel }) => channel <= bound)
  kept.sort((a, b) => (a.channel < b.channel ? -1 : a.channel > b.channel ? 1 : 0))
  return { channels: kept.slice(0, limit), has_more: kept.length > limit || bound !== undefined }
}
