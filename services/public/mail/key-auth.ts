// Sending key (lmk_) authentication for the public Mail routes, with a short per-worker cache dropped on invalidation.
import { looksLikeSecret } from '../../../shared/crypto'
import { sql } from '../../../shared/db/client'
import { ApiError } from '../../../shared/errors'
import { MAIL_KEY_PREFIX, mailKeyHash, type MailScope } from '../../../shared/mail/keys'
import { InvalidatedCache } from '../../../shared/cache/invalidated-cache'
import { cachedKeyLookup } from '../http/key-lookup'

export interface MailKeyIdentity {
  keyId: string
  productId: string
  scope: MailScope
  /** The one domain the key may send from and read; null when not locked. */
  domainId: string | null
}

/** The spec's one error for every key failure: 401 (or 403 for a locked key listing), `restricted_api_key`. */
export const restrictedKey = (message: string, status: 401 | 403 = 401) => new ApiError('restricted_api_key', message, {}, {}, status)

/** hex digest → identity (only active keys), dropped by `mail_key` invalidation messages. */
export const mailKeyCache = new InvalidatedCache<MailKeyIdentity | null>()

const lookup = cachedKeyLookup(mailKeyCache, 'mail key', async (digest) => {
  const [row] = await sql`select id, product_id, scope, domain_id from mail_api_keys where key_hash = ${digest} and revoked_at is null`
  return row ? { keyId: row.id, productId: row.product_id, scope: row.scope, domainId: row.domain_id } : null
})

/**
 * The X-Api-Key header as a sending key of `productId`. Missing, not starting with `lmk_` (refused before any lookup),
 * malformed, unknown or revoked: 401 `restricted_api_key`. A key anywhere else (query string, Authorization) is refused
 * even next to a good header. Another product's key: 404, so a key cannot probe other products.
 */
export async function authenticateMailKey(request: Request, productId: string): Promise<MailKeyIdentity> {
  if (new URL(request.url).searchParams.has('api_key')) {
    throw restrictedKey('Send the sending key in the X-Api-Key header; keys in the URL are not accepted')
  }
  if (request.headers.has('authorization')) {
    throw restrictedKey('Send the sending key in the X-Api-Key header only; an Authorization header is not accepted here')
  }
  const key = request.headers.get('x-api-key')
  if (key === null || key === '') throw restrictedKey('Missing API key: send the sending key (lmk_...) in the X-Api-Key header')
  if (!key.startsWith(MAIL_KEY_PREFIX) || !looksLikeSecret(key, MAIL_KEY_PREFIX)) {
    throw restrictedKey('This is not a sending key: it starts with lmk_ followed by 43 URL-safe base64 characters')
  }
  const identity = await lookup(mailKeyHash(key))
  if (!identity) throw restrictedKey('This API key is not valid: it may have been deleted')
  if (identity.productId !== productId) throw new ApiError('not_found', 'Product not found')
  return identity
}
