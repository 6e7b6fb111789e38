// Request rate limit per client IP on the public routes, counted in Redis so it holds across every public worker.
import { config } from '../../../shared/config'
import { hitWindow, tooMany, windowOf, type Window } from '../../../shared/fixed-window'

const WINDOW_SECONDS = 60

/** One per-IP limit: its Redis prefix, its requests per minute, and its name in logs (fixed-window.ts's `what`). */
export interface IpRule {
  prefix: string
  perMinute: () => number
  what: string
}

/** Every public route's (PUBLIC_IP_RATE_LIMIT), except capture's, which counts in a window of its own. */
export const PUBLIC_IP_RULE: IpRule = { prefix: 'pub:rl:ip', perMinute: () => config.realtime.ipRequestsPerMinute, what: 'request rate limit' }

/** The 429 `rate_limited` of a request past the limit, with Retry-After = whole seconds until the minute rolls. */
export const rateLimited = (retryAfter: number, limit = config.realtime.ipRequestsPerMinute) =>
  tooMany('rate_limited', `More than ${limit} requests per minute from this address`, retryAfter, { limit })

/**
 * Counts one request of `ip`; throws 429 `rate_limited` beyond the rule's limit (PUBLIC_IP_RATE_LIMIT by default) in
 * the current minute, with Retry-After = whole seconds until the minute rolls.
 */
export async function checkIpRate(ip: string, now = Date.now(), rule: IpRule = PUBLIC_IP_RULE): Promise<void> {
  const { count, retryAfter } = await hitWindow(`${rule.prefix}:${ip}`, WINDOW_SECONDS, rule.what, now)
  const limit = rule.perMinute()
  if (count > limit) throw rateLimited(retryAfter, limit)
}

/**
 * One request's IP limit, counted exactly once: by `check()` (hitWindow), or by a script of the route's own that
 * counts its window itself before anything else it does (`take()`; while Redis cannot run it, the route counts it in
 * the worker with `countWhileDown`, under `what`, as hitWindow would).
 * Lets the publish route count it in the same round trip as its quota and publish; see ./endpoint.ts.
 */
export class IpLimit {
  readonly limit: number
  /** The limiter's name in the fallback log and the worker's local counts: the same as checkIpRate's. */
  readonly what: string
  private counted = false
  constructor(readonly ip: string, private readonly rule: IpRule = PUBLIC_IP_RULE) {
    this.limit = rule.perMinute()
    this.what = rule.what
  }

  /** Whether the request has been counted. */
  get done(): boolean {
    return this.counted
  }

  /** Counts the request now (once); throws 429 `rate_limited` past the limit. */
  async check(): Promise<void> {
    if (this.counted) return
    this.counted = true
    await checkIpRate(this.ip, Date.now(), this.rule)
  }

  /** The 429 of this limit, for a script that counted the request and refused it. */
  refuse(retryAfter: number) {
    return rateLimited(retryAfter, this.limit)
  }

  /** The window a script will count the request in; the request counts as counted from here on. */
  take(now = Date.now()): Window {
    if (this.counted) throw new Error('the IP limit of this request is already counted')
    this.counted = true
    return windowOf(`${this.rule.prefix}:${this.ip}`, WINDOW_SECONDS, now)
  }
}
