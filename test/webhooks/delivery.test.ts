// Webhook delivery by a real webhooks process to a real receiver on loopback, every signature verified with the
// `standardwebhooks` library: an event delivered once with the documented payload to the endpoints that want it only;
// retries on 500 and on a timeout on the shortened schedule, each attempt recorded; 410 disables the endpoint; a
// redirect is a failure; replay and the test event; and deliveries invisible to another product (404).
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { sql } from '../../shared/db/client'
import { recordEvent } from '../../shared/webhooks/outbox'
import { call, eventually, expectError, newProduct, ok, startProcess, type Worker } from '../helpers'
import { type Receiver, startReceiver, verified } from './receiver'

type Owner = { token: string; productId: string }
const as = (owner: Owner, extra: Record<string, unknown> = {}) => ({ token: owner.token, productId: owner.productId, ...extra })

// Three attempts: at once, then 200 ms and 300 ms later. An attempt times out after 600 ms.
const SCHEDULE = '200ms,300ms'
const TIMEOUT_MS = 600

let receiver: Receiver
let webhooks: Worker
beforeAll(async () => {
  receiver = startReceiver()
  webhooks = await startProcess('webhooks', {
    WEBHOOK_RETRY_SCHEDULE: SCHEDULE, WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS), WEBHOOK_LEASE_MS: '5000', WEBHOOK_POLL_MS: '50',
  })
})
afterAll(async () => {
  await webhooks?.stop()
  receiver?.stop()
})

let paths = 0
/** A path of its own for one endpoint, so each test reads only what its endpoints received. */
const newPath = (what: string) => `/${what}/${++paths}-${crypto.randomUUID().slice(0, 8)}`

async function endpoint(owner: Owner, path: string, body: Record<string, unknown> = {}, area = 'mail') {
  return ok(await call('POST', `/${area}/webhooks`, as(owner, { body: { url: receiver.url(path), eventKinds: ['*'], ...body } })), 'create endpoint').body
}

const bounced = (owner: Owner, data: unknown = { emailId: crypto.randomUUID() }, dedupeKey?: string) =>
  sql.begin((tx) => recordEvent(tx, { productId: owner.productId, area: 'mail', kind: 'email.bounced', data, ...(dedupeKey ? { dedupeKey } : {}) }))

async function deliveries(owner: Owner, endpointId: string) {
  return ok(await call('GET', `/mail/webhooks/${endpointId}/deliveries`, as(owner)), 'list deliveries').body.data as any[]
}

async function delivery(owner: Owner, endpointId: string, deliveryId: string) {
  return ok(await call('GET', `/mail/webhooks/${endpointId}/deliveries/${deliveryId}`, as(owner)), 'get delivery').body
}

/** The endpoint's only delivery once it is no longer pending. */
async function settled(owner: Owner, endpointId: string, ms = 10_000) {
  return eventually(async () => {
    const [only] = await deliveries(owner, endpointId)
    return only && only.state !== 'pending' ? delivery(owner, endpointId, only.id) : null
  }, ms, 'a settled delivery')
}

