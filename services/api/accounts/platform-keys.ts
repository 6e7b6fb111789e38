// Platform API keys: bearer tokens bound to one product and a set of areas. Stored as a SHA-256 digest + prefix.
import { publishInvalidation } from '../../../shared/cache/invalidation'
import type { Area } from '../../../shared/catalog/operation'
import { newSecret, sha256, visiblePrefix } from '../../../shared/crypto'
import { insertKeyUnderCeilings } from '../../../shared/db/ceiling'
import { sql } from '../../../shared/db/client'
import { keysetPage, NEWEST_FIRST } from '../../../shared/db/keyset'
import { type PageRequest, PAGE_DEFAULT } from '../../../shared/catalog/pagination'
import { notFound } from '../../../shared/errors'

export const PLATFORM_KEY_PREFIX = 'plk_'

export interface PlatformKey {
  id: string
  name: string
  areas: Area[]
  prefix: string
  createdAt: Date
}

const keyFields = (row: Record<string, any>): PlatformKey => ({
  id: row.id, name: row.name, areas: row.areas, prefix: row.prefix, createdAt: row.created_at,
})

export async function createPlatformKey(productId: string, input: { name: string; areas: Area[] }, createdBy: string | null) {
  const key = newSecret(PLATFORM_KEY_PREFIX)
  const areas = [...new Set(input.areas)].sort()
  const count = (q: typeof sql) => q<{ n: number }[]>`
    select count(*)::int as n from platform_keys where product_id = ${productId} and revoked_at is null`
  const [row] = await insertKeyUnderCeilings(productId, 'platformKeys', 'platform_keys', count, (tx) => tx`
    insert into platform_keys (product_id, name, areas, prefix, key_hash, created_by)
    values (${productId}, ${input.name}, ${areas}, ${visiblePrefix(key, PLATFORM_KEY_PREFIX)}, ${sha256(key)}, ${createdBy})
    returning id, name, areas, prefix, created_at`)
  return { ...keyFields(row!), key }
}

/** Active keys, newest first; at most `page.limit + 1` rows (the extra one says more follow). */
export async function listPlatformKeys(productId: string, page: PageRequest = { limit: PAGE_DEFAULT }): Promise<PlatformKey[]> {
  // A revoked key's position still holds, so a walk survives a revocation of the key it stopped at.
  const rows = await keysetPage({
    what: 'platform key', order: NEWEST_FIRST,
    cursor: (after) => sql`from platform_keys where id = ${after} and product_id = ${productId}`,
    rows: sql`select id, name, areas, prefix, created_at from platform_keys where product_id = ${productId} and revoked_at is null`,
  }, page)
  return rows.map(keyFields)
}

/** Revokes an active key of the product; any other id (unknown, revoked, another product's) is not found. */
export async function revokePlatformKey(productId: string, keyId: string): Promise<void> {
  const [row] = await sql`
    update platform_keys set revoked_at = now()
    where id = ${keyId} and product_id = ${productId} and revoked_at is null returning id`
  if (!row) throw notFound('Platform key')
  // Gateways close the console tokens the key asked for at once, not at their next sweep.
  await publishInvalidation({ kind: 'credential_ended', keyId })
}
