// Request rate limit per client IP on the public routes, counted in Redis so it holds across every public worker.
import { config } from '../../../shared/config'
import { hitWindow, tooMany } from '../../../shared/fixed-window'

const WINDOW_SECONDS = 60

/**
 * Counts one request of `ip`; throws 429 `rate_limited` beyond config.realtime.ipRequestsPerMinute in the current
 * minute, with Retry-After = whole seconds until the minute rolls.
 */
export async function checkIpRate(ip: string, now = Date.now()): Promise<void> {
  const { count, retryAfter } = await hitWindow(`pub:rl:ip:${ip}`, WINDOW_SECONDS, 'request rate limit', now)
  const limit = config.realtime.ipRequestsPerMinute
  if (count > limit) {
    throw tooMany('rate_limited', `More than ${limit} requests per minute from this address`, retryAfter, { limit })
  }
}
