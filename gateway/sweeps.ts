// The gateway's periodic rounds over what it holds: revoked API keys among its live connections (closed 4001), and
// expired presence entries on the channels its clients subscribe to (their leaves reach the subscribers here).
import { config } from '../shared/config'
import { logUnlessOutage } from '../shared/errors'
import { namespaceOf } from '../shared/realtime/names'
import { everyUnlessRunning } from './rounds'
import type { Connection } from './client'
import { DISCONNECTS } from './disconnect'
import type { Hub } from './hub'
import type { PolicySource, Presence, RevocationSource } from './ports'

/** How often the live connections' API keys are checked for a revocation this gateway may have missed. */
const REVOCATION_SWEEP_MS = Math.max(100, config.realtime.gatewayRevocationSweepMs)

/**
 * Revocations reach live connections two ways. Heard: an invalidation names the key, and its connections close at once.
 * Missed (announced while Redis was unreachable or the subscription dropping, or never announced because Redis was down
 * when the key was revoked): found by asking PostgreSQL, the authority, about the live connections' keys, each time the
 * invalidations are back and every REVOCATION_SWEEP_MS whatever Redis does.
 */
export class RevocationSweep {
  private readonly timer: ReturnType<typeof setInterval>
  private stopped = false

  constructor(private readonly connections: ReadonlySet<Connection>, private readonly revocations: RevocationSource) {
    // A sweep still running (PostgreSQL slow) when the next is due is skipped, not doubled.
    this.timer = everyUnlessRunning(REVOCATION_SWEEP_MS, () => this.sweep())
  }

  /** An invalidation said the key is revoked: it ends the tokens it issued, live connections included. */
  heard(keyId: string): void {
    this.revocations.markRevoked(keyId)
    for (const connection of this.connections) {
      if (connection.claims?.akid === keyId) connection.disconnect(DISCONNECTS.invalidToken, 'api key revoked')
    }
  }

  /**
   * After a gap in invalidations the cached "not revoked" answers may be wrong: they are dropped, and the live
   * connections swept. PostgreSQL may be unreachable too: keep trying for a minute, after that the periodic sweep takes over.
   */
  async afterGap(): Promise<void> {
    this.revocations.forgetActive()
    for (const until = Date.now() + 60_000; !this.stopped && !(await this.sweep()) && Date.now() < until; ) await Bun.sleep(500)
  }

  stop(): void {
    this.stopped = true
    clearInterval(this.timer)
  }

  /** Asks PostgreSQL about every live connection's key; false when it could not answer. */
  private async sweep(): Promise<boolean> {
    try {
      const revoked = await this.revocations.revokedAmong([...this.connections].flatMap((c) => (c.claims ? [c.claims.akid] : [])))
      for (const keyId of revoked) this.revocations.markRevoked(keyId)
      for (const connection of [...this.connections]) {
        if (connection.claims && revoked.has(connection.claims.akid)) connection.disconnect(DISCONNECTS.invalidToken, 'api key revoked')
      }
      return true
    } catch (error) {
      logUnlessOutage('revocation sweep failed', error)
      return false
    }
  }
}

/**
 * Expired presence entries (a dead gateway's connections) leave, and their leaves reach the subscribers here. Only
 * channels whose namespace has presence can have a roster; a round still running when the next is due is not doubled.
 * Returns the round's timer.
 */
export function startPresenceSweep(hub: Hub<Connection>, policies: PolicySource, presence: Presence): ReturnType<typeof setInterval> {
  const channelsWithPresence = async () => {
    const known = new Map<string, { namespaces: ReadonlyMap<string, { presence: boolean }> } | null>()
    const out: { productId: string; channel: string }[] = []
    for (const here of hub.channelsHere()) {
      if (!known.has(here.productId)) known.set(here.productId, await policies.policies(here.productId).catch(() => null))
      const policy = known.get(here.productId)
      // Policies unknown now (the database is unreachable): sweep the channel anyway, as a roster may exist.
      if (!policy || policy.namespaces.get(namespaceOf(here.channel))?.presence) out.push(here)
    }
    return out
  }
  return everyUnlessRunning(config.realtime.gatewayPresenceSweepMs, () => channelsWithPresence()
    .then((channels) => presence.sweep(channels))
    .catch((error) => logUnlessOutage('presence sweep failed', error)))
}
