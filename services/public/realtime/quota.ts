// Publish quota per product: fixed windows aligned to epoch time, counted in Redis across every public worker.
// Only crossing the hard limit (burst + 2 x sustained x window) is refused; the sustained rate is never enforced by itself.
import { config } from '../../../shared/config'
import { hitWindow, tooMany } from '../../../shared/fixed-window'

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

const quotaPrefix = (productId: string) => `pub:quota:${productId}`

/** Redis key of one product's window. */
export const quotaKey = (productId: string, window: number) => `${quotaPrefix(productId)}:${window}`

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
  const { count, retryAfter } = await hitWindow(quotaPrefix(productId), limits.windowSeconds, 'publish quota', now)
  const limit = hardLimit(limits)
  return { allowed: count <= limit, count, limit, retryAfter }
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
