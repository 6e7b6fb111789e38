// Webhook endpoints deleted while something adds a delivery to them: the delete commits while the adder waits on the
// row. A replay or a test event then answers 404 (not a 500 from the foreign key), and an event being recorded leaves
// the endpoint out instead of failing the transaction of the change that caused it.
import { expect, test } from 'bun:test'
import { sql } from '../../shared/db/client'
import { recordEvent } from '../../shared/webhooks/outbox'
import { call, newProduct, ok } from '../helpers'

async function newEndpoint() {
  const owner = await newProduct()
  const hook = ok(await call('POST', '/mail/webhooks', {
    token: owner.token, productId: owner.productId, body: { url: 'http://127.0.0.1:9999/hook', eventKinds: ['*'], enabled: true },
  }), 'create endpoint').body
  return { owner, id: hook.id as string }
}

/** Deletes the endpoint in a transaction that commits only once `during` has started and had time to reach the row. */
async function deletedDuring<T>(endpointId: string, during: () => Promise<T>): Promise<T> {
  let commit!: () => void
  const held = new Promise<void>((resolve) => (commit = resolve))
  let deleted!: () => void
  const done = new Promise<void>((resolve) => (deleted = resolve))
  const deleting = sql.begin(async (tx) => {
    await tx`delete from webhook_endpoints where id = ${endpointId}`
    deleted()
    await held
  })
  await done
  const result = during()
  await Bun.sleep(300)
  commit()
  await deleting
  return result
}

test('a test event or a replay to an endpoint deleted meanwhile answers 404', async () => {
  const { owner, id } = await newEndpoint()
  const first = ok(await call('POST', `/mail/webhooks/${id}/test`, { token: owner.token, productId: owner.productId }), 'test event').body
  const replay = await deletedDuring(id, () =>
    call('POST', `/mail/webhooks/${id}/deliveries/${first.id}/replay`, { token: owner.token, productId: owner.productId }))
  expect([replay.status, replay.body.error]).toEqual([404, 'not_found'])
  const other = await newEndpoint()
  const sent = await deletedDuring(other.id, () => call('POST', `/mail/webhooks/${other.id}/test`, { token: other.owner.token, productId: other.owner.productId }))
  expect([sent.status, sent.body.error]).toEqual([404, 'not_found'])
})

test("an event recorded while its only endpoint is deleted leaves it out, and the change's transaction commits", async () => {
  const { owner, id } = await newEndpoint()
  const recorded = await deletedDuring(id, () => sql.begin((tx) =>
    recordEvent(tx, { productId: owner.productId, area: 'mail', kind: 'email.sent', data: {} })))
  expect(recorded).toBeUndefined()
  const [left] = await sql`select count(*)::int as n from webhook_messages where product_id = ${owner.productId}`
  expect(left!.n).toBe(0)
})
