// The SDK's retry policy. Against a real public worker: a real 429 is a typed, retryable error carrying Retry-After.
// Against a stand-in HTTP server scripted per request (the policy's cases, which a real worker cannot be made to
// answer on demand): reads and keyed writes retried on temporary errors, honouring Retry-After; plain writes only on
// 429; a proxy's answers read as the platform's; attempts and the total wait bounded; inputs that cannot be sent refused
// before any request; redirects never followed.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { IDEMPOTENCY_KEY_MAX_CHARS as PLATFORM_MAX } from '../../shared/http/idempotency-key'
import { createTransport, IDEMPOTENCY_KEY_MAX_CHARS, retryAfterMs } from '../../shared/sdk/src/http'
import { Platform } from '../../shared/sdk/src/index'
import { startProcess, type Worker } from '../helpers'
import { awayFromWindowEdge, realtimeProduct, uniqueIp, type RealtimeProduct } from '../realtime/public-helpers'

const PRODUCT = '00000000-0000-4000-8000-000000000001'

/** A stand-in for the public worker: answers each request with the next scripted answer, recording what it got. */
function standIn() {
  const script: (() => Response | Promise<Response>)[] = []
  const seen: { method: string; path: string; search: string; idempotencyKey: string | null; at: number }[] = []
  const server = Bun.serve({
    port: 0,
    fetch(request) {
      const url = new URL(request.url)
      seen.push({ method: request.method, path: url.pathname, search: url.search, idempotencyKey: request.headers.get('idempotency-key'), at: performance.now() })
      return (script.shift() ?? (() => new Response('no answer scripted', { status: 599 })))()
    },
  })
  const answer = (...answers: (() => Response | Promise<Response>)[]) => {
    script.length = 0
    seen.length = 0
    script.push(...answers)
  }
  return { server, seen, answer, url: `http://127.0.0.1:${server.port}` }
}

const error = (status: number, code: string, headers: Record<string, string> = {}) => () =>
  Response.json({ error: code, message: `${code} from the stand-in` }, { status, headers })
const ok = (body: unknown) => () => Response.json(body)

let stand: ReturnType<typeof standIn>
let worker: Worker
let product: RealtimeProduct

beforeAll(async () => {
  stand = standIn()
  ;[worker, product] = await Promise.all([startProcess('public', { TRUST_PROXY: '1', PUBLIC_IP_RATE_LIMIT: '1' }), realtimeProduct()])
}, 30_000)

afterAll(async () => {
  stand?.server.stop(true)
  await worker?.stop()
})

const platform = (options: { maxRetries?: number; maxRetryWaitMs?: number; timeoutMs?: number; fetch?: typeof fetch } = {}) =>
  new Platform({ baseUrl: stand.url, productId: PRODUCT, realtimeKey: 'rtk_x', captureKey: 'ptk_x', mailKey: 'lmk_x', ...options })

describe('against a real public worker', () => {
  test('a 429 past the address limit is rate_limited, retryable, with the Retry-After the worker sent', async () => {
    await awayFromWindowEdge(60, 2000)
    const ip = uniqueIp()
    let requests = 0
    const fromOneAddress: typeof fetch = Object.assign((input: RequestInfo | URL, init?: RequestInit) => {
      requests++
      return fetch(input, { ...init, headers: { ...(init?.headers as Record<string, string>), 'x-forwarded-for': ip } })
    }, { preconnect: fetch.preconnect })
    // maxRetryWaitMs 0: the worker asks for seconds, so the SDK answers the error instead of waiting.
    const client = new Platform({ baseUrl: worker.url, productId: product.productId, realtimeKey: product.key, fetch: fromOneAddress, maxRetryWaitMs: 0 })
    expect((await client.realtime.channels.get('chat:a')).error).toBeNull()
    const { data, error } = await client.realtime.channels.get('chat:a')
    expect(data).toBeNull()
    expect(error).toMatchObject({ code: 'rate_limited', statusCode: 429, retryable: true })
    expect(error!.retryAfterMs).toBeGreaterThanOrEqual(1000)
    expect(error!.retryAfterMs).toBeLessThanOrEqual(60_000)
    expect(requests).toBe(2)
  })
})

