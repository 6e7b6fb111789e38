// A circuit breaker for one backing service: after a connection failure, calls fail at once for a cool-down instead of
// queueing behind a dead link; then one call at a time probes (half-open), and a success closes it. Used for
// PostgreSQL (shared/db/deadline.ts) and Redis (shared/redis/guard.ts).
import { log } from './log'

/** What shared/metrics/breakers.ts reads at scrape time, by backend (the service's first word: `postgres`, `redis`). */
export interface BreakerCounts {
  /** Breakers open now and not disposed (a Redis Cluster has one per node, besides the client's own). */
  open: Map<string, number>
  /** Breaker openings since the process started: each breaker's own (pools, cluster nodes), so one outage counts several. */
  opened: Map<string, number>
}

export const breakerCounts: BreakerCounts = { open: new Map(), opened: new Map() }

const add = (counts: Map<string, number>, backend: string, n: number) => counts.set(backend, (counts.get(backend) ?? 0) + n)

/** Plain state (the clock is a parameter), so it is unit-testable; it logs only its transitions. */
export class Breaker {
  /** 0 while closed; else when the cool-down ends. */
  private openUntil = 0
  /** While open: until when the probe let through last may still answer before another is let through. */
  private probeUntil = 0
  /** Set by dispose(): the breaker no longer counts in breakerCounts, whatever it is told after. */
  private disposed = false
  private readonly backend: string
  constructor(
    /** The service, for logs. */
    private readonly service: string,
    private readonly coolDownMs: number,
    private readonly now: () => number = Date.now,
  ) {
    this.backend = service.split(' ')[0]!
  }

  /**
   * May a call go to the service now? Closed: yes. Open: no during the cool-down; after it, one call (the probe) and then
   * no again until that call reports or one more cool-down passes, so an outage never makes every caller wait.
   */
  tryPass(): boolean {
    if (this.openUntil === 0) return true
    const now = this.now()
    if (now < this.openUntil || now < this.probeUntil) return false
    this.probeUntil = now + this.coolDownMs
    return true
  }

  get isOpen(): boolean {
    return this.openUntil !== 0
  }

  failed(): void {
    if (this.openUntil === 0) {
      log('warn', `${this.service} unreachable: refusing new work between probes`, { coolDownMs: this.coolDownMs })
      if (!this.disposed) {
        add(breakerCounts.open, this.backend, 1)
        add(breakerCounts.opened, this.backend, 1)
      }
    }
    this.openUntil = this.now() + this.coolDownMs
    this.probeUntil = 0
  }

  succeeded(): void {
    if (this.openUntil !== 0) {
      log('info', `${this.service} reachable again`)
      if (!this.disposed) add(breakerCounts.open, this.backend, -1)
    }
    this.openUntil = 0
    this.probeUntil = 0
  }

  /**
   * The breaker is dropped (a Redis Cluster node gone after a failover): it takes back its open count, since no success
   * will ever close it, and counts nothing after (a command still in flight may report to it).
   */
  dispose(): void {
    if (this.disposed) return
    this.disposed = true
    if (this.openUntil !== 0) add(breakerCounts.open, this.backend, -1)
  }

  /** Whole seconds until the next probe may be let through (at least 1): the Retry-After of a refusal. */
  get retryAfter(): number {
    return Math.max(1, Math.ceil((Math.max(this.openUntil, this.probeUntil) - this.now()) / 1000))
  }
}
