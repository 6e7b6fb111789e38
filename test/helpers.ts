// Test helpers: in-process calls to the apps, fresh accounts and products, and real worker processes on free ports.
import { afterAll, beforeAll, expect } from 'bun:test'
import { randomUUID } from 'node:crypto'
import postgres from 'postgres'
import { config } from '../shared/config'
import { onInvalidation, type Invalidation } from '../shared/cache/invalidation'
import { buildApiApp } from '../services/api/app'
import { unboundedSql } from '../shared/db/client'
import { migrate } from '../shared/db/migrate'
import { sealPlainSecrets } from '../shared/db/seal-secrets'
import { Cluster, type Redis } from 'ioredis'
import { redis } from '../shared/redis/client'
import { onCluster } from '../shared/redis/cluster'

// Integration tests need the schema current before any of them touches the database (scripts/test has migrated it
// already; a plain `bun test` may not have). Here, not in the preload, so the unit tier needs no database at all.
{
  const sql = unboundedSql()
  await migrate(sql)
  await sealPlainSecrets(sql)
  await sql.end()
}

export const api = buildApiApp()

export interface CallOptions {
  token?: string
  productId?: string
  body?: unknown
  /** Raw body text, sent as is (for malformed JSON). */
  raw?: string | Uint8Array
  headers?: Record<string, string>
}

export interface CallResult<T = any> {
  status: number
  body: T
  headers: Headers
}

/** Calls an app in-process (no sockets): app.handle(new Request(...)). */
export async function callApp(app: { handle(r: Request): Promise<Response> | Response }, base: string, method: string, path: string, options: CallOptions = {}): Promise<CallResult> {
  const headers: Record<string, string> = { ...options.headers }
  if (options.token) headers.authorization = `Bearer ${options.token}`
  if (options.productId) headers['x-product-id'] = options.productId
  let body: RequestInit['body'] | undefined
  if (options.raw !== undefined) body = options.raw as RequestInit['body']
  else if (options.body !== undefined) {
    body = JSON.stringify(options.body)
    headers['content-type'] ??= 'application/json'
  }
  const response = await app.handle(new Request(base + path, { method, headers, body }))
  const text = await response.text()
  let parsed: unknown = text
  try {
    parsed = text ? JSON.parse(text) : undefined
  } catch {}
  return { status: response.status, body: parsed as any, headers: response.headers }
}

export const call = (method: string, path: string, options?: CallOptions) => callApp(api, 'http://api.test', method, path, options)

/** A body as a failure message shows it: JSON (text as is), cut to a readable length. */
const shown = (body: unknown) => (typeof body === 'string' ? body : String(JSON.stringify(body))).slice(0, 2000)

/**
 * A setup call's result, checked: unless its status is 2xx, throws an Error naming the call with its status and body, so
 * a test whose setup fails says why instead of failing later on an undefined id or a count of 0. Returns the result:
 * `const id = ok(await call('POST', '/products', { token, body }), 'create product').body.id`
 */
export function ok<T extends { status: number; body?: unknown }>(result: T, what: string): T {
  if (result.status < 200 || result.status > 299) throw new Error(`${what}: ${result.status} ${shown(result.body)}`)
  return result
}

/** `ok` for a fetch Response: its body is read only when the status is not 2xx, so a passing response stays unread. */
export async function okResponse(response: Response, what: string): Promise<Response> {
  if (response.status < 200 || response.status > 299) throw new Error(`${what}: ${response.status} ${shown(await response.text())}`)
  return response
}

export const uniqueEmail = () => `user-${randomUUID()}@example.test`

/** A new user with their own organization, logged in. */
export async function newUser(password = 'correct horse battery') {
  const email = uniqueEmail()
  const result = await call('POST', '/auth/signup', { body: { email, password } })
  if (result.status !== 200) throw new Error(`signup failed: ${JSON.stringify(result.body)}`)
  return { email, password, token: result.body.token as string, userId: result.body.user.id as string, organizationId: result.body.organization.id as string }
}

/** A new user owning a new product. */
export async function newProduct(name = 'Test product') {
  const user = await newUser()
  const product = await call('POST', '/products', { token: user.token, body: { name } })
  if (product.status !== 200) throw new Error(`product create failed: ${JSON.stringify(product.body)}`)
  return { ...user, productId: product.body.id as string }
}

/** A platform key of the product with the given areas. */
export async function newPlatformKey(owner: { token: string; productId: string }, areas: string[]) {
  const result = await call('POST', `/products/${owner.productId}/platform-keys`, { token: owner.token, body: { name: 'test key', areas } })
  if (result.status !== 200) throw new Error(`platform key create failed: ${JSON.stringify(result.body)}`)
  return result.body as { id: string; key: string; prefix: string; areas: string[] }
}

/**
 * Ports for the processes tests start, below Linux's ephemeral range (32 768 up), where an outgoing connection could
 * take one between this check and the process's bind, or while a process restarts on its port; and below the cluster
 * nodes' (12 000 up, test/cluster/redis-cluster.ts). scripts/test gives each `bun test` it runs side by side a range
 * of its own (TEST_PORTS=first-last), so two never hand out the same port; within one, ports are handed out in turn.
 */
