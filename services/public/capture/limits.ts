// The capture route's bounds beyond the body: requests per client IP (a window of its own) and events per key per
// second, both counted in Redis across every public worker (per worker while Redis cannot count, as every fixed window).
import { config } from '../../../shared/config'
import { hitWindow, tooMany } from '../../../shared/fixed-window'
import type { IpRule } from '../http/rate-limit'

/**
 * CAPTURE_IP_RATE_LIMIT requests a minute per client IP, apart from PUBLIC_IP_RATE_LIMIT: many visitors behind one
 * address (an office, a carrier's NAT) flush their pages' events, and that must not spend a developer's Realtime calls.
 */
export const CAPTURE_IP_RULE: IpRule = { prefix: 'pub:rl:capture-ip', perMinute: () => config.capture.ipRequestsPerMinute, what: 'capture rate limit' }

/**
 * Counts a batch's events against its key's one-second window (Redis `pub:rl:capture-key:<keyId>:<second>`); past
 * CAPTURE_KEY_EVENTS_PER_SECOND the whole batch is refused with 429 and nothing is stored (a batch is all or nothing).
 */
export async function limitKeyEvents(keyId: string, events: number, now = Date.now()): Promise<void> {
  const limit = config.capture.keyEventsPerSecond
  const { count, retryAfter } = await hitWindow(`pub:rl:capture-key:${keyId}`, 1, 'capture key event rate', now, events)
  if (count > limit) {
    throw tooMany('rate_limited', `More than ${limit} events a second for this capture key; retry after ${retryAfter} s`, retryAfter, { limit })
  }
}
