// Fixed-window counters in Redis, shared by every worker: request rate limits and the publish quota.
import { ApiError, unavailable } from './errors'
import { describeError, log } from './log'
import { redis } from './redis'

export interface WindowCount {
  /** Hits counted in the current window, this one included. */
  count: number
  /** Whole seconds until the window rolls, at least 1: the Retry-After of a refusal. */
  retryAfter: number
}

/**
 * Counts one hit in the window of `windowSeconds` (aligned to epoch time) that `now` falls in. The Redis key is
 * `<prefix>:<window number>` and expires shortly after its window, so counters clean themselves up.
 * A Redis failure is 503 (the limit cannot be checked): never a 500, never a silent pass.
 */
export async function hitWindow(prefix: string, windowSeconds: number, what: string, now = Date.now()): Promise<WindowCount> {
  const windowMs = windowSeconds * 1000
  const window = Math.floor(now / windowMs)
  const key = `${prefix}:${window}`
  let count: number
  try {
    const [[, counted]] = (await redis().multi().incr(key).expire(key, windowSeconds + 5).exec()) as [[null, number], unknown]
    count = counted
  } catch (error) {
    log('error', `${what} unavailable`, describeError(error))
    throw unavailable(`The ${what} cannot be checked right now; retry shortly`)
  }
  return { count, retryAfter: Math.max(1, Math.ceil(((window + 1) * windowMs - now) / 1000)) }
}

/** 429 with Retry-After in whole seconds (at least 1). */
export const tooMany = (code: 'quota_exceeded' | 'rate_limited', message: string, retryAfter: number, extra: Record<string, unknown> = {}) =>
  new ApiError(429, code, message, { retryAfter, ...extra }, { 'retry-after': String(retryAfter) })
