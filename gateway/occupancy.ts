// This gateway's occupancy leases: a lease on each channel it has subscribers on, taken with the first, refreshed at
// half its lifetime, released with the last; a gateway that dies stops refreshing and its leases expire. The channel's
// occupancy across gateways, and its webhook events, are in shared/realtime/occupancy.ts. Each lease carries this
// gateway's subscriptions on the channel (the product's active channels list their sum): a change is sent with the
// next count round (COUNT_FLUSH_MS), never on the subscribe itself, so a subscribe costs no Redis call it did not before.
import { randomUUID } from 'node:crypto'
import { logUnlessOutage } from '../shared/errors'
import type { ChannelWatch } from './hub'
import { topicOf } from './hub'
import type { Occupancy } from './ports'
import { everyUnlessRunning } from './rounds'

/** Leases refreshed per round trip batch. */
const REFRESH_CHUNK = 200
/**
 * How often changed subscription counts are sent: a channel whose count changes many times a second costs one lease
 * refresh a second per gateway, and a count shown is at most about this old.
 */
export const COUNT_FLUSH_MS = 1000

interface HeldChannel {
  productId: string
  channel: string
  subscriptions: number
}

export class OccupancyLeases implements ChannelWatch {
  /** This process's holder id: a restarted gateway is a new holder, and its predecessor's leases expire. */
  readonly holder = randomUUID()
  private readonly held = new Map<string, HeldChannel>()
  /** Held channels whose count changed since it was last sent. */
  private readonly recounted = new Set<string>()
  private readonly refresh: ReturnType<typeof setInterval>
  private readonly counts: ReturnType<typeof setInterval>

  constructor(private readonly occupancy: Occupancy, private readonly leaseMs: number, countFlushMs = COUNT_FLUSH_MS) {
    // Every held channel again, so a lease outlives its refresh period; one lost write is made good by the next round.
    this.refresh = everyUnlessRunning(Math.max(200, leaseMs / 2), () => this.refreshAll())
    this.counts = everyUnlessRunning(countFlushMs, () => this.sendCounts())
  }

  /** The changed counts, as lease refreshes; one that fails is sent again with the next round (or the next refresh). */
  private async sendCounts(): Promise<void> {
    if (!this.recounted.size) return
    const topics = [...this.recounted]
    this.recounted.clear()
    const chunk = topics.flatMap((topic) => this.held.get(topic) ?? []).map((held) => ({ ...held }))
    try {
      if (chunk.length) await this.occupancy.hold(this.holder, chunk, this.leaseMs)
    } catch (error) {
      for (const topic of topics) if (this.held.has(topic)) this.recounted.add(topic)
      logUnlessOutage('occupancy count failed', error, { channels: chunk.length })
    }
  }

  /**
   * In chunks, each taken from what is still held when it is sent: a channel released meanwhile is not held again
   * after its release (its lease would linger, and its vacate come a lease later). A chunk that fails does not stop
   * the round: every other chunk's leases are still refreshed (else a Redis hiccup longer than a lease would vacate and
   * re-occupy every channel after the failing one). One log per round.
   */
  private async refreshAll(): Promise<void> {
    const topics = [...this.held.keys()]
    let failed = 0
    let lastError: unknown
    for (let i = 0; i < topics.length; i += REFRESH_CHUNK) {
      const chunk = topics.slice(i, i + REFRESH_CHUNK).flatMap((topic) => this.held.get(topic) ?? []).map((held) => ({ ...held }))
      if (!chunk.length) continue
      try {
        await this.occupancy.hold(this.holder, chunk, this.leaseMs)
      } catch (error) {
        failed += chunk.length
        lastError = error
      }
    }
    if (failed) logUnlessOutage('occupancy refresh failed', lastError, { channels: failed, of: topics.length })
  }

  first(productId: string, channel: string): void {
    this.held.set(topicOf(productId, channel), { productId, channel, subscriptions: 1 })
    void this.occupancy.hold(this.holder, [{ productId, channel, subscriptions: 1 }], this.leaseMs).catch((error) => logUnlessOutage('occupancy hold failed', error))
  }

  counted(productId: string, channel: string, subscriptions: number): void {
    const topic = topicOf(productId, channel)
    const held = this.held.get(topic)
    if (!held) return
    held.subscriptions = subscriptions
    this.recounted.add(topic)
  }

  last(productId: string, channel: string): void {
    this.held.delete(topicOf(productId, channel))
    this.recounted.delete(topicOf(productId, channel))
    void this.occupancy.release(this.holder, [{ productId, channel }]).catch((error) => logUnlessOutage('occupancy release failed', error))
  }

  /** Refreshes stop; the leases still held are released by their subscriptions ending (a drain), or expire. */
  stop(): void {
    clearInterval(this.refresh)
    clearInterval(this.counts)
  }
}
