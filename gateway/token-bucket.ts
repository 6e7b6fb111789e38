// A token bucket: `rate` tokens a second, at most `burst` saved up. Pure (the clock is a parameter): the per-connection
// client-event budget (5 a second, burst 10) is tested without sockets.

export class TokenBucket {
  private tokens: number
  private last: number

  constructor(private readonly rate: number, private readonly burst: number, now = Date.now()) {
    this.tokens = burst
    this.last = now
  }

  /** Takes one token if there is one. */
  take(now = Date.now()): boolean {
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.rate)
    this.last = now
    if (this.tokens < 1) return false
    this.tokens -= 1
    return true
  }
}