describe('delivery', () => {
  test('an event is delivered once, signed, with the documented payload, to the enabled endpoints that want its kind only', async () => {
    const owner = await newProduct()
    const stranger = await newProduct()
    const paths = { wants: newPath('ok'), every: newPath('ok'), other: newPath('ok'), disabled: newPath('ok'), stranger: newPath('ok'), realtime: newPath('ok') }
    const wants = await endpoint(owner, paths.wants, { eventKinds: ['email.bounced', 'email.failed'] })
    const every = await endpoint(owner, paths.every)
    await endpoint(owner, paths.other, { eventKinds: ['email.sent'] })
    await endpoint(owner, paths.disabled, { enabled: false })
    await endpoint(stranger, paths.stranger)
    await endpoint(owner, paths.realtime, {}, 'realtime')
    const data = { emailId: crypto.randomUUID(), to: ['a@example.org'], reason: 'mailbox unknown', unicode: 'é\u0000✓' }
    const before = Date.now()
    const messageId = await bounced(owner, data)
    expect(messageId).toMatch(/^msg_[A-Za-z0-9_-]{24}$/)

    for (const [path, secret] of [[paths.wants, wants.secret], [paths.every, every.secret]] as const) {
      const [request] = await eventually(() => receiver.received(path).length > 0 && receiver.received(path), 5000, `a request on ${path}`)
      expect(request!.headers['webhook-id']).toBe(messageId)
      expect(request!.headers['content-type']).toBe('application/json')
      const payload = verified(secret, request!)
      expect(payload).toEqual({ type: 'email.bounced', timestamp: expect.any(String), data })
      expect(Object.keys(JSON.parse(request!.body))).toEqual(['type', 'timestamp', 'data']) // the documented order
      expect(Date.parse(payload.timestamp)).toBeGreaterThanOrEqual(before - 1000)
    }
    const done = await settled(owner, wants.id)
    expect(done).toMatchObject({
      messageId, eventKind: 'email.bounced', state: 'succeeded', attemptCount: 1, nextAttemptAt: null, replayOf: null,
      payload: { type: 'email.bounced', data },
      attempts: [{ attemptedAt: expect.any(String), durationMs: expect.any(Number), statusCode: 200, error: null, responseExcerpt: 'ok' }],
    })
    expect(done.lastAttempt).toEqual(done.attempts[0])
    await Bun.sleep(400) // nothing more arrives
    expect([receiver.received(paths.wants).length, receiver.received(paths.every).length]).toEqual([1, 1])
    for (const path of [paths.other, paths.disabled, paths.stranger, paths.realtime]) expect([path, receiver.received(path).length]).toEqual([path, 0])
  })

  test('an event is recorded only when its transaction commits, and once per dedupe key', async () => {
    const owner = await newProduct()
    const path = newPath('ok')
    const hook = await endpoint(owner, path)
    await sql.begin(async (tx) => {
      await recordEvent(tx, { productId: owner.productId, area: 'mail', kind: 'email.bounced', data: {} })
      throw new Error('rolled back')
    }).catch(() => {})
    const key = `bounce:${crypto.randomUUID()}`
    const first = await bounced(owner, { n: 1 }, key)
    expect(await bounced(owner, { n: 2 }, key)).toBe(first)
    await settled(owner, hook.id)
    await Bun.sleep(300)
    expect(receiver.received(path).map((r) => [r.headers['webhook-id'], JSON.parse(r.body).data])).toEqual([[first, { n: 1 }]])
    expect(await deliveries(owner, hook.id)).toHaveLength(1)
  })

  test('a 500 is retried on the schedule and the delivery fails after the last retry, every attempt recorded', async () => {
    const owner = await newProduct()
    const path = newPath('fail')
    receiver.on(path, () => new Response('broken', { status: 500 }))
    const hook = await endpoint(owner, path)
    const messageId = await bounced(owner)
    const done = await settled(owner, hook.id)
    expect(done).toMatchObject({ messageId, state: 'failed', attemptCount: 3, nextAttemptAt: null })
    expect(done.attempts.map((a: any) => [a.statusCode, a.error, a.responseExcerpt])).toEqual([[500, null, 'broken'], [500, null, 'broken'], [500, null, 'broken']])
    const times = receiver.received(path).map((r) => r.at)
    expect(times).toHaveLength(3)
    expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(190)
    expect(times[2]! - times[1]!).toBeGreaterThanOrEqual(290)
    // each attempt signed afresh, with the same webhook-id
    for (const request of receiver.received(path)) expect(verified(hook.secret, request).type).toBe('email.bounced')
    expect(new Set(receiver.received(path).map((r) => r.headers['webhook-id']))).toEqual(new Set([messageId]))
    const got = ok(await call('GET', `/mail/webhooks/${hook.id}`, as(owner)), 'get').body
    expect([got.enabled, got.disabledReason]).toEqual([true, null]) // far from the 5 days of failures
  })

  test('a receiver that does not answer in time is retried, each timeout recorded; a later success ends the chain', async () => {
    const owner = await newProduct()
    const path = newPath('slow')
    receiver.on(path, (_, nth) => (nth < 3 ? Bun.sleep(TIMEOUT_MS + 700).then(() => new Response('late')) : new Response('at last')))
    const hook = await endpoint(owner, path)
    await bounced(owner)
    const done = await settled(owner, hook.id, 15_000)
    expect(done.state).toBe('succeeded')
    expect(done.attempts.map((a: any) => [a.statusCode, a.error])).toEqual([
      [null, `no answer within ${TIMEOUT_MS} ms`], [null, `no answer within ${TIMEOUT_MS} ms`], [200, null],
    ])
    expect(done.attempts[0].durationMs).toBeGreaterThanOrEqual(TIMEOUT_MS - 50)
    const [row] = await sql`select failing_since from webhook_endpoints where id = ${hook.id}`
    expect(row!.failing_since).toBeNull() // the success ended the failing streak
  })

  test('a 2xx is a success by its status alone: one whose body stalls past the timeout is not retried', async () => {
    const owner = await newProduct()
    const path = newPath('stalls')
    receiver.on(path, () => new Response(new ReadableStream({ async start(controller) {
      controller.enqueue(new TextEncoder().encode('taken'))
      await Bun.sleep(TIMEOUT_MS + 700)
      controller.close()
    } })))
    const hook = await endpoint(owner, path)
    await bounced(owner)
    const done = await settled(owner, hook.id)
    expect(done.state).toBe('succeeded')
    expect(done.attempts.map((a: any) => [a.statusCode, a.responseExcerpt, a.error])).toEqual([
      [200, 'taken', `answer cut short: not complete within ${TIMEOUT_MS} ms`],
    ])
    expect(receiver.received(path)).toHaveLength(1)
  })

  test('410 Gone disables the endpoint at once, with the reason shown; later events do not go to it', async () => {
    const owner = await newProduct()
    const path = newPath('gone')
    receiver.on(path, () => new Response('gone', { status: 410 }))
    const hook = await endpoint(owner, path)
    await bounced(owner)
    const done = await settled(owner, hook.id)
    expect([done.state, done.attemptCount, done.attempts[0].statusCode]).toEqual(['failed', 1, 410])
    const got = ok(await call('GET', `/mail/webhooks/${hook.id}`, as(owner)), 'get').body
    expect(got.enabled).toBe(false)
    expect(got.disabledReason).toMatch(/^The endpoint answered 410 Gone at .*: disabled at once/)
    await bounced(owner)
    expect(await deliveries(owner, hook.id)).toHaveLength(1)
    // enabling clears the reason
    const enabled = ok(await call('PATCH', `/mail/webhooks/${hook.id}`, as(owner, { body: { enabled: true } })), 'enable').body
    expect([enabled.enabled, enabled.disabledReason]).toEqual([true, null])
  })

  test('a redirect is not followed: each attempt is a failure recording its Location', async () => {
    const owner = await newProduct()
    const path = newPath('moved')
    const target = newPath('target')
    receiver.on(path, () => new Response(null, { status: 307, headers: { location: receiver.url(target) } }))
    const hook = await endpoint(owner, path)
    await bounced(owner)
    const done = await settled(owner, hook.id)
    expect(done.state).toBe('failed')
    expect(done.attempts.map((a: any) => [a.statusCode, a.error])).toEqual(Array(3).fill([307, `redirect not followed (Location: ${receiver.url(target)})`]))
    expect(receiver.received(target)).toHaveLength(0)
  })

  test('a connection that fails is shown in fixed words: a closed port, https to a port without TLS, a port outside the rule', async () => {
    const owner = await newProduct()
    const closed = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } })
    const closedPort = closed.port
    closed.stop(true)
    const plainPort = Number(new URL(receiver.url('/')).port)
    const refused = await endpoint(owner, '', { url: `http://127.0.0.1:${closedPort}/hook` })
    const noTls = await endpoint(owner, '', { url: `https://127.0.0.1:${plainPort}/hook` })
    // An endpoint stored before the port rule: the attempt is refused, nothing connects.
    const old = await endpoint(owner, newPath('old'))
    await sql`update webhook_endpoints set url = 'http://127.0.0.1:22/hook' where id = ${old.id}`
    await bounced(owner)
    const errors = async (hook: { id: string }) => (await settled(owner, hook.id)).attempts.map((a: any) => [a.statusCode, a.error])
    expect(await errors(refused)).toEqual(Array(3).fill([null, 'connection refused']))
    expect(await errors(noTls)).toEqual(Array(3).fill([null, 'TLS failed']))
    expect(await errors(old)).toEqual(Array(3).fill([null, 'port 22 is not allowed']))
    const listed = JSON.stringify(await Promise.all([refused, noTls, old].map((hook) => deliveries(owner, hook.id))))
    expect([listed.includes(String(closedPort)), listed.includes(String(plainPort)), /ECONN|SSL|WRONG_VERSION/.test(listed)]).toEqual([false, false, false])
  })

  test('replay delivers the message again with the same webhook-id and body: a new delivery on the full schedule', async () => {
    const owner = await newProduct()
    const path = newPath('replay')
    let up = false
    receiver.on(path, () => (up ? new Response('thanks') : new Response('down', { status: 503 })))
    const hook = await endpoint(owner, path)
    const messageId = await bounced(owner, { emailId: 'e1' })
    const failed = await settled(owner, hook.id)
    expect(failed.state).toBe('failed')
    up = true
    const replay = ok(await call('POST', `/mail/webhooks/${hook.id}/deliveries/${failed.id}/replay`, as(owner)), 'replay').body
    // (the webhooks process may have attempted it already by the time the answer is read: no count asserted here)
    expect(replay).toMatchObject({ messageId, replayOf: failed.id, payload: failed.payload })
    expect(replay.id).not.toBe(failed.id)
    const done = await eventually(async () => {
      const got = await delivery(owner, hook.id, replay.id)
      return got.state === 'succeeded' && got
    }, 5000, 'the replay delivered')
    expect(done.attempts.map((a: any) => a.statusCode)).toEqual([200])
    const requests = receiver.received(path)
    expect(requests).toHaveLength(4)
    expect(new Set(requests.map((r) => r.headers['webhook-id']))).toEqual(new Set([messageId]))
    expect(new Set(requests.map((r) => r.body)).size).toBe(1)
    expect(verified(hook.secret, requests[3]!).data).toEqual({ emailId: 'e1' })
    // newest first: the replay, then the delivery it replays
    expect((await deliveries(owner, hook.id)).map((d) => d.id)).toEqual([replay.id, failed.id])
  })

  test('a test event goes to the one endpoint asked for, signed, with the documented payload', async () => {
    const owner = await newProduct()
    const path = newPath('test-event')
    const other = newPath('test-event')
    const hook = await endpoint(owner, path, {}, 'realtime')
    await endpoint(owner, other, {}, 'realtime')
    const sent = ok(await call('POST', `/realtime/webhooks/${hook.id}/test`, as(owner)), 'send test').body
    expect(sent).toMatchObject({ eventKind: 'webhook.test', replayOf: null, payload: { type: 'webhook.test' } })
    const [request] = await eventually(() => receiver.received(path).length > 0 && receiver.received(path), 5000, 'the test event')
    expect(request!.headers['webhook-id']).toBe(sent.messageId)
    expect(verified(hook.secret, request!)).toEqual({
      type: 'webhook.test', timestamp: expect.any(String),
      data: { endpointId: hook.id, message: 'A test event, sent on request: nothing happened.' },
    })
    const listed = ok(await call('GET', `/realtime/webhooks/${hook.id}/deliveries`, as(owner)), 'list').body
    expect(Object.keys(listed).sort()).toEqual(['deliveries', 'has_more'])
    await Bun.sleep(200)
    expect(receiver.received(other)).toHaveLength(0)
  })

  test('during a rotation overlap an attempt carries both signatures: either secret verifies', async () => {
    const owner = await newProduct()
    const path = newPath('rotated')
    const hook = await endpoint(owner, path)
    const rotated = ok(await call('POST', `/mail/webhooks/${hook.id}/rotate-secret`, as(owner)), 'rotate').body
    await bounced(owner)
    const [request] = await eventually(() => receiver.received(path).length > 0 && receiver.received(path), 5000, 'a request')
    expect(request!.headers['webhook-signature']!.split(' ')).toHaveLength(2)
    expect(verified(hook.secret, request!).type).toBe('email.bounced')
    expect(verified(rotated.secret, request!).type).toBe('email.bounced')
  })
})

