// What happens to one fan-out entry on this gateway: the fan-out reader hands it here, and it goes to the channel's
// subscribers through the hub (live ones by one topic publish, pending ones one by one), skipping the sender of a client
// event, counting deliveries for usage, and closing 4200 the sockets it took past the gateway's buffer limit.
// fanout.ts -> dispatch.ts -> hub.ts -> transport.ts (live) or client.ts (pending) -> transport.ts.
import type { Connection } from './client'
import { DISCONNECTS } from './disconnect'
import type { FanEntry } from './fanout'
import type { Hub } from './hub'
import { gatewayMetrics } from './metrics'
import type { Usage } from './ports'
import { presenceFrame, publicationFrame } from './protocol'

/** The runtime's topic publish (transport.ts SocketTopics), as the dispatcher uses it. */
export interface LiveTopics {
  /** Writes a frame once to every live subscriber of `topic` but the connection `skip` (a function value: handed on unbound). */
  readonly publish: (topic: string, frame: string, skip?: string) => void
  /** The connection open on this gateway under this id, if any. */
  connectionOf(connectionId: string): Connection | undefined
  /** Bytes published since the last `takePublished`. */
  readonly unchecked: number
  /** The topics published to since the last call (then forgotten). */
  takePublished(): Iterable<string>
}

/** Frames to single connections are queued during a batch and written per socket when it ends (transport.ts Writer). */
export interface Batching {
  startBatch(): void
  endBatch(): void
}

export class Dispatcher {
  /**
   * Slow consumers. A live subscription is written by the runtime's topic publish, which drops (silently) what would
   * take a socket past Bun's backpressure limit. So that never happens, Bun's limit is set well above ours and the
   * sockets of every topic published to are checked against ours after each batch, and sooner when a batch is big:
   * between two checks a socket takes at most `checkEvery` bytes plus one frame, so it is closed 4200 before the runtime
   * would drop anything. A socket written to directly is checked at each write (transport.ts Writer).
   */
  private readonly checkEvery: number

  /** `limit`: the most bytes a socket may hold unsent (config.realtime.gatewayMaxBufferedBytes). */
  constructor(
    private readonly hub: Hub<Connection>,
    private readonly topics: LiveTopics,
    private readonly writer: Batching,
    private readonly usage: Usage,
    private readonly limit: number,
  ) {
    this.checkEvery = Math.max(1, Math.floor(limit / 2))
  }

  /** One entry of a shard this gateway reads. Properties, not methods: the fan-out reader is handed them as they are. */
  readonly deliver = (entry: FanEntry): void => {
    // Every subscription here of the entry's shard sees it (they share the read), but most entries are for channels
    // without one here: those are not even encoded.
    const here = this.hub.subscriberCount(entry.product, entry.channel)
    if (here === 0) return
    this.writer.startBatch()
    const frame = entry.kind ? presenceFrame(entry) : publicationFrame(entry)
    const position = !entry.kind && entry.offset !== undefined && entry.epoch !== undefined ? { offset: entry.offset, epoch: entry.epoch } : undefined
    if (!entry.kind) {
      // Usage for analytics: every local subscriber but the sender of a client event gets it (a sender may publish
      // to a channel it does not subscribe to: then nobody is skipped).
      const sender = entry.sender ? this.topics.connectionOf(entry.sender) : undefined
      const reached = here - (sender && this.hub.subscribes(entry.product, entry.channel, sender) ? 1 : 0)
      if (reached > 0) this.usage.count(entry.product, entry.channel, { deliveries: reached })
      gatewayMetrics.dispatched('publication', reached)
    } else {
      gatewayMetrics.dispatched('presence', here)
    }
    // A client event skips its sender, live or pending.
    this.hub.publish(entry.product, entry.channel, position, frame, this.topics.publish, entry.sender)
    if (this.topics.unchecked >= this.checkEvery) this.checkBuffers()
  }

  /** Continuity lost on a shard: its subscriptions end, and their clients subscribe again with their cursors. */
  readonly gap = (shard: number): void => {
    gatewayMetrics.gap()
    for (const { subscriber, channel } of this.hub.subscriptionsOf(shard)) subscriber.endSubscription(channel, 'recover')
  }

  /** A batch read was delivered: what it queued per socket is written, then the topics' sockets are checked. */
  readonly batchDone = (): void => {
    this.writer.endBatch()
    this.checkBuffers()
  }

  private checkBuffers(): void {
    for (const topic of this.topics.takePublished()) {
      for (const connection of [...this.hub.liveOf(topic)]) {
        if (connection.buffered() > this.limit) connection.disconnect(DISCONNECTS.slowConsumer)
      }
    }
  }
}