describe('the retry policy', () => {
  test('a read answered 503 with Retry-After is retried after that wait and answers the data', async () => {
    stand.answer(error(503, 'unavailable', { 'retry-after': '1' }), ok({ channel: 'chat:a', members: [] }))
    expect(await platform().realtime.channels.presence('chat:a')).toEqual({ data: { channel: 'chat:a', members: [] }, error: null })
    expect(stand.seen).toHaveLength(2)
    expect(stand.seen[1]!.at - stand.seen[0]!.at).toBeGreaterThanOrEqual(990)
  })

  test('a publish answered 429 quota_exceeded is retried with the same Idempotency-Key', async () => {
    stand.answer(error(429, 'quota_exceeded', { 'retry-after': '0' }), ok({ id: 'm1', channel: 'chat:a', offset: 1, epoch: 'e' }))
    const { data } = await platform().realtime.messages.publish({ channel: 'chat:a', data: 1 })
    expect(data).toEqual({ id: 'm1', channel: 'chat:a', offset: 1, epoch: 'e' })
    expect(stand.seen.map((request) => request.idempotencyKey)).toEqual([expect.any(String), stand.seen[0]!.idempotencyKey])
  })

  test('a caller-chosen Idempotency-Key is the one sent', async () => {
    stand.answer(ok({ id: 'e1' }))
    await platform().mail.emails.send({ from: 'a@b.example', to: 'c@d.example', subject: 'Hi', text: 'Hi' }, { idempotencyKey: 'order-42' })
    expect(stand.seen.map((request) => request.idempotencyKey)).toEqual(['order-42'])
  })

  test('a capture (no Idempotency-Key) is retried on 429 but not on a 503, a 500 or a proxy 502: it may have been stored', async () => {
    const batch = { events: [{ event: 'e', identity: { anonymous_id: 'a' } }] }
    stand.answer(error(429, 'rate_limited', { 'retry-after': '0' }), ok({ accepted: 1 }))
    expect(await platform().analytics.capture(batch)).toEqual({ data: { accepted: 1 }, error: null })
    expect(stand.seen.map((request) => request.path)).toEqual([`/${PRODUCT}/capture`, `/${PRODUCT}/capture`])

    // The platform answers 503 for a statement past its deadline, which still finishes: a repeat would store twice.
    stand.answer(error(503, 'unavailable', { 'retry-after': '0' }), ok({ accepted: 1 }))
    expect((await platform().analytics.capture(batch)).error).toMatchObject({ code: 'unavailable', statusCode: 503, retryable: false })
    expect(stand.seen).toHaveLength(1)

    stand.answer(error(500, 'internal'), ok({ accepted: 1 }))
    const failed = await platform().analytics.capture(batch)
    expect(failed.error).toMatchObject({ code: 'internal', statusCode: 500, retryable: false })
    expect(stand.seen).toHaveLength(1)

    stand.answer(() => new Response('<html>bad gateway</html>', { status: 502 }), ok({ accepted: 1 }))
    const proxied = await platform().analytics.capture(batch)
    expect(proxied.error).toMatchObject({ code: 'invalid_response', statusCode: 502, retryable: false })
    expect(stand.seen).toHaveLength(1)
  })

  test('a template create or a domain remove answered 503 is not repeated (no 409 for what was created, no 404 for what was removed)', async () => {
    stand.answer(error(503, 'unavailable', { 'retry-after': '0' }), error(409, 'conflict'))
    const created = await platform().mail.templates.create({ name: 'welcome', subject: 'Hi', html: '<p>Hi</p>' })
    expect(created.error).toMatchObject({ code: 'unavailable', statusCode: 503, retryable: false })
    stand.answer(() => new Response('upstream down', { status: 503, headers: { 'retry-after': '0' } }), error(404, 'not_found'))
    const removed = await platform().mail.domains.remove('d1')
    expect(removed.error).toMatchObject({ code: 'unavailable', statusCode: 503, retryable: false })
    expect(stand.seen.map((request) => request.method)).toEqual(['DELETE'])
  })

  test('a publish answered 503 is retried with the same Idempotency-Key: the platform dedupes it', async () => {
    stand.answer(error(503, 'unavailable', { 'retry-after': '0' }), ok({ id: 'm1', channel: 'chat:a', offset: 1, epoch: 'e' }))
    expect((await platform().realtime.messages.publish({ channel: 'chat:a', data: 1 })).data).toEqual({ id: 'm1', channel: 'chat:a', offset: 1, epoch: 'e' })
    expect(stand.seen).toHaveLength(2)
    expect(stand.seen[1]!.idempotencyKey).toBe(stand.seen[0]!.idempotencyKey)
  })

  test('a proxy\'s 429 with an HTML body is rate_limited and retried, even for a capture; its Retry-After is honoured', async () => {
    const html429 = () => new Response('<html>slow down</html>', { status: 429, headers: { 'retry-after': '0', 'content-type': 'text/html' } })
    stand.answer(html429, ok({ accepted: 1 }))
    expect(await platform().analytics.capture({ events: [{ event: 'e', identity: { anonymous_id: 'a' } }] })).toEqual({ data: { accepted: 1 }, error: null })
    expect(stand.seen).toHaveLength(2)

    stand.answer(() => new Response('<html>slow down</html>', { status: 429, headers: { 'retry-after': '30' } }), ok({}))
    const { error: limited } = await platform({ maxRetryWaitMs: 1000 }).realtime.channels.get('chat:a')
    expect(limited).toMatchObject({ code: 'rate_limited', statusCode: 429, retryable: true, retryAfterMs: 30_000 })
    expect(stand.seen).toHaveLength(1)
  })

  test('a proxy\'s 503 with Retry-After beyond maxRetryWaitMs is answered as the error, not retried after a backoff', async () => {
    stand.answer(() => new Response('maintenance', { status: 503, headers: { 'retry-after': '30' } }), ok({ channel: 'chat:a', members: [] }))
    const { error: failed } = await platform({ maxRetryWaitMs: 1000 }).realtime.channels.presence('chat:a')
    expect(failed).toMatchObject({ code: 'unavailable', statusCode: 503, retryable: true, retryAfterMs: 30_000 })
    expect(stand.seen).toHaveLength(1)
  })

  test('attempts are bounded: a read that stays unavailable answers the error after maxRetries + 1 attempts', async () => {
    const unavailable = error(503, 'unavailable', { 'retry-after': '0' })
    stand.answer(unavailable, unavailable, unavailable, unavailable)
    const { error: failed } = await platform({ maxRetries: 2 }).realtime.channels.get('chat:a')
    expect(failed).toMatchObject({ code: 'unavailable', statusCode: 503, retryable: true })
    expect(stand.seen).toHaveLength(3)
  })

  test('the total wait is bounded: a Retry-After beyond maxRetryWaitMs is answered as the error at once', async () => {
    stand.answer(error(429, 'rate_limited', { 'retry-after': '30' }), ok({}))
    const { error: failed } = await platform({ maxRetryWaitMs: 5000 }).realtime.channels.get('chat:a')
    expect(failed).toMatchObject({ code: 'rate_limited', retryable: true, retryAfterMs: 30_000 })
    expect(stand.seen).toHaveLength(1)
  })

  test('a read behind a proxy answering 502 is retried', async () => {
    stand.answer(() => new Response('bad gateway', { status: 502 }), ok({ channel: 'chat:a', members: [] }))
    expect((await platform().realtime.channels.presence('chat:a')).data).toEqual({ channel: 'chat:a', members: [] })
    expect(stand.seen).toHaveLength(2)
  })

  test('an attempt past timeoutMs is a timeout: a read is tried again, a capture is not (it may have been stored)', async () => {
    // The first attempt times out for certain (a fetch that throws as AbortSignal.timeout does); the second goes through.
    let calls = 0
    const firstTimesOut: typeof fetch = Object.assign((input: RequestInfo | URL, init?: RequestInit) =>
      ++calls === 1 ? Promise.reject(new DOMException('The operation timed out.', 'TimeoutError')) : fetch(input, init), { preconnect: fetch.preconnect })
    stand.answer(ok({ channel: 'chat:a', members: [] }))
    expect((await platform({ fetch: firstTimesOut }).realtime.channels.presence('chat:a')).data).toEqual({ channel: 'chat:a', members: [] })
    expect(calls).toBe(2)
    expect(stand.seen).toHaveLength(1)

    // An answer that never comes: the SDK's own time limit ends the attempt, and the capture is not repeated.
    stand.answer(() => new Promise<Response>(() => {}), ok({ accepted: 1 }))
    const { error: failed } = await platform({ timeoutMs: 200 }).analytics.capture({ events: [{ event: 'e', identity: { anonymous_id: 'a' } }] })
    expect(failed).toMatchObject({ code: 'timeout', statusCode: null, retryable: false })
    expect(stand.seen).toHaveLength(1)
  })

  test('a non-temporary error is never retried', async () => {
    stand.answer(error(404, 'not_found'), ok({}))
    expect((await platform().mail.emails.get('e1')).error).toMatchObject({ code: 'not_found', statusCode: 404, retryable: false })
    expect(stand.seen).toHaveLength(1)
  })

  test('Retry-After is read as seconds or as an IMF-fixdate; any other form is unreadable (then the SDK backs off)', () => {
    const now = Date.parse('2026-11-29T08:00:00Z')
    expect(retryAfterMs('3', now)).toBe(3000)
    expect(retryAfterMs('Sun, 29 Nov 2026 08:00:05 GMT', now)).toBe(5000)
    expect(retryAfterMs('Sun, 29 Nov 2026 07:00:00 GMT', now)).toBe(0)
    for (const unreadable of ['soon', '1.5', '-1', '0x10', '2026-11-29T08:00:05Z', 'Sunday, 29-Nov-26 08:00:05 GMT', ' ']) {
      expect(retryAfterMs(unreadable, now)).toBeUndefined()
    }
    expect(retryAfterMs(null, now)).toBeUndefined()
  })
})

