// Publish quota per product: fixed windows aligned to epoch time, counted in Redis across every public worker.
// Only crossing the hard limit (burst + 2 x sustained x window) is refused; the sustained rate is never enforced by itself.
import { config } from '../config'
import { hitWindow, tooMany, windowOf, type Window } from '../fixed-window'

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

/** What the quota is called in hitWindow's fallback log and local counts. */
export const QUOTA_WHAT = 'publish quota'

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
 * Counts `amount` publishes of the product (INCRBY, and EXPIRE so windows clean themselves up: a broadcast on a cluster
 * counts its channels at once) and says whether the last of them fits.
 * @example const { allowed, retryAfter } = await countPublishes(productId, 1)
 */
export async function countPublishes(productId: string, amount: number, now = Date.now(), limits = DEFAULT_LIMITS): Promise<QuotaResult> {
  const { count, retryAfter } = await hitWindow(quotaPrefix(productId), limits.windowSeconds, QUOTA_WHAT, now, amount)
  const limit = hardLimit(limits)
  return { allowed: count <= limit, count, limit, retryAfter }
}

/** Counts one publish of the product and says whether it fits. */
export const checkPublishQuota = (productId: string, now = Date.now(), limits = DEFAULT_LIMITS): Promise<QuotaResult> =>
  countPublishes(productId, 1, now, limits)

/** The 429 `quota_exceeded` of a publish past the hard limit. */
export const quotaExceeded = (retryAfter: number, limit = hardLimit(DEFAULT_LIMITS)) =>
  tooMany('quota_exceeded', `Publish quota of ${limit} per ${DEFAULT_LIMITS.windowSeconds} s exceeded`, retryAfter, {
    limit, windowSeconds: DEFAULT_LIMITS.windowSeconds,
  })

/**
 * The product's current window and hard limit, for a script that counts the publish itself (the same key and expiry as
 * checkPublishQuota, so every worker and path counts the one counter: the quota stays exact across workers).
 */
export const quotaWindow = (productId: string, now = Date.now()): { window: Window; limit: number } =>
  ({ window: windowOf(quotaPrefix(productId), DEFAULT_LIMITS.windowSeconds, now), limit: hardLimit(DEFAULT_LIMITS) })
