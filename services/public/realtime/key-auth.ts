// Product API key (rtk_) authentication for the public routes, with a short per-worker cache dropped on invalidation.
import { config } from '../../../shared/config'
import { looksLikeSecret } from '../../../shared/crypto'
import { sql } from '../../../shared/db/client'
import { PUBLIC_KEY_PREFIX, publicKeyHash, type PublicScope } from '../../../shared/realtime/public-keys'
import { HINTS, insufficientScope, invalidApiKey, productNotFound } from './errors'
import { InvalidatedCache } from '../../../shared/cache/invalidated-cache'
import { cachedKeyLookup } from '../http/key-lookup'

export interface KeyIdentity {
  keyId: string
  productId: string
  scope: readonly PublicScope[]
}

/** hex digest → identity (only active keys), dropped by `public_key` invalidation messages. */
export const keyCache = new InvalidatedCache<KeyIdentity | null>()

const lookup = cachedKeyLookup(keyCache, 'api key', async (digest) => {
  const [row] = await sql`
    select id, product_id, scope from public_keys
    where key_hash = ${digest} and environment = ${config.environment} and revoked_at is null`
  return row ? { keyId: row.id, productId: row.product_id, scope: row.scope } : null
})

/**
 * Resolves the X-Api-Key header to a key of `productId` whose scope includes `scope`.
 * 401 for a missing/malformed/unknown/revoked key (or one sent anywhere but X-Api-Key), 404 for another product's key,
 * 403 when the scope lacks the route's. `beforeLookup` runs before a key is looked up in PostgreSQL (not for a cached one).
 */
export async function authenticate(request: Request, productId: string, scope: PublicScope, beforeLookup?: () => Promise<void>): Promise<KeyIdentity> {
  // A key in the URL ends up in logs and browser history: refuse it even next to a good header, so it gets noticed.
  if (request.url.includes('?') && new URL(request.url).searchParams.has('api_key')) throw invalidApiKey(HINTS.elsewhere)
  const key = request.headers.get('x-api-key')
  if (key === null || key === '') throw invalidApiKey(request.headers.has('authorization') ? HINTS.elsewhere : HINTS.missing)
  if (!looksLikeSecret(key, PUBLIC_KEY_PREFIX)) throw invalidApiKey(HINTS.malformed)
  const identity = await lookup(publicKeyHash(key, config.environment), beforeLookup)
  if (!identity) throw invalidApiKey(HINTS.unknown)
  if (identity.productId !== productId) throw productNotFound()
  if (!identity.scope.includes(scope)) throw insufficientScope(scope)
  return identity
}
