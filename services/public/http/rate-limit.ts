// Request rate limit per client IP on the public routes, counted in Redis so it holds across every public worker.
import { config } from '../../../shared/config'
import { hitWindow, tooMany, windowOf, type Window } from '../../../shared/fixed-window'

const WINDOW_SECONDS = 60
const ipPrefix = (ip: string) => `pub:rl:ip:${ip}`
const WHAT = 'request rate limit'

/** The 429 `rate_limited` of a request past the limit, with Retry-After = whole seconds until the minute rolls. */
export const rateLimited = (retryAfter: number, limit = config.realtime.ipRequestsPerMinute) =>
  tooMany('rate_limited', `More than ${limit} requests per minute from this address`, retryAfter, { limit })

/**
 * Counts one request of `ip`; throws 429 `rate_limited` beyond config.realtime.ipRequestsPerMinute in the current
 * minute, with Retry-After = whole seconds until the minute rolls.
 */
export async function checkIpRate(ip: string, now = Date.now()): Promise<void> {
  const { count, retryAfter } = await hitWindow(ipPrefix(ip), WINDOW_SECONDS, WHAT, now)
  if (count > config.realtime.ipRequestsPerMinute) throw rateLimited(retryAfter)
}

/**
 * One request's IP limit, counted exactly once: by `check()` (hitWindow), or by a script of the route's own that
 * counts its window itself before anything else it does (`take()`; while Redis cannot run it, the route counts it in
 * the worker with `countWhileDown`, under `what`, as hitWindow would).
 * Lets the publish route count it in the same round trip as its quota and publish; see ./endpoint.ts.
 */
export class IpLimit {
  readonly limit = config.realtime.ipRequestsPerMinute
  /** The limiter's name in the fallback log and the worker's local counts: the same as checkIpRate's. */
  readonly what = WHAT
  private counted = false
  constructor(readonly ip: string) {}

  /** Whether the request has been counted. */
  get done(): boolean {
    return this.counted
  }

  /** Counts the request now (once); throws 429 `rate_limited` past the limit. */
  async check(): Promise<void> {
    if (this.counted) return
    this.counted = true
    await checkIpRate(this.ip)
  }

  /** The 429 of this limit, for a script that counted the request and refused it. */
  refuse(retryAfter: number) {
    return rateLimited(retryAfter, this.limit)
  }

  /** The window a script will count the request in; the request counts as counted from here on. */
  take(now = Date.now()): Window {
    if (this.counted) throw new Error('the IP limit of this request is already counted')
    this.counted = true
    return windowOf(ipPrefix(this.ip), WINDOW_SECONDS, now)
  }
}
