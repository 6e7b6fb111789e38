// Abuse bounds one gateway process keeps in its own memory: WebSocket upgrades and `connect` frames per client IP
// (fixed one-minute windows) and open connections per token subject. Per gateway, not across gateways (Redis), on
// purpose: the counts cost no round trip on the path a flood takes, a gateway that dies leaks no count, and what they
// protect — this process's sockets, memory and token checks — is per process too. With G gateways behind one port a
// client may reach up to G times each limit. Each map is bounded: the per-IP ones by GATEWAY_IP_TRACKED_MAX addresses
// a window, the per-subject one by the open connections. Pure (the clock is a parameter), tested without sockets.
import { config } from '../shared/config'

/**
 * The key an address is counted under: an IPv4 address as is, an IPv6 address by its /64 (`2001:db8:1:2::/64`). One
 * subscriber line or host gets a whole /64, so counting each of its 2^64 addresses apart would be no limit at all.
 * Anything that is not an IP address (a proxy's odd header) is its own key.
 */
export function addressKey(ip: string): string {
  if (!ip.includes(':')) return ip
  const address = ip.replace(/^\[|\]$/g, '').replace(/%.*$/, '').toLowerCase() // brackets, zone id
  const halves = address.split('::')
  if (halves.length > 2) return ip
  const groups = (text: string) => (text === '' ? [] : text.split(':'))
  const head = groups(halves[0]!)
  const tail = halves.length === 2 ? groups(halves[1]!) : []
  // A trailing dotted IPv4 part (::ffff:1.2.3.4, 64:ff9b::1.2.3.4) is the last two groups.
  const last = (halves.length === 2 ? tail : head).at(-1)
  const dotted = last?.includes('.') ? 1 : 0
  const filled = head.length + tail.length + dotted
  if (halves.length === 1 ? filled !== 8 : filled > 7) return ip
  const all = [...head, ...Array<string>(8 - filled).fill('0'), ...tail]
  const prefix = all.slice(0, 4)
  if (!prefix.every((g) => /^[0-9a-f]{1,4}$/.test(g))) return ip
  return `${prefix.map((g) => g.replace(/^0+(?=.)/, '')).join(':')}::/64`
}

/**
 * Hits per client address in fixed windows of `windowMs`, aligned to epoch time, keyed by addressKey (IPv6 by /64).
 * The map holds only the current window's keys (it is emptied when the window rolls), and at most `maxKeys` of them:
 * past that, an address not yet counted in this window is refused until the window rolls, while the addresses already
 * counted keep their own limit. Decision: the fail-safe that keeps the limit. Emptying the map instead would let a
 * flood of distinct addresses (cheap with IPv6, or through a proxy) reset every count, the flooder's own included, and
 * so switch the limit off for everyone; refusing new addresses costs only new clients of that minute, and only while
 * such a flood lasts.
 */
export class LocalWindows {
  private window = -1
  private readonly counts = new Map<string, number>()

  constructor(private readonly limit: number, private readonly windowMs = 60_000, private readonly maxKeys = 100_000) {}

  /**
   * Counts one hit for `ip`: allowed, or refused with the whole seconds until the window rolls (Retry-After); `crowded`
   * when refused because the window already counts `maxKeys` other addresses.
   */
  hit(ip: string, now = Date.now()): { allowed: true } | { allowed: false; retryAfter: number; crowded?: true } {
    const window = Math.floor(now / this.windowMs)
    if (window !== this.window) {
      this.window = window
      this.counts.clear()
    }
    const retryAfter = Math.max(1, Math.ceil(((window + 1) * this.windowMs - now) / 1000))
    const key = addressKey(ip)
    const counted = this.counts.get(key)
    if (counted === undefined && this.counts.size >= this.maxKeys) return { allowed: false, retryAfter, crowded: true }
    const count = (counted ?? 0) + 1
    this.counts.set(key, count)
    if (count <= this.limit) return { allowed: true }
    return { allowed: false, retryAfter }
  }

  /** Addresses counted in the current window. */
  get size(): number {
    return this.counts.size
  }
}

/** Open connections per product and subject on this gateway (an entry per subject holding one at least: bounded). */
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
    upgrades: new LocalWindows(limits.gatewayIpUpgradesPerMinute, 60_000, limits.gatewayIpTrackedMax),
    connects: new LocalWindows(limits.gatewayIpConnectsPerMinute, 60_000, limits.gatewayIpTrackedMax),
    subjects: new SubjectConnections(limits.gatewayMaxConnectionsPerSubject),
  }
}
