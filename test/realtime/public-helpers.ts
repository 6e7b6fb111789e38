// Helpers for the Realtime public-route tests: two real public workers, a product with a key and namespaces, raw calls.
import { randomBytes } from 'node:crypto'
import { call, newProduct, startProcess, type Worker } from '../helpers'

export interface Pair {
  a: Worker
  b: Worker
  stop(): Promise<void>
}

/** Two `public` processes, each on its own port, trusting X-Forwarded-For so each test can bring its own client IP. */
export async function startPublicPair(env: Record<string, string> = {}): Promise<Pair> {
  const [a, b] = await Promise.all([startProcess('public', { TRUST_PROXY: '1', ...env }), startProcess('public', { TRUST_PROXY: '1', ...env })])
  return { a, b, stop: async () => void (await Promise.all([a.stop(), b.stop()])) }
}

/** A client IP of its own, so tests never share a rate-limit budget. */
export const uniqueIp = () => `10.${randomBytes(1)[0]}.${randomBytes(1)[0]}.${randomBytes(1)[0]}`

export interface NamespaceSpec {
  name: string
  presence?: boolean
  clientEvents?: boolean
  history?: { ttlSeconds: number; size: number } | null
  archive?: { retentionDays: number } | null
}

export interface RealtimeProduct {
  productId: string
  /** The owner's platform session. */
  token: string
  /** An rtk_ key with every scope. */
  key: string
  keyId: string
}

/** Management calls on the platform API (in-process) as the product's owner. */
export async function manage(owner: { token: string; productId: string }, method: string, path: string, body?: unknown) {
  const result = await call(method, path, { token: owner.token, productId: owner.productId, body })
  if (result.status !== 200) throw new Error(`${method} ${path} failed: ${result.status} ${JSON.stringify(result.body)}`)
  return result.body
}

export async function createKey(owner: { token: string; productId: string }, scope?: string[]) {
  return (await manage(owner, 'POST', `/governance/api/v1/products/${owner.productId}/public-keys`, { name: 'backend', ...(scope ? { scope } : {}) })) as { id: string; key: string }
}

/** A fresh product with an all-scope key and the given namespaces (default: `chat` with presence and history). */
export async function realtimeProduct(namespaces: NamespaceSpec[] = [{ name: 'chat', presence: true, history: { ttlSeconds: 300, size: 100 } }]): Promise<RealtimeProduct> {
  const owner = await newProduct('Realtime test')
  for (const ns of namespaces) await manage(owner, 'POST', '/realtime/namespaces', ns)
  const { id, key } = await createKey(owner)
  return { productId: owner.productId, token: owner.token, key, keyId: id }
}

export interface PublicCall {
  key?: string
  ip?: string
  body?: unknown
  raw?: NonNullable<RequestInit['body']>
  headers?: Record<string, string>
}

export interface PublicResult {
  status: number
  body: any
  headers: Headers
}

/** One request to a public worker; `ip` becomes X-Forwarded-For. */
export async function pub(worker: { url: string }, method: string, path: string, options: PublicCall = {}): Promise<PublicResult> {
  const headers: Record<string, string> = { ...options.headers }
  if (options.key !== undefined) headers['x-api-key'] = options.key
  headers['x-forwarded-for'] ??= options.ip ?? uniqueIp()
  let body: NonNullable<RequestInit['body']> | undefined = options.raw
  if (body === undefined && options.body !== undefined) {
    body = JSON.stringify(options.body)
    headers['content-type'] ??= 'application/json'
  }
  const response = await fetch(worker.url + path, { method, headers, body })
  const text = await response.text()
  let parsed: unknown = text
  try {
    parsed = text ? JSON.parse(text) : undefined
  } catch {}
  return { status: response.status, body: parsed, headers: response.headers }
}

/** Waits, if needed, so at least `marginMs` remain in the current fixed window of `windowSeconds`. */
export async function awayFromWindowEdge(windowSeconds: number, marginMs: number): Promise<void> {
  const windowMs = windowSeconds * 1000
  const left = windowMs - (Date.now() % windowMs)
  if (left < marginMs) await Bun.sleep(left + 20)
}
