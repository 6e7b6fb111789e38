// The webhooks process under faults, with real processes and a real receiver on loopback: an endpoint failing for
// longer than WEBHOOK_DISABLE_AFTER_MS (shortened) is disabled and the product told why; slow receivers hold at most
// WEBHOOK_ENDPOINT_CONCURRENCY attempts each and WEBHOOK_PRODUCT_CONCURRENCY per product while another tenant's events
// go out at once; a process SIGKILLed while the
// receiver holds its request loses nothing once another runs; SIGTERM finishes and records the attempt in flight.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { sql } from '../../shared/db/client'
import { recordEvent } from '../../shared/webhooks/outbox'
import { call, eventually, newProduct, ok, startProcess, type Worker } from '../helpers'
import { type Receiver, startReceiver, verified } from './receiver'

type Owner = { token: string; productId: string }
const as = (owner: Owner, extra: Record<string, unknown> = {}) => ({ token: owner.token, productId: owner.productId, ...extra })

const ENV = {
  WEBHOOK_RETRY_SCHEDULE: Array(10).fill('300ms').join(','), WEBHOOK_TIMEOUT_MS: '2000', WEBHOOK_LEASE_MS: '3000',
  WEBHOOK_DISABLE_AFTER_MS: '1500', WEBHOOK_ENDPOINT_CONCURRENCY: '2', WEBHOOK_PRODUCT_CONCURRENCY: '3', WEBHOOK_POLL_MS: '50',
}

let receiver: Receiver
let webhooks: Worker
beforeAll(async () => {
  receiver = startReceiver()
  webhooks = await startProcess('webhooks', ENV, { logs: true })
})
afterAll(async () => {
  await webhooks?.stop()
  receiver?.stop()
})

const newPath = (what: string) => `/${what}/${crypto.randomUUID().slice(0, 8)}`

async function endpoint(owner: Owner, path: string) {
  return ok(await call('POST', '/mail/webhooks', as(owner, { body: { url: receiver.url(path), eventKinds: ['*'] } })), 'create endpoint').body
}

const event = (owner: Owner, data: unknown = {}) =>
  sql.begin((tx) => recordEvent(tx, { productId: owner.productId, area: 'mail', kind: 'email.failed', data }))

const deliveryRows = (endpointId: string) =>
  sql`select d.id, d.state, d.attempts, (select count(*)::int from webhook_attempts a where a.delivery_id = d.id) as recorded
    from webhook_deliveries d where endpoint_id = ${endpointId} order by created_at`

test('an endpoint failing for longer than the window is disabled, the reason shown on get and logged; its delivery waits', async () => {
  const owner = await newProduct()
  const path = newPath('down')
  receiver.on(path, () => new Response('down', { status: 502 }))
  const hook = await endpoint(owner, path)
  await event(owner)
  const got = await eventually(async () => {
    const endpoint = ok(await call('GET', `/mail/webhooks/${hook.id}`, as(owner)), 'get').body
    return !endpoint.enabled && endpoint
  }, 8000, 'the endpoint disabled')
  expect(got.disabledReason).toMatch(/^Every attempt since \S+ failed \(the last: HTTP 502\): disabled after 1.5 s of failures\. Enable it again/)
  const line = await eventually(() => webhooks.logs().find((l) => l.msg === 'webhook endpoint disabled' && l.endpointId === hook.id), 3000, 'the log line')
  expect(line).toMatchObject({ level: 'warn', productId: owner.productId, reason: got.disabledReason })
  // About 1.5 s of attempts 300 ms apart: more than a few, fewer than the schedule's eleven.
  const [row] = await deliveryRows(hook.id)
  expect(row!.state).toBe('pending')
  expect(row!.attempts).toBeGreaterThanOrEqual(4)
  expect(row!.attempts).toBeLessThan(11)
  await Bun.sleep(700) // a disabled endpoint's deliveries are not claimed
  expect((await deliveryRows(hook.id))[0]!.attempts).toBe(row!.attempts)
  expect(receiver.received(path)).toHaveLength(row!.attempts)
})

