// The SDK's retry policy. Against a real public worker: a real 429 is a typed, retryable error carrying Retry-After.
// Against a stand-in HTTP server scripted per request (the policy's cases, which a real worker cannot be made to
// answer on demand): reads and keyed writes retried on temporary errors, honouring Retry-After; plain writes only on
// 429/503; attempts and the total wait bounded.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { retryAfterMs } from '../../shared/sdk/src/http'
import { Platform } from '../../shared/sdk/src/index'
import { startProcess, type Worker } from '../helpers'
import { awayFromWindowEdge, realtimeProduct, uniqueIp, type RealtimeProduct } from '../realtime/public-helpers'

const PRODUCT = '00000000-0000-4000-8000-000000000001'

/** A stand-in for the public worker: answers each request with the next scripted answer, recording what it got. */
function standIn() {
  const script: (() => Response | Promise<Response>)[] = []
  const seen: { method: string; path: string; idempotencyKey: string | null; at: number }[] = []
  const server = Bun.serve({
    port: 0,
    fetch(request) {
      seen.push({ method: request.method, path: new URL(request.url).pathname, idempotencyKey: request.headers.get('idempotency-key'), at: performance.now() })
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

const platform = (options: { maxRetries?: number; maxRetryWaitMs?: number; timeoutMs?: number } = {}) =>
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

  test('a capture (no Idempotency-Key) is retried on 503 but not on a 500 or a proxy 502', async () => {
    const batch = { events: [{ event: 'e', identity: { anonymous_id: 'a' } }] }
    stand.answer(error(503, 'unavailable', { 'retry-after': '0' }), ok({ accepted: 1 }))
    expect(await platform().analytics.capture(batch)).toEqual({ data: { accepted: 1 }, error: null })
    expect(stand.seen.map((request) => request.path)).toEqual([`/${PRODUCT}/capture`, `/${PRODUCT}/capture`])

    stand.answer(error(500, 'internal'), ok({ accepted: 1 }))
    const failed = await platform().analytics.capture(batch)
    expect(failed.error).toMatchObject({ code: 'internal', statusCode: 500, retryable: false })
    expect(stand.seen).toHaveLength(1)

    stand.answer(() => new Response('<html>bad gateway</html>', { status: 502 }), ok({ accepted: 1 }))
    const proxied = await platform().analytics.capture(batch)
    expect(proxied.error).toMatchObject({ code: 'invalid_response', statusCode: 502, retryable: false })
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
    /** An answer that never comes: the SDK's own time limit ends the attempt. */
    const never = () => new Promise<Response>(() => {})
    stand.answer(never, ok({ channel: 'chat:a', members: [] }))
    expect((await platform({ timeoutMs: 200 }).realtime.channels.presence('chat:a')).data).toEqual({ channel: 'chat:a', members: [] })
    expect(stand.seen).toHaveLength(2)

    stand.answer(never, ok({ accepted: 1 }))
    const { error: failed } = await platform({ timeoutMs: 200 }).analytics.capture({ events: [{ event: 'e', identity: { anonymous_id: 'a' } }] })
    expect(failed).toMatchObject({ code: 'timeout', statusCode: null, retryable: false })
    expect(stand.seen).toHaveLength(1)
  })

  test('a non-temporary error is never retried', async () => {
    stand.answer(error(404, 'not_found'), ok({}))
    expect((await platform().mail.emails.get('e1')).error).toMatchObject({ code: 'not_found', statusCode: 404, retryable: false })
    expect(stand.seen).toHaveLength(1)
  })

  test('Retry-After is read as seconds or as an HTTP date', () => {
    const now = Date.parse('2026-11-29T08:00:00Z')
    expect(retryAfterMs('3', now)).toBe(3000)
    expect(retryAfterMs('Sun, 29 Nov 2026 08:00:05 GMT', now)).toBe(5000)
    expect(retryAfterMs('Sun, 29 Nov 2026 07:00:00 GMT', now)).toBe(0)
    expect(retryAfterMs('soon', now)).toBeUndefined()
    expect(retryAfterMs(null, now)).toBeUndefined()
  })
})
