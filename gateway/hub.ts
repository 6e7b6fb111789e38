// The gateway's local registry: which connections subscribe to which (product, channel), and how many channels of each
// shard are wanted (so the fan-out reader reads only those shards). Only maps; no I/O.
import { shardOf } from '../shared/realtime/shards'

/** What the hub needs of a connection. */
export interface Subscriber {
  readonly id: string
  /** Takes one publication of `channel`: its position (when it has one) and its frame, encoded once for everyone. */
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
  shard: number
  subscribers: Set<S>
}

const keyOf = (productId: string, channel: string) => `${productId}:${channel}`

export class Hub<S extends Subscriber = Subscriber> {
  private readonly channels = new Map<string, ChannelEntry<S>>()
  private readonly shardChannels = new Map<number, number>()

  /** Adds a subscription; `firstOfShard` when this made the shard wanted (its first channel here). */
  subscribe(productId: string, channel: string, subscriber: S): { shard: number; firstOfShard: boolean } {
    const key = keyOf(productId, channel)
    let entry = this.channels.get(key)
    if (!entry) {
      entry = { productId, channel, shard: shardOf(productId, channel), subscribers: new Set() }
      this.channels.set(key, entry)
      this.shardChannels.set(entry.shard, (this.shardChannels.get(entry.shard) ?? 0) + 1)
    }
    entry.subscribers.add(subscriber)
    return { shard: entry.shard, firstOfShard: this.shardChannels.get(entry.shard) === 1 && entry.subscribers.size === 1 }
  }

  /** Removes a subscription; returns the shard when it is no longer wanted (its last channel here left). */
  unsubscribe(productId: string, channel: string, subscriber: S): number | null {
    const key = keyOf(productId, channel)
    const entry = this.channels.get(key)
    if (!entry?.subscribers.delete(subscriber) || entry.subscribers.size > 0) return null
    this.channels.delete(key)
    const left = (this.shardChannels.get(entry.shard) ?? 1) - 1
    if (left > 0) {
      this.shardChannels.set(entry.shard, left)
      return null
    }
    this.shardChannels.delete(entry.shard)
    return entry.shard
  }

  /** Hands one encoded publication to every subscriber of the channel except `skip`; returns how many got it. */
  publish(productId: string, channel: string, position: Position | undefined, frame: string, skip?: string): number {
    const entry = this.channels.get(keyOf(productId, channel))
    if (!entry) return 0
    let sent = 0
    for (const subscriber of entry.subscribers) {
      if (subscriber.id === skip) continue
      subscriber.deliver(channel, position, frame)
      sent++
    }
    return sent
  }

  /** Every (subscriber, channel) of a shard, for telling them to recover after a gap. A snapshot: safe to change the hub meanwhile. */
  subscriptionsOf(shard: number): { subscriber: S; productId: string; channel: string }[] {
    const out: { subscriber: S; productId: string; channel: string }[] = []
    for (const entry of this.channels.values()) {
      if (entry.shard !== shard) continue
      for (const subscriber of entry.subscribers) out.push({ subscriber, productId: entry.productId, channel: entry.channel })
    }
    return out
  }

  get wantedShards(): number[] {
    return [...this.shardChannels.keys()]
  }
}
