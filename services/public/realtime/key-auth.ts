// Product API key (rtk_) authentication for the public routes, with a short per-worker cache dropped on invalidation.
import { config } from '../../../shared/config'
import { looksLikeSecret } from '../../../shared/crypto'
import { sql } from '../../../shared/db/client'
import { PUBLIC_KEY_PREFIX, publicKeyHash, type PublicScope } from '../../../shared/realtime/public-keys'
import { HINTS, insufficientScope, invalidApiKey, productNotFound } from './errors'
import { InvalidatedCache } from '../../../shared/cache/invalidated-cache'
import { keepBounded } from '../../../shared/cache/bounded'
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
 * The digests of keys recently found active (and their names in keyCache), by the key itself: hashing a key cost about 6 % of a public worker's CPU
 * per publish under load (docs/performance.md, "Where the rest goes"). Only a key found active is kept, so unknown keys
 * cannot fill it; at most DIGESTS_MAX, and full it starts over. A key's digest never changes, so nothing here needs
 * invalidating: a revoked key's digest is looked up in keyCache, which the revocation cleared. The keys found active
 * stay in the worker's memory (a revoked one too) until the map starts over or the worker stops, where before only
 * the requests in flight held them: a heap dump of a public worker holds usable keys. Never logged or sent anywhere.
 */
const digests = new Map<string, { digest: Buffer; name: string }>()
const DIGESTS_MAX = 10_000

function digestOf(key: string): { digest: Buffer; name: string } {
  const known = digests.get(key)
  if (known) return known
  const digest = publicKeyHash(key, config.environment)
  return { digest, name: digest.toString('hex') }
}

function rememberDigest(key: string, digest: { digest: Buffer; name: string }): void {
  if (!digests.has(key)) keepBounded(digests, DIGESTS_MAX, key, digest)
}

/**
 * Resolves the X-Api-Key header to a key of `productId` whose scope includes `scope`.
 * 401 for a missing/malformed/unknown/revoked key (or one sent anywhere but X-Api-Key), 404 for another product's key,
 * 403 when the scope lacks the route's. `beforeLookup` runs before a key is looked up in PostgreSQL (not for a cached one).
 */
export function authenticate(request: Request, productId: string, scope: PublicScope, beforeLookup?: () => Promise<void>): KeyIdentity | Promise<KeyIdentity> {
  // A key in the URL ends up in logs and browser history: refuse it even next to a good header, so it gets noticed.
  if (request.url.includes('?') && new URL(request.url).searchParams.has('api_key')) throw invalidApiKey(HINTS.elsewhere)
  const key = request.headers.get('x-api-key')
  if (key === null || key === '') throw invalidApiKey(request.headers.has('authorization') ? HINTS.elsewhere : HINTS.missing)
  if (!looksLikeSecret(key, PUBLIC_KEY_PREFIX)) throw invalidApiKey(HINTS.malformed)
  const digest = digestOf(key)
  // A key the worker holds is answered without a promise (an async frame and its await per request).
  const held = keyCache.peek(digest.name)
  if (held) return admitted(held, key, digest, productId, scope)
  return lookup(digest.digest, beforeLookup, digest.name).then((found) => admitted(found, key, digest, productId, scope))
}

function admitted(identity: KeyIdentity | null | undefined, key: string, digest: ReturnType<typeof digestOf>, productId: string, scope: PublicScope): KeyIdentity {
  if (!identity) throw invalidApiKey(HINTS.unknown)
  rememberDigest(key, digest)
  if (identity.productId !== productId) throw productNotFound()
  if (!identity.scope.includes(scope)) throw insufficientScope(scope)
  return identity
}
