// The gateway's periodic rounds over what it holds: revoked token credentials among its live connections (closed 4001), and
// expired presence entries on the channels its clients subscribe to (their leaves reach the subscribers here).
import { config } from '../shared/config'
import { logUnlessOutage } from '../shared/errors'
import { consoleSubject } from '../shared/realtime/console-identity'
import { namespaceOf } from '../shared/realtime/names'
import { isRevokedIn } from '../shared/realtime/revocations'
import type { Claims } from '../shared/realtime/tokens'
import { everyUnlessRunning } from './rounds'
import type { Connection } from './client'
import type { CredentialIndex } from './credential-index'
import { DISCONNECTS, revokedReason } from './disconnect'
import type { Hub } from './hub'
import type { PolicySource, Presence, RevocationSource } from './ports'

/** How often the live connections' token credentials are checked for a revocation this gateway may have missed. */
const REVOCATION_SWEEP_MS = Math.max(100, config.realtime.gatewayRevocationSweepMs)

/**
 * Revocations reach live connections two ways. Heard: an invalidation names the credential (an API key, a login
 * session, a platform key), and its connections close at once; or names a user removed from an organization, and the
 * console connections of that user are checked at once. Missed (announced while Redis was unreachable or the
 * subscription dropping, or never announced because Redis was down at the time): found by asking PostgreSQL, the
 * authority, about the live connections' credentials, each time the invalidations are back and every
 * REVOCATION_SWEEP_MS whatever Redis does.
 */
export class RevocationSweep {
  private readonly timer: ReturnType<typeof setInterval>
  private stopped = false

  constructor(
    private readonly connections: ReadonlySet<Connection>,
    private readonly credentials: CredentialIndex<Connection>,
    private readonly revocations: RevocationSource,
  ) {
    // A sweep still running (PostgreSQL slow) when the next is due is skipped, not doubled.
    this.timer = everyUnlessRunning(REVOCATION_SWEEP_MS, () => this.sweep())
  }

  /**
   * An invalidation said the credential ended: it ends the tokens it asked for, live connections included. Every logout
   * on the platform is one: a credential no connection here holds costs a map lookup, not a walk of the connections.
   */
  heard(akid: string): void {
    const holders = this.credentials.holders(akid)
    this.revocations.markRevoked(akid, holders.length > 0)
    for (const connection of holders) {
      if (connection.claims?.akid === akid) connection.disconnect(DISCONNECTS.invalidToken, revokedReason(connection.claims))
    }
  }

  /**
   * An invalidation said the user left an organization: the products their sessions reach changed. The cached answers
   * about their sessions are dropped (no other: removals come as fast as an owner can send them, and must not empty
   * the cache of every product) and their console connections asked about now.
   */
  async memberRemoved(userId: string): Promise<void> {
    this.revocations.forgetUser(userId)
    const subject = `ext:${consoleSubject(userId)}`
    await this.sweep((claims) => claims.sub === subject)
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

  /** Asks PostgreSQL about the live connections' credentials (those `which` picks); false when it could not answer. */
  private async sweep(which: (claims: Claims) => boolean = () => true): Promise<boolean> {
    try {
      const swept = [...this.connections].filter((c) => c.claims && which(c.claims))
      if (swept.length === 0) return true
      const answer = await this.revocations.revokedAmong(swept.map((c) => c.claims!))
      this.revocations.remember(answer)
      for (const connection of swept) {
        const claims = connection.claims
        if (claims && isRevokedIn(answer, claims)) connection.disconnect(DISCONNECTS.invalidToken, revokedReason(claims))
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
