// Fair claims, with a real webhooks process and a receiver on loopback: tenants whose receivers hang and whose backlog
// is deep fill the process's slots, yet another tenant's event goes out promptly. Within one organization the
// organization's bound leaves slots free; across organizations a freed slot goes to the least busy tenant first, not
// to the oldest backlog.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { sql } from '../../shared/db/client'
import { recordEvent } from '../../shared/webhooks/outbox'
import { call, eventually, newProduct, ok, startProcess, type Worker } from '../helpers'
import { type Receiver, startReceiver } from './receiver'

type Owner = { token: string; productId: string }

const ENV = {
  WEBHOOK_RETRY_SCHEDULE: Array(10).fill('300ms').join(','), WEBHOOK_TIMEOUT_MS: '3000', WEBHOOK_LEASE_MS: '5000',
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

/**
 * Another tenant's event, delivered to a receiver that answers at once: answers how many hanging attempts had been
 * started when it arrived. Judged by what happened before it, not by a clock: a freed slot taken by a hog's backlog
 * starts another hanging attempt first.
 */
async function hangingAttemptsBeforePolite(): Promise<number> {
  const owner = await newProduct()
  const path = newPath('polite')
  let before: number | undefined
  receiver.on(path, () => {
    before ??= open
    return new Response('ok')
  })
  ok(await call('POST', '/mail/webhooks', {
    token: owner.token, productId: owner.productId, body: { url: receiver.url(path), eventKinds: ['*'] },
  }), 'create endpoint')
  await event(owner)
  return eventually(() => before, 20_000, 'the polite delivery')
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
  // Delivered while the organization's first six attempts still hang: no slot had to be freed for it (before the fix it
  // waited for their timeout, and the hogs' next attempts started first).
  expect(await hangingAttemptsBeforePolite()).toBe(6)
  expect(open).toBe(6) // WEBHOOK_ORGANIZATION_CONCURRENCY, though its products could hold 16 and the process runs 8
  for (const [i, id] of hooks.entries()) {
    ok(await call('DELETE', `/mail/webhooks/${id}`, { token: owner.token, productId: products[i]! }), 'delete endpoint')
  }
})

test('a freed slot goes to the least busy tenant, not to the oldest backlog of the tenants that fill the process', async () => {
  open = 0
  const owners = [await newProduct(), await newProduct(), await newProduct(), await newProduct()]
  const hooks = []
  for (const owner of owners) hooks.push(await hog(owner, 10))
  // Once the previous test's attempts have timed out, these fill the process.
  await eventually(() => open >= 8, 10_000, 'the process full')
  // Every slot hangs until its attempt times out; the polite event takes one of the first slots freed, before the
  // hogs' second round has filled them all again (before the fix it waited for most of their 40-event backlog).
  expect(await hangingAttemptsBeforePolite()).toBeLessThan(16)
  for (const [i, id] of hooks.entries()) {
    ok(await call('DELETE', `/mail/webhooks/${id}`, { token: owners[i]!.token, productId: owners[i]!.productId }), 'delete endpoint')
  }
})
