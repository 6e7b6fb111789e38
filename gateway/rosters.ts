// The presence rosters one connection is on: its entry on each, refreshed at half its lifetime while the connection
// lives, so a gateway that dies leaves ghosts for at most one lifetime. Made on the connection's first presence.enter
// (most connections never enter one).
import { ApiError, logUnlessOutage } from '../shared/errors'
import type { Presence } from './ports'

/** The connection as a roster knows it. */
export interface Member {
  productId: string
  /** The token's subject (`ext:<subject>`): another tab of the same subject is not a second member. */
  identity: string
  connectionId: string
}

export class Rosters {
  /** By channel: the entry's lifetime and the timer that refreshes it. */
  private readonly entries = new Map<string, { ttlSeconds: number; refresh: ReturnType<typeof setInterval> }>()

  constructor(private readonly presence: Presence, private readonly member: Member) {}

  /** The lifetime of this connection's entry on the channel's roster, when it has one. */
  ttlOf(channel: string): number | undefined {
    return this.entries.get(channel)?.ttlSeconds
  }

  /**
   * On the channel's roster (or its entry's info and lifetime replaced), then refreshed until it leaves. Throws as
   * Presence.enter does (a full roster, past the fan-out budget, info too large), nothing written or kept.
   */
  async enter(channel: string, info: unknown, ttlSeconds: number): Promise<void> {
    await this.presence.enter({ ...this.member, channel, info, ttlSeconds })
    const entered = this.entries.get(channel)
    if (entered) clearInterval(entered.refresh)
    const refresh = setInterval(() => {
      void this.presence.enter({ ...this.member, channel, ttlSeconds })
        // Refused (a rejoin after expiry past the fan-out budget): the next refresh tries again.
        .catch((error) => error instanceof ApiError || logUnlessOutage('presence refresh failed', error))
    }, Math.max(500, (ttlSeconds * 1000) / 2))
    this.entries.set(channel, { ttlSeconds, refresh })
  }

  /** Off the roster: this connection's entry goes (the identity leaves with its last connection). */
  async leave(channel: string): Promise<void> {
    const entered = this.entries.get(channel)
    if (entered) clearInterval(entered.refresh)
    this.entries.delete(channel)
    await this.presence.leave({ ...this.member, channel })
  }

  /** The connection closed: off every roster (refreshes stop); if Redis cannot be told now, the entries expire by themselves. */
  leaveAll(): void {
    for (const channel of [...this.entries.keys()]) void this.leave(channel).catch((error) => logUnlessOutage('presence leave failed', error))
  }
}
