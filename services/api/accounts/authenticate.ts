// Resolves an Authorization header to a principal: a login session or a platform key. Each is one index hit on
// the secret's digest, so revocation and expiry hold on the very next request on every worker.
import type { Area, Principal } from '../../../shared/catalog/operation'
import { looksLikeSecret, sha256 } from '../../../shared/crypto'
import { sql } from '../../../shared/db/client'
import { unauthorized } from '../../../shared/errors'
import { PLATFORM_KEY_PREFIX } from './platform-keys'
import { SESSION_PREFIX } from './users'

export async function authenticate(authorization: string | null): Promise<Principal> {
  if (!authorization) throw unauthorized('Missing bearer token: send "Authorization: Bearer <token>"')
  const match = /^Bearer +(\S+)$/i.exec(authorization.trim())
  if (!match) throw unauthorized('Malformed Authorization header: expected "Bearer <token>"')
  const token = match[1]!
  if (looksLikeSecret(token, SESSION_PREFIX)) {
    const [row] = await sql`
      select id, user_id from sessions
      where token_hash = ${sha256(token)} and revoked_at is null and expires_at > now()`
    if (row) return { kind: 'session', userId: row.user_id, sessionId: row.id }
  } else if (looksLikeSecret(token, PLATFORM_KEY_PREFIX)) {
    const [row] = await sql`
      select k.id, k.product_id, p.organization_id, k.areas from platform_keys k join products p on p.id = k.product_id
      where k.key_hash = ${sha256(token)} and k.revoked_at is null`
    if (row) return { kind: 'platform_key', keyId: row.id, productId: row.product_id, organizationId: row.organization_id, areas: row.areas as Area[] }
  } else {
    throw unauthorized('Malformed bearer token: expected a session token (pls_...) or a platform key (plk_...)')
  }
  throw unauthorized('Bearer token is invalid, expired or revoked')
}
