// Product API keys (rtk_) of this environment: create, list, revoke, replace scope. Stored as digest + visible prefix.
import { config } from '../../../shared/config'
import { newSecret, visiblePrefix } from '../../../shared/crypto'
import { insertKeyUnderCeilings } from '../../../shared/db/ceiling'
import { sql } from '../../../shared/db/client'
import { keysetPage, NEWEST_FIRST } from '../../../shared/db/keyset'
import { type PageRequest, PAGE_DEFAULT } from '../../../shared/catalog/pagination'
import { notFound } from '../../../shared/errors'
import { publishInvalidation } from '../../../shared/cache/invalidation'
import { PUBLIC_KEY_PREFIX, PUBLIC_SCOPES, publicKeyHash, type PublicScope } from '../../../shared/realtime/public-keys'

export interface PublicKey {
  id: string
  name: string
  /** Always a non-empty subset of PUBLIC_SCOPES, in PUBLIC_SCOPES order. */
  scope: PublicScope[]
  /** `rtk_` plus the six characters after it. */
  prefix: string
  environment: string
  createdAt: Date
  updatedAt: Date
}

const keyFields = (row: Record<string, any>): PublicKey => ({
  id: row.id, name: row.name, scope: row.scope, prefix: row.prefix, environment: row.environment,
  createdAt: row.created_at, updatedAt: row.updated_at,
})

/** Deduplicated and in catalog order, so equal scopes are stored (and compared, and shown) identically. */
const normalizeScope = (scope: readonly PublicScope[]) => PUBLIC_SCOPES.filter((s) => scope.includes(s))

/**
 * Every public worker drops its cached copy of the key; after the change commits. A revocation also reaches the
 * gateways, which close the connections of tokens the key issued; a scope change does not end tokens already issued
 * (they keep the channels they were signed with until they expire, at most an hour).
 */
const invalidateKey = (keyId: string, keyHash: Uint8Array, revoked: boolean) =>
  publishInvalidation({ kind: 'public_key', keyHash: Buffer.from(keyHash).toString('hex'), keyId, ...(revoked ? { revoked: true as const } : {}) })

/** Creates an active key; the secret is in the result only, never stored. */
export async function createPublicKey(
  productId: string, input: { name: string; scope?: PublicScope[] }, createdBy: string | null,
): Promise<PublicKey & { key: string }> {
  const key = newSecret(PUBLIC_KEY_PREFIX)
  const scope = normalizeScope(input.scope ?? PUBLIC_SCOPES)
  // Counted in this environment, as the keys are listed and used.
  const count = (q: typeof sql) => q<{ n: number }[]>`
    select count(*)::int as n from public_keys
    where product_id = ${productId} and environment = ${config.environment} and revoked_at is null`
  const [row] = await insertKeyUnderCeilings(productId, 'publicKeys', 'public_keys', count, (tx) => tx`
    insert into public_keys (product_id, environment, name, scope, prefix, key_hash, created_by)
    values (${productId}, ${config.environment}, ${input.name}, ${scope}, ${visiblePrefix(key, PUBLIC_KEY_PREFIX)},
            ${publicKeyHash(key, config.environment)}, ${createdBy})
    returning id, name, scope, prefix, environment, created_at, updated_at`)
  return { ...keyFields(row!), key }
}

/** Active keys of the product in this environment, newest first. */
export async function listPublicKeys(productId: string, page: PageRequest = { limit: PAGE_DEFAULT }): Promise<PublicKey[]> {
  const rows = await keysetPage({
    what: 'Realtime API key', order: NEWEST_FIRST,
    cursor: (after) => sql`from public_keys where id = ${after} and product_id = ${productId} and environment = ${config.environment}`,
    rows: sql`
      select id, name, scope, prefix, environment, created_at, updated_at from public_keys
      where product_id = ${productId} and environment = ${config.environment} and revoked_at is null`,
  }, page)
  return rows.map(keyFields)
}

/** Revokes an active key of the product in this environment; any other id is not found. */
export async function revokePublicKey(productId: string, keyId: string): Promise<void> {
  const [row] = await sql`
    update public_keys set revoked_at = now(), updated_at = now()
    where id = ${keyId} and product_id = ${productId} and environment = ${config.environment} and revoked_at is null
    returning key_hash`
  if (!row) throw notFound('Public key')
  // The committed row is the revocation: gateways and public workers read it from PostgreSQL. The announcement only
  // makes it take effect at once; if Redis cannot carry it (logged), it takes effect within CACHE_TTL_MS for
  // new requests and connects, and within GATEWAY_REVOCATION_SWEEP_MS for live connections.
  await invalidateKey(keyId, row.key_hash, true)
}

/** Replaces the scope of an active key of the product in this environment; any other id is not found. */
export async function updatePublicKeyScope(productId: string, keyId: string, scope: PublicScope[]): Promise<PublicKey> {
  const [row] = await sql`
    update public_keys set scope = ${normalizeScope(scope)}, updated_at = now()
    where id = ${keyId} and product_id = ${productId} and environment = ${config.environment} and revoked_at is null
    returning id, name, scope, prefix, environment, created_at, updated_at, key_hash`
  if (!row) throw notFound('Public key')
  await invalidateKey(row.id, row.key_hash, false)
  return keyFields(row)
}