const [FIRST_PORT, LAST_PORT] = (/^\d+-\d+$/.test(process.env.TEST_PORTS ?? '') ? process.env.TEST_PORTS! : '2000-11999').split('-').map(Number) as [number, number]
let nextPort = FIRST_PORT + Math.floor(Math.random() * (LAST_PORT - FIRST_PORT + 1))

/** A port nothing listens on now, from this run's range (above). */
export async function freePort(): Promise<number> {
  for (let tried = 0; tried <= LAST_PORT - FIRST_PORT; tried++) {
    const port = nextPort
    nextPort = port >= LAST_PORT ? FIRST_PORT : port + 1
    try {
      Bun.serve({ port, fetch: () => new Response() }).stop(true)
      return port
    } catch {}
  }
  throw new Error(`no free port in ${FIRST_PORT}-${LAST_PORT} (TEST_PORTS)`)
}

export interface Worker {
  url: string
  port: number
  proc: ReturnType<typeof Bun.spawn>
  stop(signal?: NodeJS.Signals): Promise<number>
  /** The JSON log lines the process wrote so far (only with `logs: true`; request logs need LOG_REQUESTS=1). */
  logs(): Record<string, any>[]
}

/** Collects a process's stdout as it arrives. */
function collect(stream: ReadableStream<Uint8Array>): () => string {
  let text = ''
  const decoder = new TextDecoder()
  void (async () => {
    for await (const chunk of stream) text += decoder.decode(chunk, { stream: true })
  })()
  return () => text
}

/**
 * Every worker a test started and has not seen exit. A test that fails half-way may never stop its workers; they are
 * killed when the test run exits, or one would keep the run's output pipe open and scripts/test would wait forever.
 */
const running = new Set<ReturnType<typeof Bun.spawn>>()
process.once('exit', () => {
  for (const proc of running) proc.kill('SIGKILL')
})

/** The platform's HTTP processes, each with the variable that sets its port (gateways: gateway/ws-helpers.ts). */
const PROCESSES = {
  api: { script: 'services/api/main.ts', portVariable: 'API_PORT' },
  public: { script: 'services/public/main.ts', portVariable: 'PUBLIC_PORT' },
  mailer: { script: 'services/mailer/main.ts', portVariable: 'MAILER_PORT' },
  webhooks: { script: 'services/webhooks/main.ts', portVariable: 'WEBHOOKS_PORT' },
} as const

/**
 * One platform process on a free port of its own, with `env` on top of the test run's; waits as startWorker does.
 * @example const api = await startProcess('api', { ANALYTICS_QUERY_TIMEOUT_MS: '1' })
 */
export async function startProcess(
  kind: keyof typeof PROCESSES, env: Record<string, string> = {},
  options: { waitFor?: '/readyz' | '/healthz'; logs?: boolean } = {},
): Promise<Worker> {
  const { script, portVariable } = PROCESSES[kind]
  const port = await freePort()
  return startWorker(script, { ...env, [portVariable]: String(port) }, port, options.waitFor, { logs: options.logs })
}

/** Starts `bun run <script>` as a real process and waits until it answers /readyz (or /healthz) with 200. */
export async function startWorker(
  script: string, env: Record<string, string>, port: number, waitFor: '/readyz' | '/healthz' = '/readyz',
  options: { logs?: boolean } = {},
): Promise<Worker> {
  const proc = Bun.spawn(['bun', 'run', script], {
    env: { ...process.env, LOG_REQUESTS: '0', ...env },
    stdout: options.logs ? 'pipe' : (process.env.DEBUG_WORKERS ? 'inherit' : 'ignore'),
    stderr: 'inherit',
  })
  running.add(proc)
  void proc.exited.then(() => running.delete(proc))
  const output = options.logs ? collect(proc.stdout as ReadableStream<Uint8Array>) : () => ''
  const url = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 15_000
  let last = 'no answer' // what the process said last: its readiness body names what it still waits for
  for (;;) {
    try {
      const r = await fetch(`${url}${waitFor}`, { signal: AbortSignal.timeout(2000) }) // a process that never answers
      if (r.ok) break
      last = `${r.status} ${await r.text()}`
    } catch (error) {
      last = String(error)
    }
    if (Date.now() > deadline || proc.exitCode !== null) {
      proc.kill()
      const exited = proc.exitCode !== null ? `, exited ${proc.exitCode}` : ''
      throw new Error(`${script} did not answer ${waitFor} on port ${port} (last: ${last.slice(0, 300)}${exited})`)
    }
    await Bun.sleep(50)
  }
  return {
    url, port, proc,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      proc.kill(signal)
      return await proc.exited
    },
    logs: () => output().split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line)),
  }
}