describe('the Idempotency-Key', () => {
  test('an empty key counts as none: the call gets its own UUID, sent on each retry', async () => {
    stand.answer(error(503, 'unavailable', { 'retry-after': '0' }), ok({ id: 'e1' }))
    const { data } = await platform().mail.emails.send({ from: 'a@b.example', to: 'c@d.example', subject: 'Hi', text: 'Hi' }, { idempotencyKey: '' })
    expect(data).toEqual({ id: 'e1' })
    expect(stand.seen.map((request) => request.idempotencyKey)).toEqual([expect.stringMatching(/^[0-9a-f-]{36}$/), stand.seen[0]!.idempotencyKey])
  })

  test('a key the platform would refuse is refused before any request, naming the header; the longest it takes is sent', async () => {
    expect(IDEMPOTENCY_KEY_MAX_CHARS).toBe(PLATFORM_MAX)
    stand.answer(ok({ id: 'm1', channel: 'chat:a', offset: 1, epoch: 'e' }))
    const tooLong = await platform().realtime.messages.publish({ channel: 'chat:a', data: 1 }, { idempotencyKey: 'k'.repeat(PLATFORM_MAX + 1) })
    expect(tooLong).toEqual({
      data: null,
      error: { code: 'invalid_request', message: expect.stringContaining('256'), statusCode: null, retryable: false, fields: [{ path: '/headers/idempotency-key', message: expect.any(String) }] },
    })
    // The transport's own rule, for any keyed call: the empty string is no key.
    const transport = createTransport({ baseUrl: stand.url })
    const empty = await transport.request({ method: 'POST', path: '/x', body: {}, key: { value: 'rtk_x', option: 'realtimeKey', in: 'header' }, idempotencyKey: '' })
    expect(empty.error).toMatchObject({ code: 'invalid_request', fields: [{ path: '/headers/idempotency-key' }] })
    expect(stand.seen).toHaveLength(0)

    expect((await platform().realtime.messages.publish({ channel: 'chat:a', data: 1 }, { idempotencyKey: 'k'.repeat(PLATFORM_MAX) })).error).toBeNull()
    expect(stand.seen.map((request) => request.idempotencyKey)).toEqual(['k'.repeat(PLATFORM_MAX)])
  })

  test('a keyed write the SDK gave up on answers its key, and a retry by hand with it sends the same key', async () => {
    const busy = error(409, 'concurrent_idempotent_requests', { 'retry-after': '0' })
    stand.answer(busy, busy)
    const { error: failed } = await platform({ maxRetries: 1 }).realtime.messages.publish({ channel: 'chat:a', data: 1 })
    const key = failed?.idempotencyKey
    expect(key).toMatch(/^[0-9a-f-]{36}$/)
    expect(failed).toMatchObject({ code: 'concurrent_idempotent_requests', retryable: true })
    expect(stand.seen.map((request) => request.idempotencyKey)).toEqual([key!, key!])

    stand.answer(ok({ id: 'm1', channel: 'chat:a', offset: 1, epoch: 'e' }))
    expect((await platform().realtime.messages.publish({ channel: 'chat:a', data: 1 }, { idempotencyKey: key })).error).toBeNull()
    expect(stand.seen.map((request) => request.idempotencyKey)).toEqual([key!])

    // A network failure after the retries are spent: the same.
    const down = Object.assign(() => Promise.reject(new TypeError('connection refused')), { preconnect: fetch.preconnect }) as typeof fetch
    const sent = await platform({ maxRetries: 0, fetch: down }).mail.emails.send({ from: 'a@b.example', to: 'c@d.example', subject: 'Hi', text: 'Hi' }, { idempotencyKey: 'order-42' })
    expect(sent.error).toMatchObject({ code: 'network_error', retryable: true, idempotencyKey: 'order-42' })
  })
})

