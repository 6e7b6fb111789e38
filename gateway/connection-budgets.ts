// One connection's own rate limits, each a token bucket made on first use (most connections use few): client events,
// reads that cost Redis work, presence writes. Checked before the work, so a flood costs nothing else; a refusal is
// answered `rate_limited` (temporary) and the connection stays.
import { config } from '../shared/config'
import { TokenBucket } from './token-bucket'

const BUDGETS = {
  /** The spec's limit: 5 a second, burst 10. */
  event: { rate: () => 5, burst: () => 10, what: 'client events', which: '' },
  /** GATEWAY_READS_PER_SECOND, GATEWAY_READ_BURST. */
  read: {
    rate: () => config.realtime.gatewayReadsPerSecond, burst: () => config.realtime.gatewayReadBurst,
    what: 'reads', which: ': history, subscribe with a cursor, presence.read',
  },
  /**
   * GATEWAY_PRESENCE_WRITES_PER_SECOND, GATEWAY_PRESENCE_WRITE_BURST: a loop of enter and leave costs Redis nothing
   * past it. `presence.leave` takes none: it needs an entry made by an enter, so the bucket bounds it too, and a client
   * that wants to leave is never held on the roster.
   */
  presenceWrite: {
    rate: () => config.realtime.gatewayPresenceWritesPerSecond, burst: () => config.realtime.gatewayPresenceWriteBurst,
    what: 'presence writes', which: ': presence.enter, presence.update',
  },
} as const

export type Budget = keyof typeof BUDGETS

export class ConnectionBudgets {
  private readonly buckets: Partial<Record<Budget, TokenBucket>> = {}

  /** Takes one from the budget: null when allowed, else why not (the error frame's message). */
  take(budget: Budget): string | null {
    const { rate, burst, what, which } = BUDGETS[budget]
    if ((this.buckets[budget] ??= new TokenBucket(rate(), burst())).take()) return null
    return `more than ${rate()} ${what} a second (burst ${burst()}) on this connection${which}`
  }
}
