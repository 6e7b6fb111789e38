// Publish quota per product: fixed windows aligned to epoch time, counted in Redis across every public worker.
// Only crossing the hard limit (burst + 2 x sustained x window) is refused; the sustained rate is never enforced by itself.
import { config } from '../../../shared/config'
import { redis } from '../../../shared/redis'
import { counted, tooMany } from './errors'

export interface QuotaLimits {
  windowSeconds: number
  sustainedPerSecond: number
  burst: number
}

export const DEFAULT_LIMITS: QuotaLimits = {
  windowSeconds: config.realtime.quotaWindowSeconds,
  sustainedPerSecond: config.realtime.quotaSustainedPerSecond,
  burst: config.realtime.quotaBurst,
}

/** 1 100 publishes per 10-second window with the defaults. */
export const hardLimit = (l: QuotaLimits) => l.burst + 2 * l.sustainedPerSecond * l.windowSeconds

/** Redis key of one product's window. */
export const quotaKey = (productId: string, window: number) => `pub:quota:${productId}:${window}`

export interface QuotaResult {
  allowed: boolean
  /** Publishes counted in this window, this one included. */
  count: number
  limit: number
  /** Whole seconds until the window rolls, at least 1. */
  retryAfter: number
}

/**
 * Counts one publish of the product (INCR, and EXPIRE so windows clean themselves up) and says whether it fits.
 * @example const { allowed, retryAfter } = await checkPublishQuota(productId)
 */
export async function checkPublishQuota(productId: string, now = Date.now(), limits = DEFAULT_LIMITS): Promise<QuotaResult> {
  const windowMs = limits.windowSeconds * 1000
  const window = Math.floor(now / windowMs)
  const key = quotaKey(productId, window)
  const [[, count]] = (await counted('publish quota', () => redis().multi().incr(key).expire(key, limits.windowSeconds + 5).exec())) as [[null, number], unknown]
  const limit = hardLimit(limits)
  return { allowed: count <= limit, count, limit, retryAfter: Math.max(1, Math.ceil(((window + 1) * windowMs - now) / 1000)) }
}

/** checkPublishQuota, throwing 429 `quota_exceeded` with Retry-After past the hard limit. */
export async function enforcePublishQuota(productId: string): Promise<void> {
  const result = await checkPublishQuota(productId)
  if (!result.allowed) {
    throw tooMany('quota_exceeded', `Publish quota of ${result.limit} per ${DEFAULT_LIMITS.windowSeconds} s exceeded`, result.retryAfter, {
      limit: result.limit, windowSeconds: DEFAULT_LIMITS.windowSeconds,
    })
  }
}
