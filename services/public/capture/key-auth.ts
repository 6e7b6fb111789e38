// Publishable capture key (ptk_) authentication and its per-key browser origins, with a short per-worker cache dropped
// on invalidation. The key travels in the `key` query parameter: sendBeacon cannot set headers, and a preflight carries
// the URL but no header, so the query is the one place every kind of request (fetch, beacon, preflight, app) can use.
import { config } from '../../../shared/config'
import { looksLikeSecret } from '../../../shared/crypto'
import { sql } from '../../../shared/db/client'
import { ApiError } from '../../../shared/errors'
import { CAPTURE_KEY_PREFIX } from '../../../shared/analytics/capture-keys'
import { InvalidatedCache } from '../../../shared/cache/invalidated-cache'
import { cachedKeyLookup } from '../http/key-lookup'
import { EXPOSE_HEADERS } from '../http/origin'

export interface CaptureKeyIdentity {
  keyId: string
  productId: string
  /** Exact origins, lower case; empty: any origin. */
  allowedOrigins: readonly string[]
}

/** 401 for a key that is missing, malformed, unknown or revoked; unknown and revoked get the same body. */
export const invalidCaptureKey = (hint: string) => new ApiError('invalid_api_key', 'invalid_api_key', { hint })

export const CAPTURE_HINTS = {
  missing: 'Send the publishable capture key (ptk_...) as the `key` query parameter: POST {public_url}/{productId}/capture?key=ptk_...',
  malformed: 'A capture key is "ptk_" followed by 43 URL-safe base64 characters; send it unchanged as the `key` query parameter.',
  unknown: 'This capture key is not active in this environment: it may be revoked, or created in another environment.',
} as const

/** key → identity (only active keys), dropped by `capture_key` invalidation messages. */
export const captureKeyCache = new InvalidatedCache<CaptureKeyIdentity | null>()

const lookup = cachedKeyLookup<CaptureKeyIdentity, string>(captureKeyCache, 'capture key', async (key) => {
  const [row] = await sql`
    select id, product_id, allowed_origins from capture_keys
    where key = ${key} and environment = ${config.environment} and revoked_at is null`
  return row ? { keyId: row.id, productId: row.product_id, allowedOrigins: row.allowed_origins } : null
}, (key) => key)

/**
 * The `key` query parameter as a capture key of `productId`. 401 `invalid_api_key` for a missing, malformed, unknown or
 * revoked key; 404 for another product's key, exactly as a product that does not exist, so a key learns nothing of
 * other products. `beforeLookup` runs before a key is looked up in PostgreSQL (the per-IP limit bounds key guessing).
 */
export async function authenticateCaptureKey(request: Request, productId: string, beforeLookup?: () => Promise<void>): Promise<CaptureKeyIdentity> {
  const key = request.url.includes('?') ? new URL(request.url).searchParams.get('key') : null
  if (key === null || key === '') throw invalidCaptureKey(CAPTURE_HINTS.missing)
  if (!looksLikeSecret(key, CAPTURE_KEY_PREFIX)) throw invalidCaptureKey(CAPTURE_HINTS.malformed)
  const identity = await lookup(key, beforeLookup)
  if (!identity) throw invalidCaptureKey(CAPTURE_HINTS.unknown)
  if (identity.productId !== productId) throw new ApiError('not_found', 'Product not found')
  return identity
}

/**
 * The key's browser policy. No Origin (an app, a server): allowed, since an origin rule only binds browsers, and anyone
 * holding the key (it is in the page) can send without one anyway. An Origin the key lists, or any when it lists none:
 * the CORS headers to answer with. Any other: 403 `origin_not_allowed`, without CORS headers.
 */
export function captureOriginHeaders(request: Request, key: CaptureKeyIdentity): Record<string, string> {
  const origin = request.headers.get('origin')
  if (origin === null) return {}
  if (key.allowedOrigins.length > 0 && !key.allowedOrigins.includes(origin.toLowerCase())) {
    throw new ApiError('origin_not_allowed', `Browser requests from ${origin.slice(0, 200)} are not accepted with this capture key; `
      + 'add the origin to its allowedOrigins (tracking_capture-keys_update-origins)')
  }
  return { 'access-control-allow-origin': origin, 'access-control-expose-headers': EXPOSE_HEADERS, vary: 'Origin' }
}
