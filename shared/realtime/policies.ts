// Namespace policies, grants and payload storage of a product, cached per process and dropped on invalidation.
// The one policy shape: public workers and gateways read it from here.
import { sql } from '../db/client'
import { logUnlessOutage, unavailable } from '../errors'
import { keepsHistory, type HistoryPolicy as BrokerHistoryPolicy } from './broker'
import { InvalidatedCache } from '../cache/invalidated-cache'
import type { Op } from './names'

/** A namespace's policy in the shape allowedOps() reads, plus the broker's history policy. */
export interface NamespacePolicy {
  name: string
  presence: boolean
  clientEvents: boolean
  history: { ttlSeconds: number; size: number } | null
  /** What the broker needs: the stored retention and size (either 0 = no history; see keepsHistory). */
  broker: BrokerHistoryPolicy
  /** Days the archive keeps the namespace's stored publications; 0 or absent = not archived (./archive.ts). */
  archiveDays?: number
}

/** Everything the public routes need to know about one product's realtime configuration. */
export interface ProductPolicies {
  namespaces: Map<string, NamespacePolicy>
  grants: { pattern: string; ops: Op[] }[]
  /** The bucket of provisioned payload storage, or null. */
  payloadBucket: string | null
}

/** Per product id; wired to invalidations by ./invalidation-listener.ts (`namespaces` and `payload_storage` messages). */
export const policyCache = new InvalidatedCache<ProductPolicies>()

async function load(productId: string): Promise<ProductPolicies> {
  const [namespaces, grants, storage] = await Promise.all([
    sql`select name, presence, client_events, history_ttl_seconds, history_size, archive_days from realtime_namespaces where product_id = ${productId}`,
    sql`select pattern, ops from realtime_grants where product_id = ${productId}`,
    sql`select bucket from realtime_payload_storage where product_id = ${productId}`,
  ])
  return {
    namespaces: new Map(namespaces.map((row) => {
      const broker = { historyTtlSeconds: row.history_ttl_seconds as number, historySize: row.history_size as number }
      return [row.name as string, {
        name: row.name, presence: row.presence, clientEvents: row.client_events,
        history: keepsHistory(broker) ? { ttlSeconds: broker.historyTtlSeconds, size: broker.historySize } : null,
        broker,
        archiveDays: row.archive_days as number,
      }]
    })),
    grants: grants.map((row) => ({ pattern: row.pattern as string, ops: row.ops as Op[] })),
    payloadBucket: (storage[0]?.bucket as string | undefined) ?? null,
  }
}

/** The product's policies when this worker holds them fresh, without a promise (the publish path's usual case); else undefined. */
export const heldPolicies = (productId: string): ProductPolicies | undefined => policyCache.peek(productId)

/**
 * The product's policies, at most config.cache.ttlMs old unless an invalidation dropped them sooner. `beforeLoad` runs
 * before they are read from PostgreSQL (not when cached): the publish route counts its deferred IP limit there.
 */
export async function productPolicies(productId: string, beforeLoad?: () => Promise<void>): Promise<ProductPolicies> {
  return policyCache.get(productId, async () => {
    await beforeLoad?.()
    try {
      return await load(productId)
    } catch (error) {
      logUnlessOutage('realtime policy lookup failed', error, { productId })
      throw unavailable('Realtime configuration is unavailable; retry shortly')
    }
  })
}
