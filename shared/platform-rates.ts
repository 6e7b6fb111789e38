// Request rates per operation class (read, write, expensive, analytics), per credential and per organization: the one
// counter the platform API (services/api/limits.ts) and the public Mail management routes both spend.
import type { RateClass } from './catalog/operation'
import { config } from './config'
import { sql } from './db/client'
import { hitWindow, tooMany } from './fixed-window'

const WINDOW_SECONDS = 60

const CLASS_NAMES: Record<RateClass, string> = {
  read: 'reads', write: 'writes', expensive: 'expensive operations', analytics: 'analytics runs',
}

/**
 * Counts one request of `rateClass` against a credential's window (Redis key `api:rl:<class>:<credential>:<minute>`,
 * the credential `key:<platformKeyId>`, `user:<userId>` or `mailkey:<mailKeyId>`); beyond the limit, 429 rate_limited
 * naming the class and the limit.
 */
export async function limitCredentialRate(rateClass: RateClass, credential: string): Promise<void> {
  await hit(rateClass, 'credential', `api:rl:${rateClass}:${credential}`, config.platformRates.credential[rateClass], 'this credential')
}

/**
 * Counts one request against the organization's window (`api:rl:<class>:org:<organizationId>:<minute>`). Called only
 * once the caller is known to reach the organization: a stranger naming it must not spend its budget.
 */
export async function limitOrganizationRate(rateClass: RateClass, organizationId: string): Promise<void> {
  await hit(rateClass, 'organization', `api:rl:${rateClass}:org:${organizationId}`, config.platformRates.organization[rateClass],
    'this organization')
}

/** The organization owning a product (the public Mail routes know only the product their key belongs to). */
export async function organizationOfProduct(productId: string): Promise<string | null> {
  const [row] = await sql`select organization_id from products where id = ${productId}`
  return (row?.organization_id as string | undefined) ?? null
}

async function hit(rateClass: RateClass, scope: 'credential' | 'organization', prefix: string, limit: number, whose: string) {
  const { count, retryAfter } = await hitWindow(prefix, WINDOW_SECONDS, `platform ${scope} rate limit`)
  if (count > limit) {
    throw tooMany('rate_limited', `More than ${limit} ${CLASS_NAMES[rateClass]} per minute for ${whose}; retry after ${retryAfter} s`,
      retryAfter, { class: rateClass, scope, limit, windowSeconds: WINDOW_SECONDS })
  }
}
