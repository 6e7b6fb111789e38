// Abuse bounds one gateway process keeps in its own memory: WebSocket upgrades and `connect` frames per client IP
// (fixed one-minute windows) and open connections per token subject. Per gateway, not across gateways (Redis), on
// purpose: the counts cost no round trip on the path a flood takes, a gateway that dies leaks no count, and what they
// protect — this process's sockets, memory and token checks — is per process too. With G gateways behind one port a
// client may reach up to G times each limit. Pure (the clock is a parameter), so the windows are tested without sockets.
import { config } from '../shared/config'

/**
 * Hits per key in fixed windows of `windowMs`, aligned to epoch time. The map holds only the current window's keys
 * (it is emptied when the window rolls), so it grows with the distinct client IPs of one window at most.
 */
export class LocalWindows {
  private window = -1
  private readonly counts = new Map<string, number>()

  constructor(private readonly limit: number, private readonly windowMs = 60_000) {}

  /** Counts one hit for `key`: allowed, or refused with the whole seconds until the window rolls (Retry-After). */
  hit(key: string, now = Date.now()): { allowed: true } | { allowed: false; retryAfter: number } {
    const window = Math.floor(now / this.windowMs)
    if (window !== this.window) {
      this.window = window
      this.counts.clear()
    }
    const count = (this.counts.get(key) ?? 0) + 1
    this.counts.set(key, count)
    if (count <= this.limit) return { allowed: true }
    return { allowed: false, retryAfter: Math.max(1, Math.ceil(((window + 1) * this.windowMs - now) / 1000)) }
  }
}

/** Open connections per product and subject on this gateway. */
export class SubjectConnections {
  private readonly open = new Map<string, number>()

  constructor(private readonly limit: number) {}

  /** Takes a place for one more connection of the subject; false when it already holds `limit`. */
  take(productId: string, subject: string): boolean {
    const key = `${productId}\n${subject}`
    const count = this.open.get(key) ?? 0
    if (count >= this.limit) return false
    this.open.set(key, count + 1)
    return true
  }

  release(productId: string, subject: string): void {
    const key = `${productId}\n${subject}`
    const count = (this.open.get(key) ?? 0) - 1
    if (count > 0) this.open.set(key, count)
    else this.open.delete(key)
  }
}

/** The limits a gateway's connections share (see docs/realtime-protocol.md, "Limits"). */
export interface GatewayLimits {
  upgrades: LocalWindows
  connects: LocalWindows
  subjects: SubjectConnections
}

export function gatewayLimits(): GatewayLimits {
  const limits = config.realtime
  return {
    upgrades: new LocalWindows(limits.gatewayIpUpgradesPerMinute),
    connects: new LocalWindows(limits.gatewayIpConnectsPerMinute),
    subjects: new SubjectConnections(limits.gatewayMaxConnectionsPerSubject),
  }
}
