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

test('an endpoint holding 20 000 deliveries is deleted, and so is its product, each cascade found through an index', async () => {
  const owner = await newProduct()
  const endpoint = ok(await call('POST', '/mail/webhooks', {
    token: owner.token, productId: owner.productId, body: { url: 'http://127.0.0.1:9999/hook', eventKinds: ['*'], enabled: false },
  }), 'create endpoint').body
  const tag = crypto.randomUUID().replaceAll('-', '').slice(0, 12)
  // Written and deleted without the API's statement deadline: how long they take depends on the machine's load (a
  // deadline here failed runs at random); what must hold is the shape of the work, checked below by plan.
  const unbounded = unboundedSql()
  try {
    await unbounded`
      with m as (
        insert into webhook_messages (id, product_id, area, kind, payload)
        select 'msg_many' || ${tag} || n, ${owner.productId}, 'mail', 'email.sent', '{}' from generate_series(1, 20000) n
        returning id
      )
      insert into webhook_deliveries (message_id, endpoint_id, state) select id, ${endpoint.id}, 'succeeded' from m`
    await unbounded`analyze webhook_deliveries`
    await unbounded`analyze webhook_messages`
    // The statements the deletes' foreign keys run (per deleted row, for the attempts and replays of each delivery):
    // each can be served by an index (a scan of every delivery per deleted row is what once made the delete outlast the
    // API's deadline). Asked with sequential scans off, so the answer is whether an index exists that serves it, not
    // which plan this table's current size makes cheapest.
    const plans = async (statement: string, ...values: unknown[]) => JSON.stringify(await unbounded.begin(async (tx) => {
      await tx`set local enable_seqscan = off`
      return tx.unsafe(`explain (format json) ${statement}`, values as never[])
    }))
    for (const [what, plan] of [
      ['deliveries of the endpoint', await plans('delete from webhook_deliveries where endpoint_id = $1', endpoint.id)],
      ['attempts of a delivery', await plans('delete from webhook_attempts where delivery_id = $1', crypto.randomUUID())],
      ['replays of a delivery', await plans('update webhook_deliveries set replay_of = null where replay_of = $1', crypto.randomUUID())],
      ['messages of the product', await plans('delete from webhook_messages where product_id = $1', owner.productId)],
    ] as const) {
      expect({ what, seqScan: plan.includes('"Seq Scan"') }).toEqual({ what, seqScan: false })
    }
    // And the deletes themselves, the endpoint's then the product's.
    await unbounded`delete from webhook_endpoints where id = ${endpoint.id}`
    const [left] = await unbounded`select count(*)::int as n from webhook_deliveries where endpoint_id = ${endpoint.id}`
    expect(left!.n).toBe(0)
    await unbounded`delete from products where id = ${owner.productId}`
    const [gone] = await unbounded`select count(*)::int as n from webhook_messages where product_id = ${owner.productId}`
    expect(gone!.n).toBe(0)
  } finally {
    await unbounded.end()
  }
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
