// A circuit breaker for one backing service: after a connection failure, new work fails at once for a cool-down instead
// of queueing behind a dead link; then the next call probes, and a success closes it. Used for PostgreSQL
// (shared/db/deadline.ts) and Redis (shared/redis.ts).
import { log } from './log'

/** Plain state (the clock is a parameter), so it is unit-testable; it logs only its transitions. */
export class Breaker {
  private openUntil = 0
  private down = false
  constructor(
    /** The service, for logs. */
    private readonly service: string,
    private readonly coolDownMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  get isOpen(): boolean {
    return this.now() < this.openUntil
  }

  failed(): void {
    this.openUntil = this.now() + this.coolDownMs
    if (!this.down) log('warn', `${this.service} unreachable: refusing new work between probes`, { coolDownMs: this.coolDownMs })
    this.down = true
  }

  succeeded(): void {
    this.openUntil = 0
    if (this.down) log('info', `${this.service} reachable again`)
    this.down = false
  }

  /** Whole seconds until the next probe is let through (at least 1): the Retry-After of a refusal. */
  get retryAfter(): number {
    return Math.max(1, Math.ceil((this.openUntil - this.now()) / 1000))
  }
}
