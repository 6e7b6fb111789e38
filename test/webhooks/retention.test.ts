// Webhook records past retention: a message older than the retention none of whose deliveries is pending is deleted
// with its deliveries and attempts; a pending one is kept however old, and a recent one is kept.
import { expect, test } from 'bun:test'
import { sql } from '../../shared/db/client'
import { deleteOldMessages } from '../../services/webhooks/queue'
import { newProduct, ok, call } from '../helpers'

test('finished messages past retention go with their deliveries and attempts; pending and recent ones stay', async () => {
  const owner = await newProduct()
  const endpoint = ok(await call('POST', '/mail/webhooks', {
    token: owner.token, productId: owner.productId, body: { url: 'http://127.0.0.1:9/hook', eventKinds: ['*'], enabled: false },
  }), 'create endpoint').body
  const message = async (age: string, state: string) => {
    const id = `msg_retention${crypto.randomUUID().replaceAll('-', '').slice(0, 12)}`
    await sql`insert into webhook_messages (id, product_id, area, kind, payload, created_at)
      values (${id}, ${owner.productId}, 'mail', 'email.sent', '{}', now() - ${age}::interval)`
    const [delivery] = await sql`insert into webhook_deliveries (message_id, endpoint_id, state) values (${id}, ${endpoint.id}, ${state}) returning id`
    await sql`insert into webhook_attempts (delivery_id, attempted_at, duration_ms, status_code) values (${delivery!.id}, now(), 5, 200)`
    return { id, deliveryId: delivery!.id as string }
  }
  const old = await message('40 days', 'succeeded')
  const oldFailed = await message('31 days', 'failed')
  const oldPending = await message('40 days', 'pending')
  const recent = await message('29 days', 'succeeded')
  while ((await deleteOldMessages(30 * 86_400_000, 2)) > 0);
  const left = await sql`select id from webhook_messages where product_id = ${owner.productId} order by id`
  expect(left.map((r) => r.id).sort()).toEqual([oldPending.id, recent.id].sort())
  const orphans = await sql`select count(*)::int as n from webhook_attempts where delivery_id = any(${[old.deliveryId, oldFailed.deliveryId]}::uuid[])`
  expect(orphans[0]!.n).toBe(0)
})

test('an endpoint holding 20 000 deliveries is deleted within the database deadline, and so is its product', async () => {
  const owner = await newProduct()
  const endpoint = ok(await call('POST', '/mail/webhooks', {
    token: owner.token, productId: owner.productId, body: { url: 'http://127.0.0.1:9/hook', eventKinds: ['*'], enabled: false },
  }), 'create endpoint').body
  const tag = crypto.randomUUID().replaceAll('-', '').slice(0, 12)
  await sql`
    with m as (
      insert into webhook_messages (id, product_id, area, kind, payload)
      select 'msg_many' || ${tag} || n, ${owner.productId}, 'mail', 'email.sent', '{}' from generate_series(1, 20000) n
      returning id
    )
    insert into webhook_deliveries (message_id, endpoint_id, state) select id, ${endpoint.id}, 'succeeded' from m`
  const started = performance.now()
  const deleted = await call('DELETE', `/mail/webhooks/${endpoint.id}`, { token: owner.token, productId: owner.productId })
  expect(deleted.status).toBe(200)
  expect(performance.now() - started).toBeLessThan(2000)
  const [left] = await sql`select count(*)::int as n from webhook_deliveries where endpoint_id = ${endpoint.id}`
  expect(left!.n).toBe(0)
  // The messages stay until the product goes; deleting it finds them by product (not a scan of every message).
  const [{ ms }] = await sql.begin(async (tx) => {
    const t = performance.now()
    await tx`delete from products where id = ${owner.productId}`
    return [{ ms: performance.now() - t }]
  })
  expect(ms).toBeLessThan(2000)
})
