// Webhook records past retention: a message older than the retention none of whose deliveries is pending is deleted
// with its deliveries and attempts; a pending one is kept however old, and a recent one is kept.
import { expect, test } from 'bun:test'
import { sql, unboundedSql } from '../../shared/db/client'
import {
  capPendingDeliveries, capReason, deleteOldMessages, EXPIRED_DISABLED, expireDisabledDeliveries,
} from '../../services/webhooks/queue'
import { newProduct, ok, call } from '../helpers'

test('finished messages past retention go with their deliveries and attempts; pending and recent ones stay', async () => {
  const owner = await newProduct()
  const endpoint = ok(await call('POST', '/mail/webhooks', {
    token: owner.token, productId: owner.productId, body: { url: 'http://127.0.0.1:9999/hook', eventKinds: ['*'], enabled: false },
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
    token: owner.token, productId: owner.productId, body: { url: 'http://127.0.0.1:9999/hook', eventKinds: ['*'], enabled: false },
  }), 'create endpoint').body
  const tag = crypto.randomUUID().replaceAll('-', '').slice(0, 12)
  // The 40 000 rows are written without the statement deadline: this setup is not what is timed, and on a loaded
  // machine it outlasted the 2 s (a 503 thrown here, before the delete under test had run).
  const setup = unboundedSql()
  try {
    await setup`
      with m as (
        insert into webhook_messages (id, product_id, area, kind, payload)
        select 'msg_many' || ${tag} || n, ${owner.productId}, 'mail', 'email.sent', '{}' from generate_series(1, 20000) n
        returning id
      )
      insert into webhook_deliveries (message_id, endpoint_id, state) select id, ${endpoint.id}, 'succeeded' from m`
  } finally {
    await setup.end()
  }
  // Answered 200, not 503: the delete's statements finished within the API's statement deadline (DB_TIMEOUT_MS, 2 s),
  // which a scan of every delivery per deleted row exceeded. The deadline is the database's, not a wall clock here.
  const deleted = await call('DELETE', `/mail/webhooks/${endpoint.id}`, { token: owner.token, productId: owner.productId })
  expect(deleted.status).toBe(200)
  const [left] = await sql`select count(*)::int as n from webhook_deliveries where endpoint_id = ${endpoint.id}`
  expect(left!.n).toBe(0)
  // The messages stay until the product goes; deleting it finds them by product (not a scan of every message).
  await sql.begin(async (tx) => {
    await tx`set local statement_timeout = 2000`
    await tx`delete from products where id = ${owner.productId}`
  })
  const [gone] = await sql`select count(*)::int as n from webhook_messages where product_id = ${owner.productId}`
  expect(gone!.n).toBe(0)
})

/** An endpoint of a new product with `n` pending deliveries created a second apart, the oldest first. */
async function pendingBacklog(n: number, enabled: boolean) {
  const owner = await newProduct()
  const endpoint = ok(await call('POST', '/mail/webhooks', {
    token: owner.token, productId: owner.productId, body: { url: 'http://127.0.0.1:9999/hook', eventKinds: ['*'], enabled },
  }), 'create endpoint').body
  const tag = crypto.randomUUID().replaceAll('-', '').slice(0, 12)
  await sql`
    with m as (
      insert into webhook_messages (id, product_id, area, kind, payload, created_at)
      select 'msg_cap' || ${tag} || n, ${owner.productId}, 'mail', 'email.sent', '{}', now() - (${n} - n) * interval '1 second'
      from generate_series(1, ${n}) n
      returning id, created_at
    )
    insert into webhook_deliveries (message_id, endpoint_id, created_at, next_attempt_at)
    select id, ${endpoint.id}, created_at, now() + interval '1 hour' from m`
  const states = async () => (await sql`
    select d.state, m.id as message, (select error from webhook_attempts a where a.delivery_id = d.id) as error
    from webhook_deliveries d join webhook_messages m on m.id = d.message_id
    where d.endpoint_id = ${endpoint.id} order by d.created_at`)
  return { owner, endpoint, states }
}

test('past the pending cap the oldest deliveries of an endpoint fail, each with an attempt saying why; others are untouched', async () => {
  const crowded = await pendingBacklog(12, true)
  const calm = await pendingBacklog(5, true)
  while ((await capPendingDeliveries(5, 3)) > 0);
  const rows = await crowded.states()
  expect(rows.map((r) => r.state)).toEqual([...Array(7).fill('failed'), ...Array(5).fill('pending')])
  expect(rows.slice(0, 7).map((r) => r.error)).toEqual(Array(7).fill(capReason(5)))
  expect((await calm.states()).map((r) => r.state)).toEqual(Array(5).fill('pending'))
})

test('what waits for an endpoint disabled longer than the retention fails; a recently disabled or enabled one waits', async () => {
  const old = await pendingBacklog(3, false)
  const recent = await pendingBacklog(2, false)
  const enabled = await pendingBacklog(2, true)
  await sql`update webhook_endpoints set updated_at = now() - interval '31 days' where id = any(${[old.endpoint.id, enabled.endpoint.id]}::uuid[])`
  while ((await expireDisabledDeliveries(30 * 86_400_000, 2)) > 0);
  expect((await old.states()).map((r) => [r.state, r.error])).toEqual(Array(3).fill(['failed', EXPIRED_DISABLED]))
  expect((await recent.states()).map((r) => r.state)).toEqual(['pending', 'pending'])
  expect((await enabled.states()).map((r) => r.state)).toEqual(['pending', 'pending'])
})
