// The platform API's own limits, applied once in invoke() so REST and MCP alike: request rates per operation class, per
// credential and per organization, and analytics queries running at once per organization on this worker.
import { rateClassOf, type AnyOperation, type Principal } from '../../shared/catalog/operation'
import { config } from '../../shared/config'
import { ApiError } from '../../shared/errors'
import { limitCredentialRate, limitOrganizationRate } from '../../shared/platform-rates'

/**
 * The credential a request spends: a platform key, or the user behind a login session. A user's sessions share one
 * budget, since anyone with a password can open more sessions.
 */
const credentialOf = (principal: Principal) => (principal.kind === 'platform_key' ? `key:${principal.keyId}` : `user:${principal.userId}`)

/** Counts one request of the operation's class against the credential's window (shared/platform-rates.ts). */
export async function limitCredential(op: AnyOperation, principal: Principal): Promise<void> {
  await limitCredentialRate(rateClassOf(op), credentialOf(principal))
}

/** Counts one request against the organization's window, once the caller is known to reach the organization. */
export async function limitOrganization(op: AnyOperation, organizationId: string): Promise<void> {
  await limitOrganizationRate(rateClassOf(op), organizationId)
}

/** Analytics operations running now on this worker, per organization (config.analytics.maxConcurrentPerOrganization). */
const runningByOrganization = new Map<string, number>()

/**
 * Runs an analytics operation in one of its organization's slots on this worker; with none free, 429 too_many_queries
 * with Retry-After 1, as the per-product bound answers. The analytics pool holds 4 connections per worker: the default
 * of 3 leaves one for every other organization.
 */
export async function withOrganizationSlot<T>(organizationId: string, run: () => Promise<T>): Promise<T> {
  const limit = config.analytics.maxConcurrentPerOrganization
  const running = runningByOrganization.get(organizationId) ?? 0
  if (running >= limit) {
    throw new ApiError(429, 'too_many_queries',
      `This organization already runs ${running} analytics queries on this worker; retry when one has finished`,
      { limit, scope: 'organization', retryAfter: 1 }, { 'retry-after': '1' })
  }
  runningByOrganization.set(organizationId, running + 1)
  try {
    return await run()
  } finally {
    const left = (runningByOrganization.get(organizationId) ?? 1) - 1
    if (left > 0) runningByOrganization.set(organizationId, left)
    else runningByOrganization.delete(organizationId)
  }
}
