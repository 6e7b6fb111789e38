// Namespace policies, grants and payload storage of a product, cached per worker and dropped on invalidation.
import { config } from '../../../shared/config'
import { sql } from '../../../shared/db/client'
import { unavailable } from '../../../shared/errors'
import { describeError, log } from '../../../shared/log'
import type { HistoryPolicy as BrokerHistoryPolicy } from '../../../shared/realtime/broker'
import type { Op } from '../../../shared/realtime/names'

/** A namespace's policy in the shape allowedOps() reads, plus the broker's history policy. */
export interface NamespacePolicy {
  name: string
  presence: boolean
  clientEvents: boolean
  history: { ttlSeconds: number; size: number } | null
  /** What the broker needs: 0/0 when no history is kept. */
  broker: BrokerHistoryPolicy
}

/** Everything the public routes need to know about one product's realtime configuration. */
export interface ProductPolicies {
  namespaces: Map<string, NamespacePolicy>
  grants: { pattern: string; ops: Op[] }[]
  /** The bucket of provisioned payload storage, or null. */
  payloadBucket: string | null
}

const cache = new Map<string, { value: ProductPolicies; until: number }>()
// Bumped by every invalidation and by every switch of caching: a load that started before one must not store what it
// read. One counter for all products (as in api-keys.ts), so nothing grows with the number of products ever changed.
let generation = 0
// Off until this worker listens for invalidations (see api-keys.ts).
let caching = false

/** Turns the cache on (only while subscribed to invalidations) or off; either way it starts empty. */
export function setPolicyCaching(on: boolean): void {
  caching = on
  forgetAllProducts()
}

/** Drops a product's cached policies; called for every `namespaces` and `payload_storage` invalidation message. */
export function forgetProduct(productId: string): void {
  generation++
  cache.delete(productId)
}

export function forgetAllProducts(): void {
  generation++
  cache.clear()
}

async function load(productId: string): Promise<ProductPolicies> {
  const [namespaces, grants, storage] = await Promise.all([
    sql`select name, presence, client_events, history_ttl_seconds, history_size from realtime_namespaces where product_id = ${productId}`,
    sql`select pattern, ops from realtime_grants where product_id = ${productId}`,
    sql`select bucket from realtime_payload_storage where product_id = ${productId}`,
  ])
  return {
    namespaces: new Map(namespaces.map((row) => {
      const keeps = row.history_ttl_seconds > 0 && row.history_size > 0
      return [row.name as string, {
        name: row.name, presence: row.presence, clientEvents: row.client_events,
        history: keeps ? { ttlSeconds: row.history_ttl_seconds, size: row.history_size } : null,
        broker: keeps ? { historyTtlSeconds: row.history_ttl_seconds, historySize: row.history_size } : { historyTtlSeconds: 0, historySize: 0 },
      }]
    })),
    grants: grants.map((row) => ({ pattern: row.pattern as string, ops: row.ops as Op[] })),
    payloadBucket: (storage[0]?.bucket as string | undefined) ?? null,
  }
}

/** The product's policies, at most config.realtime.cacheTtlMs old unless an invalidation dropped them sooner. */
export async function productPolicies(productId: string): Promise<ProductPolicies> {
  const hit = cache.get(productId)
  if (hit && hit.until > Date.now()) return hit.value
  const started = generation
  let value: ProductPolicies
  try {
    value = await load(productId)
  } catch (error) {
    log('error', 'realtime policy lookup failed', { productId, ...describeError(error) })
    throw unavailable('Realtime configuration is unavailable; retry shortly')
  }
  // An invalidation that arrived during the load may describe a change the load did not see: do not cache it.
  if (caching && generation === started) cache.set(productId, { value, until: Date.now() + config.realtime.cacheTtlMs })
  return value
}
