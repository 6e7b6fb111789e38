// Publishable capture keys (ptk_) of this environment: create, list, revoke, replace allowed origins. Stored readable
// (shared/analytics/capture-keys.ts says why), so the list shows each key whole, ready to paste into a page.
import { config } from '../../../shared/config'
import { newSecret } from '../../../shared/crypto'
import { insertKeyUnderCeilings } from '../../../shared/db/ceiling'
import { sql } from '../../../shared/db/client'
import { keysetPage, NEWEST_FIRST } from '../../../shared/db/keyset'
import { type PageRequest, PAGE_DEFAULT } from '../../../shared/catalog/pagination'
import { badRequest, notFound } from '../../../shared/errors'
import { publishInvalidation } from '../../../shared/cache/invalidation'
import { CAPTURE_KEY_PREFIX, isExactOrigin, normalizeOrigins } from '../../../shared/analytics/capture-keys'

export interface CaptureKey {
  id: string
  name: string
  /** `ptk_` plus 43 URL-safe base64 characters: public by design. */
  key: string
  /** Exact origins, lower case; empty: any origin. */
  allowedOrigins: string[]
  environment: string
  createdAt: Date
  updatedAt: Date
}

const keyFields = (row: Record<string, any>): CaptureKey => ({
  id: row.id, name: row.name, key: row.key, allowedOrigins: row.allowed_origins, environment: row.environment,
  createdAt: row.created_at, updatedAt: row.updated_at,
})

/** 400 naming each entry that is not an exact origin (the schema bounds count and length already). */
function checkedOrigins(origins: readonly string[], at: string): string[] {
  const fields = origins.flatMap((o, i) => isExactOrigin(o) ? [] : [{ path: `${at}/${i}`, message: 'must be an exact origin: http(s)://host[:port], no path, no trailing slash, no wildcard' }])
  if (fields.length) throw badRequest(`Invalid request: ${fields.map((f) => `${f.path} ${f.message}`).join('; ')}`, fields)
  return normalizeOrigins(origins)
}

/** Every public worker drops its cached copy of the key, after the change commits (or within CACHE_TTL_MS). */
const invalidateKey = (key: string) => publishInvalidation({ kind: 'capture_key', key })

/** Creates an active key of the product in this environment. */
export async function createCaptureKey(
  productId: string, input: { name: string; allowedOrigins?: string[] }, createdBy: string | null,
): Promise<CaptureKey> {
  const origins = checkedOrigins(input.allowedOrigins ?? [], '/body/allowedOrigins')
  const key = newSecret(CAPTURE_KEY_PREFIX)
  const count = (q: typeof sql) => q<{ n: number }[]>`
    select count(*)::int as n from capture_keys
    where product_id = ${productId} and environment = ${config.environment} and revoked_at is null`
  const [row] = await insertKeyUnderCeilings(productId, 'captureKeys', 'capture_keys', count, (tx) => tx`
    insert into capture_keys (product_id, environment, name, key, allowed_origins, created_by)
    values (${productId}, ${config.environment}, ${input.name}, ${key}, ${origins}, ${createdBy})
    returning id, name, key, allowed_origins, environment, created_at, updated_at`)
  return keyFields(row!)
}

/** Active keys of the product in this environment, newest first. */
export async function listCaptureKeys(productId: string, page: PageRequest = { limit: PAGE_DEFAULT }): Promise<CaptureKey[]> {
  const rows = await keysetPage({
    what: 'capture key', order: NEWEST_FIRST,
    cursor: (after) => sql`from capture_keys where id = ${after} and product_id = ${productId} and environment = ${config.environment}`,
    rows: sql`
      select id, name, key, allowed_origins, environment, created_at, updated_at from capture_keys
      where product_id = ${productId} and environment = ${config.environment} and revoked_at is null`,
  }, page)
  return rows.map(keyFields)
}

/** Revokes an active key of the product in this environment; any other id is not found. */
export async function revokeCaptureKey(productId: string, keyId: string): Promise<void> {
  const [row] = await sql`
    update capture_keys set revoked_at = now(), updated_at = now()
    where id = ${keyId} and product_id = ${productId} and environment = ${config.environment} and revoked_at is null
    returning key`
  if (!row) throw notFound('Capture key')
  await invalidateKey(row.key)
}

/** Replaces the allowed origins of an active key of the product in this environment; any other id is not found. */
export async function updateCaptureKeyOrigins(productId: string, keyId: string, allowedOrigins: string[]): Promise<CaptureKey> {
  const origins = checkedOrigins(allowedOrigins, '/body/allowedOrigins')
  const [row] = await sql`
    update capture_keys set allowed_origins = ${origins}, updated_at = now()
    where id = ${keyId} and product_id = ${productId} and environment = ${config.environment} and revoked_at is null
    returning id, name, key, allowed_origins, environment, created_at, updated_at`
  if (!row) throw notFound('Capture key')
  await invalidateKey(row.key)
  return keyFields(row)
}