describe('management of deliveries', () => {
  test('deliveries are listed newest first with cursor pagination, each with its last attempt', async () => {
    const owner = await newProduct()
    const path = newPath('ok')
    const hook = await endpoint(owner, path)
    for (let i = 0; i < 3; i++) await bounced(owner, { i })
    await eventually(async () => (await deliveries(owner, hook.id)).every((d) => d.state === 'succeeded'), 5000, 'three delivered')
    const first = ok(await call('GET', `/mail/webhooks/${hook.id}/deliveries?limit=2`, as(owner)), 'page 1').body
    expect(Object.keys(first)).toEqual(['object', 'has_more', 'data'])
    expect(first.has_more).toBe(true)
    const second = ok(await call('GET', `/mail/webhooks/${hook.id}/deliveries?limit=2&after=${first.data[1].id}`, as(owner)), 'page 2').body
    expect([second.data.length, second.has_more]).toEqual([1, false])
    const all = [...first.data, ...second.data]
    const datas = await Promise.all(all.map(async (d) => (await delivery(owner, hook.id, d.id)).payload.data.i))
    expect(datas).toEqual([2, 1, 0])
    expect(all[0].lastAttempt).toMatchObject({ statusCode: 200, responseExcerpt: 'ok' })
    expect(all[0]).not.toHaveProperty('attempts')
  })

  test("another product's endpoint and deliveries are 404 on list, get, replay and test; bad ids too; a disabled endpoint is 409", async () => {
    const owner = await newProduct()
    const stranger = await newProduct()
    const hook = await endpoint(owner, newPath('ok'))
    const mine = await endpoint(stranger, newPath('ok'))
    await bounced(owner)
    const [only] = await eventually(async () => (await deliveries(owner, hook.id)).length > 0 && deliveries(owner, hook.id), 5000, 'a delivery')
    const base = `/mail/webhooks/${hook.id}`
    for (const [method, path] of [
      ['GET', `${base}/deliveries`], ['GET', `${base}/deliveries/${only.id}`], ['POST', `${base}/deliveries/${only.id}/replay`], ['POST', `${base}/test`],
      // the stranger's own endpoint does not make the owner's delivery its own
      ['GET', `/mail/webhooks/${mine.id}/deliveries/${only.id}`], ['POST', `/mail/webhooks/${mine.id}/deliveries/${only.id}/replay`],
      // the other area's routes do not see it either
      ['GET', `/realtime/webhooks/${hook.id}/deliveries`],
    ] as const) {
      const result = await call(method, path, as(stranger))
      expect([method, path, result.status]).toEqual([method, path, 404])
    }
    expectError(await call('GET', `${base}/deliveries/not-a-uuid`, as(owner)), 404, 'not_found')
    expectError(await call('GET', `${base}/deliveries?after=${crypto.randomUUID()}`, as(owner)), 400, 'validation_failed')
    expectError(await call('GET', `${base}/deliveries?limit=0`, as(owner)), 400, 'validation_failed')
    ok(await call('PATCH', base, as(owner, { body: { enabled: false } })), 'disable')
    expectError(await call('POST', `${base}/test`, as(owner)), 409, 'conflict')
    expectError(await call('POST', `${base}/deliveries/${only.id}/replay`, as(owner)), 409, 'conflict')
  })
})