/** Polls `check` until it answers something truthy, at most `ms`. */
export async function eventually<T>(check: () => Promise<T | undefined | null | false> | T | undefined | null | false, ms = 10_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + ms
  for (;;) {
    const value = await check()
    if (value) return value as T
    if (Date.now() > deadline) throw new Error(`${what} not reached within ${ms} ms`)
    await Bun.sleep(25)
  }
}

/** Records every cache invalidation published while the calling test file runs; tests look for the ones they caused. */
export function recordInvalidations(): Invalidation[] {
  const heard: Invalidation[] = []
  let stop: (() => Promise<void>) | undefined
  beforeAll(async () => {
    stop = await onInvalidation((message) => heard.push(message))
  })
  afterAll(async () => {
    await stop?.()
  })
  return heard
}

/** The platform's error body with `status` (and `code` when given): both shown on a mismatch. */
export function expectError(result: { status: number; body: any }, status: number, code?: string): void {
  expect({ status: result.status, body: result.body }).toMatchObject({ status, body: { error: code ?? expect.any(String), message: expect.any(String) } })
}

/** The distinct failing field paths of a 400 (one field may fail several rules). */
export function failingFields(result: { status: number; body: any }): string[] {
  expect({ status: result.status, body: result.body }).toMatchObject({ status: 400, body: { error: 'validation_failed' } })
  return [...new Set((result.body.fields as { path: string }[]).map((f) => f.path))]
}

/** One command on every Redis server the process uses: its one Redis, or each master of its cluster (CLIENT KILL…). */
export async function onEveryRedisNode(...command: [string, ...(string | number)[]]): Promise<void> {
  const client = redis()
  const servers = client instanceof Cluster ? client.nodes('master') : [client]
  await Promise.all(servers.map((server) => server.call(...command)))
}

/**
 * Watches `nodes` (each through a MONITOR connection of its own, with the node's options) for an invalidation's fence
 * (shared/cache/invalidation.ts, publishFenced): a PUBLISH whose message holds a marker, followed by a PING from the
 * same client.
 */
export async function watchFences(nodes: Redis[]) {
  const watched = await Promise.all(nodes.map(async (node) => {
    const seen: { command: string; source: string; text?: string }[] = []
    const monitor = await node.monitor()
    monitor.on('monitor', (_time: string, args: string[], source: string) => seen.push({ command: args[0]!.toLowerCase(), source, text: args[2] }))
    return { monitor, seen }
  }))
  const fencedOn = (seen: (typeof watched)[number]['seen'], marker: string) => {
    const publish = seen.findIndex((entry) => entry.command === 'publish' && entry.text?.includes(marker))
    return publish >= 0 && seen.slice(publish + 1).some((entry) => entry.command === 'ping' && entry.source === seen[publish]!.source)
  }
  return {
    /** The indexes of the nodes still without `marker`'s fence, after waiting up to `ms` for it on all of them. */
    async unfenced(marker: string, ms = 5000): Promise<number[]> {
      const missing = () => watched.flatMap(({ seen }, i) => (fencedOn(seen, marker) ? [] : [i]))
      for (const deadline = Date.now() + ms; Date.now() < deadline && missing().length > 0; ) await Bun.sleep(20)
      return missing()
    },
    stop: () => { for (const { monitor } of watched) monitor.disconnect() },
  }
}

/**
 * For a test that puts test/faults/proxy.ts between a process and its Redis: on a Redis Cluster (scripts/test's second
 * pass) it does not run, since a cluster's clients follow the addresses the nodes announce, past any proxy. A cluster's
 * own faults (a master killed, a slot migrated) are test/cluster/.
 */
export const needsOneRedis = onCluster()

/**
 * `url` naming database `name` instead, edited as text: a DATABASE_URL with several hosts (`h1:p1,h2:p2`) is no WHATWG
 * URL, and `new URL` throws on it.
 */
const withDatabase = (url: string, name: string) => url.replace(/^([a-z]+:\/\/[^/?]*)(\/[^?]*)?/, `$1/${name}`)

/**
 * A database of a test's own beside the suite's (an upgrade from an older schema, say): created by `open`, dropped with
 * its connections after the enclosing describe. Call at describe level.
 */
export function scratchDatabase(prefix: string): { open(): Promise<postgres.Sql> } {
  const name = `${prefix}_${randomUUID().replaceAll('-', '').slice(0, 12)}`
  const url = withDatabase(config.databaseUrl, name)
  let db: postgres.Sql | undefined
  // Without the statement deadline: CREATE and DROP DATABASE wait for a checkpoint, which on a loaded machine outlasts
  // the 2 s a request gets (a 503 from a test's setup or teardown, not from what it tests).
  let admin: postgres.Sql | undefined
  afterAll(async () => {
    await db?.end()
    if (!admin) return
    try {
      await admin.unsafe(`drop database if exists ${name} with (force)`)
    } finally {
      await admin.end()
    }
  })
  return {
    async open() {
      admin = unboundedSql()
      await admin.unsafe(`create database ${name}`)
      db = postgres(url, { max: 4, onnotice: () => {} })
      return db
    },
  }
}
