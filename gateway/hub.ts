// The gateway's local registry: which connections subscribe to which (product, channel), how many channels of each
// shard are wanted (so the fan-out reader reads only those shards), and which subscriptions are live on the channel's
// native topic. Only maps; no I/O.
//
// A subscription starts `pending`: publications reach it one by one through `deliver` (it buffers them while history is
// read, then drops what history already gave). Once it has caught up it goes `live`: from then on the runtime's topic
// publish reaches it, one native call per message for every live subscriber of this gateway (docs/performance.md).
import { shardOf } from '../shared/realtime/shards'

/** What the hub needs of a connection. */
export interface Subscriber {
  readonly id: string
  /** Takes one publication of `channel` while its subscription is pending: its position (when it has one) and its frame. */
  deliver(channel: string, position: Position | undefined, frame: string): void
}

/** Where a publication stands in its channel's history. */
export interface Position {
  offset: number
  epoch: string
}

interface ChannelEntry<S> {
  productId: string
  channel: string
  topic: string
  shard: number
  pending: Set<S>
  live: Set<S>
}

/** The runtime topic of a (product, channel): product ids are UUIDs, so the first colon separates them. */
export const topicOf = (productId: string, channel: string) => `${productId}:${channel}`

/** Told when a channel gets its first subscriber here and when it loses its last (the gateway's occupancy leases). */
export interface ChannelWatch {
  first(productId: string, channel: string): void
  last(productId: string, channel: string): void
  /** The channel's subscriptions here changed and it still has some (its count in the product's active channels). */
  counted?(productId: string, channel: string, subscriptions: number): void
}

export class Hub<S extends Subscriber = Subscriber> {
  private readonly channels = new Map<string, ChannelEntry<S>>()
  private readonly shardChannels = new Map<number, number>()

  constructor(private readonly watch?: ChannelWatch) {}

  /** Adds a pending subscription; returns the channel's shard (which the caller makes sure is read). */
  subscribe(productId: string, channel: string, subscriber: S): number {
    const topic = topicOf(productId, channel)
    let entry = this.channels.get(topic)
    if (!entry) {
      entry = { productId, channel, topic, shard: shardOf(productId, channel), pending: new Set(), live: new Set() }
      this.channels.set(topic, entry)
      this.shardChannels.set(entry.shard, (this.shardChannels.get(entry.shard) ?? 0) + 1)
      this.watch?.first(productId, channel)
    }
    const before = entry.pending.size + entry.live.size
    entry.pending.add(subscriber)
    const after = entry.pending.size + entry.live.size
    if (before > 0 && after !== before) this.watch?.counted?.(productId, channel, after)
    return entry.shard
  }

  /** Moves a pending subscription to the channel's topic; returns the topic to subscribe the socket to, or null if gone. */
  goLive(productId: string, channel: string, subscriber: S): string | null {
    const entry = this.channels.get(topicOf(productId, channel))
    if (!entry?.pending.delete(subscriber)) return null
    entry.live.add(subscriber)
    return entry.topic
  }

  /** Removes a subscription; returns the shard when it is no longer wanted (its last channel here left). */
  unsubscribe(productId: string, channel: string, subscriber: S): number | null {
    const topic = topicOf(productId, channel)
    const entry = this.channels.get(topic)
    if (!entry || !(entry.pending.delete(subscriber) || entry.live.delete(subscriber))) return null
    const left = entry.pending.size + entry.live.size
    if (left > 0) {
      this.watch?.counted?.(productId, channel, left)
      return null
    }
    this.channels.delete(topic)
    this.watch?.last(productId, channel)
    const shardLeft = (this.shardChannels.get(entry.shard) ?? 1) - 1
    if (shardLeft > 0) {
      this.shardChannels.set(entry.shard, shardLeft)
      return null
    }
    this.shardChannels.delete(entry.shard)
    return entry.shard
  }

  /**
   * Hands one encoded publication to the channel's subscribers: first `publishLive(topic, frame, skip)` when some are
   * live (one publish on the topic reaches them all but `skip`: transport.ts SocketTopics), then `deliver` to each
   * pending one except `skip`.
   * In that order: a pending subscription that goes live while it is handed this frame must not get it again from the topic.
   * Returns whether anyone here subscribes.
   */
  publish(productId: string, channel: string, position: Position | undefined, frame: string, publishLive: (topic: string, frame: string, skip?: string) => void, skip?: string): boolean {
    const entry = this.channels.get(topicOf(productId, channel))
    if (!entry) return false
    if (entry.live.size > 0) publishLive(entry.topic, frame, skip)
    for (const subscriber of [...entry.pending]) {
      if (subscriber.id !== skip) subscriber.deliver(channel, position, frame)
    }
    return true
  }

  /** How many subscriptions of this gateway a publication of the channel reaches (live and pending). */
  subscriberCount(productId: string, channel: string): number {
    const entry = this.channels.get(topicOf(productId, channel))
    return entry ? entry.pending.size + entry.live.size : 0
  }

  /** Whether `subscriber` subscribes to the channel here (pending or live). */
  subscribes(productId: string, channel: string, subscriber: S): boolean {
    const entry = this.channels.get(topicOf(productId, channel))
    return entry !== undefined && (entry.pending.has(subscriber) || entry.live.has(subscriber))
  }

  /** The live subscribers of a topic (for checking their buffers after a publish). */
  liveOf(topic: string): ReadonlySet<S> {
    return this.channels.get(topic)?.live ?? new Set()
  }

  /** Every (subscriber, channel) of a shard, for telling them to recover after a gap. A snapshot: safe to change the hub meanwhile. */
  subscriptionsOf(shard: number): { subscriber: S; productId: string; channel: string }[] {
    const out: { subscriber: S; productId: string; channel: string }[] = []
    for (const entry of this.channels.values()) {
      if (entry.shard !== shard) continue
      for (const subscriber of [...entry.pending, ...entry.live]) out.push({ subscriber, productId: entry.productId, channel: entry.channel })
    }
    return out
  }

  /** Every (product, channel) with a subscriber here. */
  *channelsHere(): Generator<{ productId: string; channel: string }> {
    for (const entry of this.channels.values()) yield { productId: entry.productId, channel: entry.channel }
  }

  /** Subscriptions here, pending and live (a metric: O(channels), read at scrape time only). */
  subscriptionCount(): number {
    let count = 0
    for (const entry of this.channels.values()) count += entry.pending.size + entry.live.size
    return count
  }

  get wantedShards(): number[] {
    return [...this.shardChannels.keys()]
  }
}