test("slow receivers hold at most their endpoint's and their product's share of attempts; another tenant's events go out at once", async () => {
  const slow = await newProduct()
  const polite = await newProduct()
  const slowPaths = [newPath('slow'), newPath('slow')]
  const politePath = newPath('polite')
  const open = new Map<string, number>()
  const most = { total: 0, endpoint: 0 }
  let finished = 0
  for (const path of slowPaths) {
    receiver.on(path, async () => {
      open.set(path, (open.get(path) ?? 0) + 1)
      most.endpoint = Math.max(most.endpoint, open.get(path)!)
      most.total = Math.max(most.total, [...open.values()].reduce((a, b) => a + b, 0))
      await Bun.sleep(1200)
      open.set(path, open.get(path)! - 1)
      finished++
      return new Response('ok')
    })
  }
  const slowHooks = [await endpoint(slow, slowPaths[0]!), await endpoint(slow, slowPaths[1]!)]
  await endpoint(polite, politePath)
  for (let i = 0; i < 4; i++) await event(slow, { i }) // each goes to both slow endpoints
  await eventually(() => [...open.values()].reduce((a, b) => a + b, 0) === 3, 3000, 'three slow attempts open')
  // Not behind the slow receivers' queue: delivered while their first three attempts still hang, none finished.
  let finishedBeforePolite: number | undefined
  receiver.on(politePath, () => {
    finishedBeforePolite ??= finished
    return new Response('ok')
  })
  await event(polite)
  expect(await eventually(() => finishedBeforePolite !== undefined && { finishedBeforePolite }, 10_000, 'the polite delivery')).toEqual({ finishedBeforePolite: 0 })
  for (const hook of slowHooks) {
    await eventually(async () => (await deliveryRows(hook.id)).every((d) => d.state === 'succeeded'), 10_000, 'the slow ones delivered')
  }
  expect(most).toEqual({ total: 3, endpoint: 2 }) // WEBHOOK_PRODUCT_CONCURRENCY, WEBHOOK_ENDPOINT_CONCURRENCY
  expect(slowPaths.map((path) => receiver.received(path).length)).toEqual([4, 4])
})

test('a process SIGKILLed while the receiver holds its request loses nothing: another delivers it, same webhook-id', async () => {
  const owner = await newProduct()
  const path = newPath('hold')
  let release: () => void = () => {}
  const held = new Promise<void>((resolve) => (release = resolve))
  receiver.on(path, (_, nth) => (nth === 1 ? held.then(() => new Response('too late')) : new Response('ok')))
  const hook = await endpoint(owner, path)
  const messageId = await event(owner, { kill: true })
  try {
    await eventually(() => receiver.received(path).length === 1, 5000, 'the first request')
    expect(await webhooks.stop('SIGKILL')).not.toBe(0)
    webhooks = await startProcess('webhooks', ENV, { logs: true })
    // The lease (3 s) runs out, the new process claims the delivery again and makes the attempt anew.
    await eventually(async () => (await deliveryRows(hook.id))[0]?.state === 'succeeded', 10_000, 'delivered by the second process')
  } finally {
    release()
  }
  const requests = receiver.received(path)
  expect(requests.map((r) => r.headers['webhook-id'])).toEqual([messageId, messageId])
  expect(verified(hook.secret, requests[1]!).data).toEqual({ kill: true })
  // The attempt cut off by the kill was never recorded, so it costs no retry; the one that succeeded is.
  expect([...await deliveryRows(hook.id)]).toEqual([{ id: expect.any(String), state: 'succeeded', attempts: 1, recorded: 1 }])
})

test('SIGTERM finishes the attempt in flight and records it before the process exits 0', async () => {
  const owner = await newProduct()
  const path = newPath('drain')
  receiver.on(path, () => Bun.sleep(800).then(() => new Response('done')))
  const hook = await endpoint(owner, path)
  await event(owner)
  await eventually(() => receiver.received(path).length === 1, 5000, 'the request')
  expect(await webhooks.stop('SIGTERM')).toBe(0)
  expect([...await deliveryRows(hook.id)]).toEqual([{ id: expect.any(String), state: 'succeeded', attempts: 1, recorded: 1 }])
})

test('a delivery claimed three times without an outcome (its process stopped each time) is recorded as a failed attempt, then retried', async () => {
  const owner = await newProduct()
  const path = newPath('poison')
  receiver.on(path, () => new Response('ok'))
  const hook = await endpoint(owner, path)
  ok(await call('PATCH', `/mail/webhooks/${hook.id}`, as(owner, { body: { enabled: false } })), 'disable')
  // As three processes that each claimed it and died would leave it: claimed three times, nothing recorded.
  const id = `msg_poison${crypto.randomUUID().replaceAll('-', '').slice(0, 12)}`
  await sql`insert into webhook_messages (id, product_id, area, kind, payload) values (${id}, ${owner.productId}, 'mail', 'email.failed', '{}')`
  await sql`insert into webhook_deliveries (message_id, endpoint_id, claims) values (${id}, ${hook.id}, 3)`
  webhooks = await startProcess('webhooks', ENV, { logs: true }) // the previous test stopped the process
  ok(await call('PATCH', `/mail/webhooks/${hook.id}`, as(owner, { body: { enabled: true } })), 'enable')
  await eventually(async () => (await deliveryRows(hook.id))[0]?.state === 'succeeded', 5000, 'delivered on the retry')
  const attempts = await sql`
    select a.status_code, a.error from webhook_attempts a join webhook_deliveries d on d.id = a.delivery_id
    where d.endpoint_id = ${hook.id} order by a.id`
  expect([...attempts]).toEqual([
    { status_code: null, error: 'not completed: the process stopped during the attempt 3 times' },
    { status_code: 200, error: null },
  ])
  expect(receiver.received(path)).toHaveLength(1)
  expect((await sql`select claims from webhook_deliveries where endpoint_id = ${hook.id}`)[0]!.claims).toBe(0)
})
