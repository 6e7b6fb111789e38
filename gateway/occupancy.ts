// This gateway's occupancy leases: a lease on each channel it has subscribers on, taken with the first, refreshed at
// half its lifetime, released with the last; a gateway that dies stops refreshing and its leases expire. The channel's
// occupancy across gateways, and its webhook events, are in shared/realtime/occupancy.ts.
import { randomUUID } from 'node:crypto'
import { logUnlessOutage } from '../shared/errors'
import type { ChannelWatch } from './hub'
import { topicOf } from './hub'
import type { Occupancy } from './ports'
import { everyUnlessRunning } from './rounds'

/** Leases refreshed per round trip batch. */
const REFRESH_CHUNK = 200

export class OccupancyLeases implements ChannelWatch {
  /** This process's holder id: a restarted gateway is a new holder, and its predecessor's leases expire. */
  readonly holder = randomUUID()
  private readonly held = new Map<string, { productId: string; channel: string }>()
  private readonly refresh: ReturnType<typeof setInterval>

  constructor(private readonly occupancy: Occupancy, private readonly leaseMs: number) {
    // Every held channel again, so a lease outlives its refresh period; one lost write is made good by the next round.
    this.refresh = everyUnlessRunning(Math.max(200, leaseMs / 2), () => this.refreshAll())
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
      const chunk = topics.slice(i, i + REFRESH_CHUNK).flatMap((topic) => this.held.get(topic) ?? [])
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
    this.held.set(topicOf(productId, channel), { productId, channel })
    void this.occupancy.hold(this.holder, [{ productId, channel }], this.leaseMs).catch((error) => logUnlessOutage('occupancy hold failed', error))
  }

  last(productId: string, channel: string): void {
    this.held.delete(topicOf(productId, channel))
    void this.occupancy.release(this.holder, [{ productId, channel }]).catch((error) => logUnlessOutage('occupancy release failed', error))
  }

  /** Refreshes stop; the leases still held are released by their subscriptions ending (a drain), or expire. */
  stop(): void {
    clearInterval(this.refresh)
  }
}