describe('inputs that cannot be sent, and redirects', () => {
  test('a body JSON cannot carry (a BigInt, a cycle) is an invalid_request error, never a throw, and sends nothing', async () => {
    stand.answer(ok({}))
    const cyclic: Record<string, unknown> = {}
    cyclic.self = cyclic
    for (const data of [10n, cyclic]) {
      const result = await platform().realtime.messages.publish({ channel: 'chat:a', data })
      expect(result).toEqual({ data: null, error: expect.objectContaining({ code: 'invalid_request', statusCode: null, retryable: false, fields: [{ path: '/body', message: expect.any(String) }] }) })
    }
    expect(stand.seen).toHaveLength(0)
  })

  test('a query number the platform cannot read (exponent form, a fraction, Infinity) is refused naming the parameter; an integer is sent', async () => {
    stand.answer(ok({ channel: 'chat:a', entries: [], recovered: true }))
    for (const last_n of [1e-7, 1.5, Number.POSITIVE_INFINITY, 1e21]) {
      const { error: refused } = await platform().realtime.channels.history('chat:a', { last_n })
      expect(refused).toMatchObject({ code: 'invalid_request', statusCode: null, retryable: false, fields: [{ path: '/query/last_n', message: 'must be an integer' }] })
    }
    expect(stand.seen).toHaveLength(0)
    expect((await platform().realtime.channels.history('chat:a', { last_n: 100 })).error).toBeNull()
    expect(stand.seen.map((request) => request.search)).toEqual(['?last_n=100'])
  })

  test('a redirect is not followed: the key stays home, the POST is not turned into a GET, the error names the redirect', async () => {
    const elsewhere: { method: string; apiKey: string | null }[] = []
    const other = Bun.serve({ port: 0, fetch: (request) => (elsewhere.push({ method: request.method, apiKey: request.headers.get('x-api-key') }), Response.json({ id: 'm1' })) })
    try {
      for (const status of [301, 302, 307]) {
        stand.answer(() => new Response(null, { status, headers: { location: `http://127.0.0.1:${other.port}/stolen` } }))
        const { data, error: failed } = await platform().realtime.messages.publish({ channel: 'chat:a', data: 1 })
        expect(data).toBeNull()
        expect(failed).toMatchObject({ code: 'invalid_response', statusCode: status, retryable: false, message: expect.stringContaining(`redirect to http://127.0.0.1:${other.port}/stolen`) })
      }
      expect(elsewhere).toEqual([])
    } finally {
      other.stop(true)
    }
  })
})
