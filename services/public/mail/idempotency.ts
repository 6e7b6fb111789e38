// Idempotency-Key on POST /emails, Resend's way: keys are scoped to the sending API key that used them (two keys of one
// product using the same Idempotency-Key make two requests), and a repeat within 24 hours with the same payload
// answers the first email's id and queues nothing; the same key with another payload is 409 invalid_idempotent_request; a repeat while
// the first is still being handled is 409 concurrent_idempotent_requests. The key's row is claimed with one insert (the
// primary key makes exactly one request win, on any number of workers) and bound to the email in the email's own
// transaction, so there are never two emails for one key.
import { randomUUID } from 'node:crypto'
import type postgres from 'postgres'
import { config } from '../../../shared/config'
import { sql } from '../../../shared/db/client'
import { ApiError } from '../../../shared/errors'

/** How long a key is remembered. */
export const KEY_TTL_HOURS = 24
/**
 * A claim never bound to an email this long after it was made belongs to a request that died (its process killed
 * between the two steps): it may be taken over. The claiming request does at most one Redis command and one bounded
 * transaction after the claim, so this is both deadlines and a margin (9 s with the defaults). A request slower than
 * that loses its claim safely: binding checks the claim's token (bindClaim). It was a minute, in which a client retrying
 * after a crash as Resend advises was answered 409 (found by the chaos soak, scripts/chaos).
 */
export const claimAbandonedAfterMs = () => 3 * config.db.timeoutMs + config.redis.commandTimeoutMs + 2000

/** Whose keys: the product and the sending API key that sent the request. */
export interface KeyScope {
  productId: string
  apiKeyId: string
}

/** This request's hold on a key: bind the email with it, or release it. */
export interface Claim extends KeyScope {
  key: string
  token: string
}

const scoped = (scope: KeyScope, key: string) =>
  sql`product_id = ${scope.productId} and api_key_id = ${scope.apiKeyId} and key = ${key}`

/**
 * Claims `key` for this request: a Claim when this request is the first (it must then queue the email and bind it, or
 * release the claim), or the id of the email a repeat refers to. Throws the two 409s.
 */
export async function claimKey(scope: KeyScope, key: string, hash: Buffer): Promise<Claim | { emailId: string }> {
  const token = randomUUID()
  const [claimed] = await sql`
    insert into mail_idempotency_keys (product_id, api_key_id, key, request_hash, claim_token)
    values (${scope.productId}, ${scope.apiKeyId}, ${key}, ${hash}, ${token})
    on conflict (product_id, api_key_id, key) do update
      set request_hash = excluded.request_hash, claim_token = excluded.claim_token, email_id = null, created_at = now()
      where mail_idempotency_keys.created_at < now() - ${KEY_TTL_HOURS} * interval '1 hour'
         or (mail_idempotency_keys.email_id is null and mail_idempotency_keys.created_at < now() - ${claimAbandonedAfterMs()} * interval '1 millisecond')
    returning key`
  if (claimed) return { productId: scope.productId, apiKeyId: scope.apiKeyId, key, token }
  const [existing] = await sql`select request_hash, email_id from mail_idempotency_keys where ${scoped(scope, key)}`
  if (!existing) return claimKey(scope, key, hash) // released meanwhile: try again
  if (!Buffer.from(existing.request_hash).equals(hash)) {
    throw new ApiError('invalid_idempotent_request', 'This Idempotency-Key was already used with a different payload; use a new key for a new email')
  }
  if (existing.email_id === null) {
    throw new ApiError('concurrent_idempotent_requests', 'A request with this Idempotency-Key is still in progress; retry shortly', {}, { 'retry-after': '1' })
  }
  return { emailId: existing.email_id }
}

const takenOver = () => new ApiError('concurrent_idempotent_requests',
  'This request took so long that another request with the same Idempotency-Key took it over; retry to get its answer', {}, { 'retry-after': '1' })

/**
 * Binds the claim to the email, inside the email's transaction: when the claim is no longer this request's (taken over
 * as abandoned), it throws, the transaction rolls back, and the key keeps exactly one email.
 */
export async function bindClaim(tx: postgres.TransactionSql, claim: Claim, emailId: string): Promise<void> {
  const [bound] = await tx`
    update mail_idempotency_keys set email_id = ${emailId}
    where product_id = ${claim.productId} and api_key_id = ${claim.apiKeyId} and key = ${claim.key} and claim_token = ${claim.token} and email_id is null
    returning key`
  if (!bound) throw takenOver()
}

/** The first request failed (a 4xx, or an outage): the key is free again, so a corrected request can use it. */
export async function releaseClaim(claim: Claim): Promise<void> {
  await sql`
    delete from mail_idempotency_keys
    where ${scoped(claim, claim.key)} and claim_token = ${claim.token} and email_id is null`
}
