// Idempotency-Key on POST /emails against two real public workers: repeats answer the first id and queue nothing,
// another payload is 409, a repeat in flight is 409, never two emails for one key under 50 concurrent repeats.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { sql } from '../../shared/db/client'
import { payloadHash } from '../../shared/http/idempotency-key'
import { bindClaim, claimAbandonedAfterMs, claimKey, releaseClaim } from '../../services/public/mail/idempotency'
import { call, newProduct, ok } from '../helpers'
import { type Pair, pub, startPublicPair } from '../realtime/public-helpers'

type Owner = Awaited<ReturnType<typeof newProduct>>
let pair: Pair
let owner: Owner
let key: string
let keyId: string
let from: string
beforeAll(async () => {
  pair = await startPublicPair({ MAIL_SEND_RATE_PER_SECOND: '1000' })
  owner = await newProduct('Idempotency')
  const as = async (path: string, body: unknown) => ok(await call('POST', path, { token: owner.token, productId: owner.productId, body }), `POST ${path}`).body
  from = `a@${(await as('/mail/domains', { name: `i${crypto.randomUUID().slice(0, 8)}.example.com` })).name}`
  ;({ key, id: keyId } = await as('/mail/api-keys', { name: 'k', scope: 'full_access' }))
}, 30_000)
afterAll(() => pair?.stop())

const send = (worker: { url: string }, body: Record<string, unknown>, idempotencyKey?: string) =>
  pub(worker, 'POST', `/${owner.productId}/mail/emails`, { key, body, headers: idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey } })
const emailCount = async () => Number((await sql`select count(*) from emails where product_id = ${owner.productId}`)[0]!.count)
const message = (subject = 'Hi') => ({ from, to: 'x@example.org', subject, text: 'Hello' })

test('a repeat with the same payload (in any key order) answers the same id and queues nothing; without the header every send is new', async () => {
  const before = await emailCount()
  const first = await send(pair.a, message(), 'order-1')
  const repeat = await send(pair.b, { text: 'Hello', subject: 'Hi', to: 'x@example.org', from }, 'order-1')
  expect([first.status, repeat.status, repeat.body.id]).toEqual([200, 200, first.body.id])
  expect(await emailCount()).toBe(before + 1)
  const plain = [ok(await send(pair.a, message()), 'send without a key'), ok(await send(pair.a, message()), 'send without a key')]
  expect(plain[0]!.body.id).not.toBe(plain[1]!.body.id)
})

test('the same key with another payload: 409 invalid_idempotent_request; a key outside 1..256 characters: 400 invalid_idempotency_key', async () => {
  ok(await send(pair.a, message('one'), 'order-2'), 'first send with the key')
  const other = await send(pair.b, message('two'), 'order-2')
  expect([other.status, other.body.error]).toEqual([409, 'invalid_idempotent_request'])
  for (const bad of ['', 'k'.repeat(257)]) {
    const result = await send(pair.a, message(), bad)
    expect([result.status, result.body.error]).toEqual([400, 'invalid_idempotency_key'])
  }
  expect((await send(pair.a, message(), 'k'.repeat(256))).status).toBe(200)
})

test('50 concurrent repeats on two workers: one email; every answer is its id or 409 concurrent_idempotent_requests', async () => {
  const before = await emailCount()
  const results = await Promise.all(Array.from({ length: 50 }, (_, i) => send(i % 2 ? pair.a : pair.b, message('burst'), 'burst-1')))
  const ids = new Set(results.filter((r) => r.status === 200).map((r) => r.body.id))
  const others = results.filter((r) => r.status !== 200)
  expect(ids.size).toBe(1)
  for (const r of others) expect([r.status, r.body.error, r.headers.get('retry-after')]).toEqual([409, 'concurrent_idempotent_requests', '1'])
  expect(await emailCount()).toBe(before + 1)
  expect((await send(pair.a, message('burst'), 'burst-1')).body.id).toBe([...ids][0])
})

test('a refused first request does not hold the key; a key is remembered 24 hours', async () => {
  const refused = await send(pair.a, { ...message(), from: 'a@unregistered.example.net' }, 'retry-1')
  expect(refused.status).toBe(403)
  const fixed = await send(pair.a, message(), 'retry-1')
  expect(fixed.status).toBe(200)
  await sql`update mail_idempotency_keys set created_at = now() - interval '25 hours' where product_id = ${owner.productId} and key = 'retry-1'`
  const later = await send(pair.b, message('another day'), 'retry-1')
  expect(later.status).toBe(200)
  expect(later.body.id).not.toBe(fixed.body.id)
})

test('while the first request is in flight a repeat is 409 concurrent_idempotent_requests; a claim older than a request can last is taken over', async () => {
  const body = message('in flight')
  // The first request has claimed the key and not yet queued its email (as between the two steps of queueEmail).
  await sql`insert into mail_idempotency_keys (product_id, api_key_id, key, request_hash) values (${owner.productId}, ${keyId}, 'flight-1', ${payloadHash(body)})`
  const repeat = await send(pair.a, body, 'flight-1')
  expect([repeat.status, repeat.body.error]).toEqual([409, 'concurrent_idempotent_requests'])
  // Still in flight a moment before the bound: the claim holds.
  const age = async (ms: number) => sql`update mail_idempotency_keys set created_at = now() - ${ms} * interval '1 millisecond' where product_id = ${owner.productId} and key = 'flight-1'`
  await age(claimAbandonedAfterMs() - 1000)
  expect((await send(pair.b, body, 'flight-1')).status).toBe(409)
  // The first request's process died: past the longest a request can hold it (seconds, not a minute), the claim no
  // longer blocks the key.
  await age(claimAbandonedAfterMs() + 1000)
  const taken = await send(pair.b, body, 'flight-1')
  expect(taken.status).toBe(200)
  expect((await send(pair.a, body, 'flight-1')).body.id).toBe(taken.body.id)
})

test('a first request so slow its claim was taken over can neither bind a second email to the key nor release the newer claim', async () => {
  const hash = payloadHash(message('slow'))
  const slow = await claimKey({ productId: owner.productId, apiKeyId: keyId }, 'slow-1', hash)
  if ('emailId' in slow) throw new Error('expected a fresh claim')
  await sql`update mail_idempotency_keys set created_at = now() - interval '2 minutes' where product_id = ${owner.productId} and key = 'slow-1'`
  const fresh = await claimKey({ productId: owner.productId, apiKeyId: keyId }, 'slow-1', hash) // the abandoned claim, taken over
  if ('emailId' in fresh) throw new Error('expected the claim to be taken over')

  const before = await emailCount()
  const late = await send(pair.a, message('slow'), 'slow-1') // the key is held by `fresh`: 409, nothing queued
  expect([late.status, late.body.error]).toEqual([409, 'concurrent_idempotent_requests'])
  const bound = await sql.begin((tx) => bindClaim(tx, slow, crypto.randomUUID())).catch((error) => error)
  expect([bound.status, bound.code]).toEqual([409, 'concurrent_idempotent_requests'])
  await releaseClaim(slow) // the slow request's clean-up must leave the newer claim alone
  const [row] = await sql`select claim_token from mail_idempotency_keys where product_id = ${owner.productId} and key = 'slow-1'`
  expect(row?.claim_token).toBe(fresh.token)
  expect(await emailCount()).toBe(before)
})
