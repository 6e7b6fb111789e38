// The gateway's local registry: which connections subscribe to which (product, channel), and how many channels of each
// shard are wanted (so the fan-out reader reads only those shards). Only maps; no I/O.
import { shardOf } from '../shared/realtime/shards'

/** What the hub needs of a connection. */
export interface Subscriber {
  readonly id: string
  /** Takes one publication of `channel`: its offset (when it has one) and its frame, encoded once for everyone. */
  deliver(channel: string, offset: number | undefined, frame: string): void
}

const keyOf = (productId: string, channel: string) => `${productId}:${channel}`

export class Hub<S extends Subscriber = Subscriber> {
  private readonly channels = new Map<string, Set<S>>()
  private readonly shardChannels = new Map<number, number>()

  /** Adds a subscription; returns the channel's shard when this made the shard wanted (its first channel here). */
  subscribe(productId: string, channel: string, subscriber: S): { shard: number; firstOfShard: boolean } {
    const key = keyOf(productId, channel)
    const shard = shardOf(productId, channel)
    let set = this.channels.get(key)
    if (!set) {
      this.channels.set(key, (set = new Set()))
      this.shardChannels.set(shard, (this.shardChannels.get(shard) ?? 0) + 1)
    }
    set.add(subscriber)
    return { shard, firstOfShard: this.shardChannels.get(shard) === 1 && set.size === 1 }
  }

  /** Removes a subscription; returns the shard when it is no longer wanted (its last channel here left). */
  unsubscribe(productId: string, channel: string, subscriber: S): number | null {
    const key = keyOf(productId, channel)
    const set = this.channels.get(key)
    if (!set?.delete(subscriber) || set.size > 0) return null
    this.channels.delete(key)
    const shard = shardOf(productId, channel)
    const left = (this.shardChannels.get(shard) ?? 1) - 1
    if (left > 0) {
      this.shardChannels.set(shard, left)
      return null
    }
    this.shardChannels.delete(shard)
    return shard
  }

  /** The subscribers of a channel (a live view; do not keep it). */
  subscribers(productId: string, channel: string): ReadonlySet<S> | undefined {
    return this.channels.get(keyOf(productId, channel))
  }

  /** Hands one encoded publication to every subscriber of the channel except `skip`; returns how many got it. */
  publish(productId: string, channel: string, offset: number | undefined, frame: string, skip?: string): number {
    const set = this.channels.get(keyOf(productId, channel))
    if (!set) return 0
    let sent = 0
    for (const subscriber of set) {
      if (subscriber.id === skip) continue
      subscriber.deliver(channel, offset, frame)
      sent++
    }
    return sent
  }

  get wantedShards(): number[] {
    return [...this.shardChannels.keys()]
  }
}
