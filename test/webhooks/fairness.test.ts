// Fair claims, with a real webhooks process and a receiver on loopback: tenants whose receivers hang and whose backlog
// is deep fill the process's slots, yet another tenant's event goes out promptly. Within one organization the
// organization's bound leaves slots free; across organizations a freed slot goes to the least busy tenant first, not
// to the oldest backlog.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { sql } from '../../shared/db/client'
import { recordEvent } from '../../shared/webhooks/outbox'
import { call, newProduct, ok, startProcess, type Worker } from '../helpers'
import { eventually, type Receiver, startReceiver } from './receiver'

type Owner = { token: string; productId: string }

const ENV = {
  WEBHOOK_RETRY_SCHEDULE: Array(10).fill('300ms').join(','), WEBHOOK_TIMEOUT_MS: '1500', WEBHOOK_LEASE_MS: '3000',
  WEBHOOK_CONCURRENCY: '8', WEBHOOK_ENDPOINT_CONCURRENCY: '4', WEBHOOK_PRODUCT_CONCURRENCY: '4',
  WEBHOOK_ORGANIZATION_CONCURRENCY: '6', WEBHOOK_POLL_MS: '50',
}

let receiver: Receiver
let webhooks: Worker
let release: () => void = () => {}
const hanging = new Promise<void>((resolve) => (release = resolve))
beforeAll(async () => {
  receiver = startReceiver()
  webhooks = await startProcess('webhooks', ENV)
})
afterAll(async () => {
  release()
  await webhooks?.stop()
  receiver?.stop()
})

const newPath = (what: string) => `/${what}/${crypto.randomUUID().slice(0, 8)}`
let open = 0

/** A product whose one endpoint never answers (each attempt times out) and which has `backlog` events waiting. */
async function hog(owner: Owner, backlog: number) {
  const path = newPath('hang')
  receiver.on(path, async () => {
    open++
    await hanging
    return new Response('late')
  })
  const hook = ok(await call('POST', '/mail/webhooks', {
    token: owner.token, productId: owner.productId, body: { url: receiver.url(path), eventKinds: ['*'] },
  }), 'create endpoint').body
  for (let i = 0; i < backlog; i++) await event(owner, { i })
  return hook.id as string
}

const event = (owner: Owner, data: unknown = {}) =>
  sql.begin((tx) => recordEvent(tx, { productId: owner.productId, area: 'mail', kind: 'email.failed', data }))

async function politeDeliveredWithin(ms: number) {
  const owner = await newProduct()
  const path = newPath('polite')
  ok(await call('POST', '/mail/webhooks', {
    token: owner.token, productId: owner.productId, body: { url: receiver.url(path), eventKinds: ['*'] },
  }), 'create endpoint')
  const sent = Date.now()
  await event(owner)
  const [request] = await eventually(() => receiver.received(path).length > 0 && receiver.received(path), 10_000, 'the polite delivery')
  expect(request!.at - sent).toBeLessThan(ms)
}

test("one organization's products take at most its share of the slots: another tenant's event goes out at once", async () => {
  const owner = await newProduct()
  const products = [owner.productId]
  for (let i = 0; i < 3; i++) {
    products.push(ok(await call('POST', '/products', { token: owner.token, body: { name: `hog ${i}` } }), 'product').body.id)
  }
  const hooks = []
  for (const productId of products) hooks.push(await hog({ token: owner.token, productId }, 6))
  await eventually(() => open >= 6, 5000, 'the organization holding its share')
  await politeDeliveredWithin(1000)
  expect(open).toBe(6) // WEBHOOK_ORGANIZATION_CONCURRENCY, though its products could hold 16 and the process runs 8
  for (const [i, id] of hooks.entries()) {
    ok(await call('DELETE', `/mail/webhooks/${id}`, { token: owner.token, productId: products[i]! }), 'delete endpoint')
  }
})

test('a freed slot goes to the least busy tenant, not to the oldest backlog of the tenants that fill the process', async () => {
  await Bun.sleep(1600) // the previous test's attempts time out
  open = 0
  const owners = [await newProduct(), await newProduct(), await newProduct(), await newProduct()]
  const hooks = []
  for (const owner of owners) hooks.push(await hog(owner, 10))
  await eventually(() => open >= 8, 5000, 'the process full')
  // Every slot hangs until the attempt times out (1.5 s); the polite event takes the first one freed.
  await politeDeliveredWithin(2500)
  for (const [i, id] of hooks.entries()) {
    ok(await call('DELETE', `/mail/webhooks/${id}`, { token: owners[i]!.token, productId: owners[i]!.productId }), 'delete endpoint')
  }
})
