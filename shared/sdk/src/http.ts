// One request to the public routes with the retry policy. A repeat must not do anything twice, so only reads and writes
// carrying an Idempotency-Key are repeated after a lost answer, a 503 or another temporary error; a write without one is
// repeated only on 429, which every route answers before doing anything (a 503 can come after the write was done: a
// statement past its deadline finishes in the background, a connection drops after COMMIT, a proxy times out).
// Waits honour Retry-After, attempts and the total wait are bounded, redirects are never followed. fetch only.
import { TEMPORARY_CODES } from './schema.js'
import type { PlatformError, Result } from './types.js'

export interface TransportOptions {
  /** The platform's public URL ({public_url}), e.g. https://public.example.com. */
  baseUrl: string
  /** Retries after the first attempt (default 2; 0 turns retries off). */
  maxRetries?: number
  /** The most time spent waiting between attempts of one call, in ms (default 10 000); a longer Retry-After is answered as the error. */
  maxRetryWaitMs?: number
  /** Each attempt's time limit, in ms (default 30 000). */
  timeoutMs?: number
  /** The fetch to use (default the global one): a proxy-aware or instrumented fetch. */
  fetch?: typeof fetch
}

export interface Call {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE'
  /** The path below baseUrl, its parameters already encoded. */
  path: string
  /** Every number is an integer on the public routes. */
  query?: Record<string, string | number | boolean | undefined>
  body?: unknown
  /** The key and where the route reads it; undefined when the client was given none for the area. */
  key: { value: string | undefined; option: string; in: 'header' | 'query' }
  /** Sent as the Idempotency-Key header; checked against the platform's rule before anything is sent. */
  idempotencyKey?: string
}

/** The platform's bound on an Idempotency-Key (shared/http/idempotency-key.ts), checked here so a bad key costs no request. */
export const IDEMPOTENCY_KEY_MAX_CHARS = 256

const BACKOFF_BASE_MS = 250
const BACKOFF_MAX_MS = 4000
/** RFC 9110's preferred HTTP date; Date.parse alone accepts '1.5' or '-1' and would make them an immediate retry. */
const IMF_FIXDATE = /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$/

/** Full-jitter exponential backoff: a random wait in [0, min(max, base × 2^attempt)). */
const backoff = (attempt: number) => Math.floor(Math.random() * Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** attempt))

/** Retry-After as ms: delay-seconds or an IMF-fixdate; undefined when absent or in any other form (then the SDK backs off). */
export function retryAfterMs(value: string | null, now = Date.now()): number | undefined {
  const text = value?.trim()
  if (!text) return undefined
  if (/^\d+$/.test(text)) return Number(text) * 1000
  if (!IMF_FIXDATE.test(text)) return undefined
  const at = Date.parse(text)
  return Number.isNaN(at) ? undefined : Math.max(0, at - now)
}

const failure = (error: PlatformError): { data: null; error: PlatformError } => ({ data: null, error })

/** A call the SDK refuses before sending it: `path` is the field as a JSON pointer, as the platform names them. */
const refused = (path: string, rule: string) =>
  failure({ code: 'invalid_request', message: `${path.split('/').pop()} ${rule}`, statusCode: null, retryable: false, fields: [{ path, message: rule }] })

/** The request's URL and init, or the refusal naming the input that cannot be sent. */
function prepare(baseUrl: string, call: Call & { key: { value: string } }): { url: string; init: RequestInit } | { data: null; error: PlatformError } {
  const key = call.idempotencyKey
  if (key !== undefined && (typeof key !== 'string' || key.length < 1 || key.length > IDEMPOTENCY_KEY_MAX_CHARS)) {
    return refused('/headers/idempotency-key', `must be 1 to ${IDEMPOTENCY_KEY_MAX_CHARS} characters (the idempotencyKey option)`)
  }
  const search = new URLSearchParams()
  for (const [name, value] of Object.entries(call.query ?? {})) {
    if (value === undefined) continue
    // String(1e-7) is '1e-7', which the platform refuses; every number it reads from a query is an integer.
    if (typeof value === 'number' && !Number.isSafeInteger(value)) return refused(`/query/${name}`, 'must be an integer')
    search.set(name, String(value))
  }
  if (call.key.in === 'query') search.set('key', call.key.value)
  const headers: Record<string, string> = { accept: 'application/json' }
  if (call.key.in === 'header') headers['x-api-key'] = call.key.value
  if (key !== undefined) headers['idempotency-key'] = key
  let body: string | undefined
  if (call.body !== undefined) {
    try {
      body = JSON.stringify(call.body)
    } catch (error) {
      return refused('/body', `cannot be sent as JSON: ${(error as Error)?.message ?? error}`)
    }
    headers['content-type'] = 'application/json'
  }
  const url = `${baseUrl}${call.path}${search.toString() ? `?${search}` : ''}`
  // A redirect would carry the key to another host and turn a POST into a GET: the platform never answers one.
  return { url, init: { method: call.method, headers, redirect: 'manual', ...(body === undefined ? {} : { body }) } }
}

