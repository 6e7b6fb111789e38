// Sending API keys (lmk_): created with their secret shown once, listed without it, revoked at once everywhere.
import { newSecret, visiblePrefix } from '../../../shared/crypto'
import { insertKeyUnderCeilings } from '../../../shared/db/ceiling'
import { sql } from '../../../shared/db/client'
import { keysetPage, NEWEST_FIRST } from '../../../shared/db/keyset'
import { type PageRequest, PAGE_DEFAULT } from '../../../shared/catalog/pagination'
import { notFound, unprocessable } from '../../../shared/errors'
import { isUuid } from '../../../shared/ids'
import { MAIL_KEY_PREFIX, mailKeyHash, type MailScope } from '../../../shared/mail/keys'
import { publishInvalidation } from '../../../shared/cache/invalidation'
import { isPgError } from '../../../shared/db/error-codes'

export interface MailKey {
  id: string
  name: string
  scope: MailScope
  domainId: string | null
  prefix: string
  createdAt: Date
}

const keyOut = (row: Record<string, any>): MailKey => ({
  id: row.id, name: row.name, scope: row.scope, domainId: row.domain_id, prefix: row.prefix, createdAt: row.created_at,
})

/** Creates an active key; the secret is in the result only (a digest is stored). A `domainId` must name a domain of this product. */
export async function createMailKey(productId: string, input: { name: string; scope: MailScope; domainId?: string | null }): Promise<MailKey & { key: string }> {
  const domainId = input.domainId ?? null
  const unknownDomain = () => unprocessable(`Domain ${domainId} is not a domain of this product`, [{ path: '/body/domainId', message: 'names no domain of this product' }])
  if (domainId !== null && !isUuid(domainId)) throw unknownDomain()
  const key = newSecret(MAIL_KEY_PREFIX)
  // A domain deleted while this runs: its delete locks the row first, so the foreign key check here fails (23503) once
  // it commits, rather than the key outliving its domain unlocked.
  const count = (q: typeof sql) => q<{ n: number }[]>`
    select count(*)::int as n from mail_api_keys where product_id = ${productId} and revoked_at is null`
  const [row] = await insertKeyUnderCeilings(productId, 'mailKeys', 'mail_api_keys', count, (tx) => tx`
    insert into mail_api_keys (product_id, name, scope, domain_id, prefix, key_hash)
    select ${productId}, ${input.name}, ${input.scope}, ${domainId}, ${visiblePrefix(key, MAIL_KEY_PREFIX)}, ${mailKeyHash(key)}
    where ${domainId}::uuid is null or exists (select 1 from mail_domains where id = ${domainId} and product_id = ${productId})
    returning id, name, scope, domain_id, prefix, created_at`).catch((error) => {
    throw isPgError(error, 'foreignKeyViolation') ? unknownDomain() : error
  })
  if (!row) throw unknownDomain()
  return { ...keyOut(row), key }
}

/** The product's active keys, newest first; never a secret. */
export async function listMailKeys(productId: string, page: PageRequest = { limit: PAGE_DEFAULT }): Promise<MailKey[]> {
  const rows = await keysetPage({
    what: 'API key', order: NEWEST_FIRST,
    cursor: (after) => sql`from mail_api_keys where id = ${after} and product_id = ${productId}`,
    rows: sql`select id, name, scope, domain_id, prefix, created_at from mail_api_keys where product_id = ${productId} and revoked_at is null`,
  }, page)
  return rows.map(keyOut)
}

/** Revokes an active key of the product: it fails on every public worker from now on. Any other id is 404. */
export async function revokeMailKey(productId: string, id: string): Promise<void> {
  if (!isUuid(id)) throw notFound('API key')
  const [row] = await sql`
    update mail_api_keys set revoked_at = now()
    where id = ${id} and product_id = ${productId} and revoked_at is null
    returning key_hash`
  if (!row) throw notFound('API key')
  await publishInvalidation({ kind: 'mail_key', keyHash: Buffer.from(row.key_hash).toString('hex') })
}
