// One request to the public routes with the retry policy: reads, and writes carrying an Idempotency-Key, are retried on
// a lost answer and on temporary errors; any request on 429 and 503 (the platform refused it before doing anything).
// Waits honour Retry-After, attempts and the total wait are bounded. fetch only, for every runtime.
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
  query?: Record<string, string | number | boolean | undefined>
  body?: unknown
  /** The key and where the route reads it; undefined when the client was given none for the area. */
  key: { value: string | undefined; option: string; in: 'header' | 'query' }
  idempotencyKey?: string
}

const BACKOFF_BASE_MS = 250
const BACKOFF_MAX_MS = 4000

/** Full-jitter exponential backoff: a random wait in [0, min(max, base × 2^attempt)). */
const backoff = (attempt: number) => Math.floor(Math.random() * Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** attempt))

/** Retry-After as ms: delay-seconds or an HTTP date; undefined when absent or unreadable. */
export function retryAfterMs(value: string | null, now = Date.now()): number | undefined {
  if (!value) return undefined
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000
  const at = Date.parse(value)
  return Number.isNaN(at) ? undefined : Math.max(0, at - now)
}

const failure = (error: PlatformError): { data: null; error: PlatformError } => ({ data: null, error })

export function createTransport(options: TransportOptions) {
  const baseUrl = options.baseUrl.replace(/\/+$/, '')
  const maxRetries = options.maxRetries ?? 2
  const maxWait = options.maxRetryWaitMs ?? 10_000
  const timeoutMs = options.timeoutMs ?? 30_000
  const doFetch = options.fetch ?? ((input, init) => fetch(input, init))

  async function attempt<T>(url: string, init: RequestInit, safe: boolean): Promise<Result<T>> {
    let response: Response
    let text: string
    try {
      response = await doFetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) })
      text = await response.text()
    } catch (error) {
      // No answer, or one cut off: the request may have been carried out, so a repeat is safe only when it cannot do
      // anything twice.
      const timedOut = (error as Error)?.name === 'TimeoutError'
      return failure({
        code: timedOut ? 'timeout' : 'network_error', statusCode: null, retryable: safe,
        message: timedOut ? `no answer within ${timeoutMs} ms` : `the request got no answer: ${(error as Error)?.message ?? error}`,
      })
    }
    const requestId = response.headers.get('x-request-id') ?? undefined
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
      // Not the platform's error body: a proxy or load balancer answered. A 503 there refused the request; after a
      // 502/504 it may have been carried out, so only a request that cannot do anything twice may repeat.
      return failure({
        code: response.status === 503 ? 'unavailable' : 'invalid_response', statusCode: response.status, requestId,
        retryable: response.status === 503 || (safe && (response.status === 502 || response.status === 504)),
        message: `HTTP ${response.status} without the platform's error body`,
      })
    }
    const wait = retryAfterMs(response.headers.get('retry-after'))
    return failure({
      code: body.error, message: String(body.message ?? body.error), statusCode: response.status,
      retryable: TEMPORARY_CODES.includes(body.error), requestId,
      ...(Array.isArray(body.fields) ? { fields: body.fields } : {}),
      ...(wait === undefined ? {} : { retryAfterMs: wait }),
    })
  }

  /** Sends `call`, retrying where safe; never throws. */
  async function request<T>(call: Call): Promise<Result<T>> {
    if (!call.key.value) {
      return failure({ code: 'missing_api_key', statusCode: null, retryable: false, message: `this route needs the ${call.key.option} option of new Platform()` })
    }
    const search = new URLSearchParams()
    for (const [name, value] of Object.entries(call.query ?? {})) if (value !== undefined) search.set(name, String(value))
    if (call.key.in === 'query') search.set('key', call.key.value)
    const url = `${baseUrl}${call.path}${search.toString() ? `?${search}` : ''}`
    const headers: Record<string, string> = { accept: 'application/json' }
    if (call.key.in === 'header') headers['x-api-key'] = call.key.value
    if (call.idempotencyKey) headers['idempotency-key'] = call.idempotencyKey
    if (call.body !== undefined) headers['content-type'] = 'application/json'
    const init: RequestInit = { method: call.method, headers, ...(call.body === undefined ? {} : { body: JSON.stringify(call.body) }) }
    // A repeat cannot do anything twice: a read, or a write the platform dedupes by its Idempotency-Key.
    const safe = call.method === 'GET' || call.idempotencyKey !== undefined
    let waited = 0
    for (let tries = 0; ; tries++) {
      const result = await attempt<T>(url, init, safe)
      const { error } = result
      if (!error || tries >= maxRetries || !error.retryable) return result
      // 429 and 503 are answered before the route does anything, so even a plain write may repeat.
      if (!safe && error.statusCode !== 429 && error.statusCode !== 503) return result
      const wait = error.retryAfterMs ?? backoff(tries)
      if (waited + wait > maxWait) return result
      waited += wait
      await new Promise((resolve) => setTimeout(resolve, wait))
    }
  }

  return { request }
}

export type Transport = ReturnType<typeof createTransport>