export function createTransport(options: TransportOptions) {
  const baseUrl = options.baseUrl.replace(/\/+$/, '')
  const maxRetries = options.maxRetries ?? 2
  const maxWait = options.maxRetryWaitMs ?? 10_000
  const timeoutMs = options.timeoutMs ?? 30_000
  const doFetch = options.fetch ?? ((input, init) => fetch(input, init))

  /**
   * One attempt. `safe`: a repeat cannot do anything twice (a read, or a keyed write). The error's `retryable` is
   * true only when repeating the same request is both useful and safe, so the retry loop and a caller read it alike.
   */
  async function attempt<T>(url: string, init: RequestInit, safe: boolean): Promise<Result<T>> {
    let response: Response
    let text: string
    try {
      response = await doFetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) })
      text = await response.text()
    } catch (error) {
      // No answer, or one cut off: the request may have been carried out.
      const timedOut = (error as Error)?.name === 'TimeoutError'
      return failure({
        code: timedOut ? 'timeout' : 'network_error', statusCode: null, retryable: safe,
        message: timedOut ? `no answer within ${timeoutMs} ms` : `the request got no answer: ${(error as Error)?.message ?? error}`,
      })
    }
    const requestId = response.headers.get('x-request-id') ?? undefined
    const wait = retryAfterMs(response.headers.get('retry-after'))
    const waitField = wait === undefined ? {} : { retryAfterMs: wait }
    if (response.type === 'opaqueredirect' || (response.status >= 300 && response.status < 400)) {
      const location = response.headers.get('location')
      return failure({
        code: 'invalid_response', statusCode: response.status || null, retryable: false, requestId,
        message: `HTTP ${response.status} redirect${location ? ` to ${location}` : ''}, not followed (the API key would go with it): check baseUrl`,
      })
    }
    let body: any
    try {
      body = text ? JSON.parse(text) : undefined
    } catch {
      body = undefined
    }
    if (response.ok) {
      if (body === undefined) return failure({ code: 'invalid_response', statusCode: response.status, retryable: false, message: 'the answer is not JSON', requestId })
      return { data: body as T, error: null }
    }
    if (!body || typeof body.error !== 'string') {
      // Not the platform's error body: a proxy, CDN or load balancer answered. A 429 refused the request; after a 502,
      // 503 or 504 it may have been carried out, so only a request that cannot do anything twice may repeat.
      const status = response.status
      return failure({
        code: status === 429 ? 'rate_limited' : status === 503 ? 'unavailable' : 'invalid_response', statusCode: status, requestId,
        retryable: status === 429 || (safe && (status === 502 || status === 503 || status === 504)),
        message: `HTTP ${status} without the platform's error body`, ...waitField,
      })
    }
    return failure({
      code: body.error, message: String(body.message ?? body.error), statusCode: response.status, requestId,
      retryable: TEMPORARY_CODES.includes(body.error) && (safe || response.status === 429),
      ...(Array.isArray(body.fields) ? { fields: body.fields } : {}), ...waitField,
    })
  }

  /** Sends `call`, retrying where safe; never throws. A keyed call's error carries its idempotencyKey, for a retry by hand. */
  async function request<T>(call: Call): Promise<Result<T>> {
    if (!call.key.value) {
      return failure({ code: 'missing_api_key', statusCode: null, retryable: false, message: `this route needs the ${call.key.option} option of new Platform()` })
    }
    const prepared = prepare(baseUrl, call as Call & { key: { value: string } })
    if ('error' in prepared) return prepared
    const safe = call.method === 'GET' || call.idempotencyKey !== undefined
    let waited = 0
    for (let tries = 0; ; tries++) {
      const result = await attempt<T>(prepared.url, prepared.init, safe)
      const { error } = result
      if (!error) return result
      const wait = error.retryAfterMs ?? backoff(tries)
      if (tries >= maxRetries || !error.retryable || waited + wait > maxWait) {
        return call.idempotencyKey === undefined ? result : failure({ ...error, idempotencyKey: call.idempotencyKey })
      }
      waited += wait
      await new Promise((resolve) => setTimeout(resolve, wait))
    }
  }

  return { request }
}

export type Transport = ReturnType<typeof createTransport>
