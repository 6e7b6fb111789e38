// The platform API's own limits, applied once in invoke() so REST and MCP alike: request rates per operation class, per
// credential and per organization, and analytics queries running at once per organization on this worker.
import { rateClassOf, type AnyOperation, type Principal } from '../../shared/catalog/operation'
import { config } from '../../shared/config'
import { limitCredentialRate, limitOrganizationRate } from '../../shared/platform-rates'
import { Slots } from './slots'
import { countRefusal } from './analytics/prometheus'
import { tooManyQueries } from './analytics/semantic/plan'

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

/** Analytics operations running now on this worker, per organization and in all (key WORKER). */
const organizationSlots = new Slots()
const workerSlots = new Slots()
const WORKER = 'worker'

const busy = (message: string, limit: number, scope: 'organization' | 'worker') => {
  countRefusal(scope)
  return tooManyQueries(message, { limit, scope })
}

/**
 * Runs an analytics operation in one of its organization's slots on this worker and one of the worker's; with none
 * free, 429 too_many_queries with Retry-After 1, as the per-product bound answers. The analytics pool holds 4
 * connections per worker: an organization takes at most ANALYTICS_MAX_CONCURRENT_PER_ORGANIZATION (3), so it leaves one
 * for the others, and the worker runs at most ANALYTICS_MAX_CONCURRENT_PER_WORKER (4) however many organizations ask (one
 * person's several organizations included), so a query beyond is refused at once rather than queued inside the pool
 * behind others' statement timeouts.
 */
export async function withOrganizationSlot<T>(organizationId: string, run: () => Promise<T>): Promise<T> {
  const { maxConcurrentPerOrganization: perOrganization, maxConcurrentPerWorker: perWorker } = config.analytics
  return organizationSlots.run(organizationId, perOrganization,
    (running) => busy(`This organization already runs ${running} analytics queries on this worker; retry when one has finished`, perOrganization, 'organization'),
    () => workerSlots.run(WORKER, perWorker,
      (running) => busy(`This worker already runs ${running} analytics queries; retry when one has finished`, perWorker, 'worker'),
      run))
}
