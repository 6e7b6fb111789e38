// Request rate limit per client IP on the public routes, counted in Redis so it holds across every public worker.
import { config } from '../../../shared/config'
import { normalizeIp, peerIp } from '../../../shared/http/serve'
import { redis } from '../../../shared/redis'
import { counted, tooMany } from './errors'

const WINDOW_SECONDS = 60

/**
 * The peer address, or — behind a trusted proxy — the last X-Forwarded-For address: the one that proxy appended for
 * the peer it saw. Earlier entries are whatever the client sent (nginx and cloud load balancers append), so trusting
 * the first would let any client pick its own rate-limit bucket.
 */
export function clientIp(request: Request): string {
  if (config.trustProxy) {
    const last = request.headers.get('x-forwarded-for')?.split(',').at(-1)?.trim()
    // Bounded: the value becomes part of a Redis key, and a proxy never forwards anything longer than an IPv6 address.
    if (last) return normalizeIp(last.slice(0, 64))
  }
  return peerIp(request)
}

/** Redis key of one IP's fixed one-minute window (aligned to epoch time). */
export const ipWindowKey = (ip: string, window: number) => `pub:rl:ip:${ip}:${window}`

/**
 * Counts one request of `ip`; throws 429 `rate_limited` beyond config.realtime.ipRequestsPerMinute in the current
 * minute, with Retry-After = whole seconds until the minute rolls.
 */
export async function checkIpRate(ip: string, now = Date.now()): Promise<void> {
  const windowMs = WINDOW_SECONDS * 1000
  const window = Math.floor(now / windowMs)
  const key = ipWindowKey(ip, window)
  const [[, count]] = (await counted('request rate limit', () => redis().multi().incr(key).expire(key, WINDOW_SECONDS + 5).exec())) as [[null, number], unknown]
  const limit = config.realtime.ipRequestsPerMinute
  if (count > limit) {
    const retryAfter = Math.max(1, Math.ceil(((window + 1) * windowMs - now) / 1000))
    throw tooMany('rate_limited', `More than ${limit} requests per minute from this address`, retryAfter, { limit })
  }
}
