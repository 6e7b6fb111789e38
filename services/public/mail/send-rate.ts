// The per-product send rate on POST /emails, counted in Redis across every public worker (per worker while Redis
// cannot count, as every fixed window here). Resend's name for the error: `rate_limit_exceeded`.
import { config } from '../../../shared/config'
import { hitWindow, tooMany } from '../../../shared/fixed-window'

export async function checkSendRate(productId: string, now = Date.now()): Promise<void> {
  const limit = config.mail.sendRatePerSecond
  const { count, retryAfter } = await hitWindow(`mail:rate:${productId}`, 1, 'mail send rate', now)
  if (count > limit) throw tooMany('rate_limit_exceeded', `More than ${limit} emails a second for this product; retry after ${retryAfter} s`, retryAfter, { limit })
}
