// A PostgreSQL failover under load, black-box (docs/architecture.md, "PostgreSQL failover"): a primary and a streaming
// standby of this file's own on loopback, synchronous replication, and a real api worker whose DATABASE_URL lists both
// (`target_session_attrs=read-write`). While 10 clients create dashboards (three tables written in one transaction),
// the primary is SIGKILLed and the standby promoted. Every request gets 200 or 503 with Retry-After in time, never a
// 500; the worker serves again by itself; every acknowledged dashboard is on the new primary, complete, and no
// dashboard is there half-written. With a single-host DATABASE_URL the worker would never serve again.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import postgres from 'postgres'
import { callApp, eventually, startProcess, type Worker } from '../helpers'
import { startStandby, type Standby } from '../analytics/standby'
import { startPrimary, type OwnPostgres } from '../own-postgres'
import { startBlackhole } from './blackhole'
import { firstSuccessAfter, startLoad } from './load'

const DB_TIMEOUT_MS = 1000
const DB_COOL_DOWN_MS = 500
/** A request answers within its statement deadline plus a second of its own work (docs/architecture.md, "Outages"). */
const ANSWER_MS = DB_TIMEOUT_MS + 1000
/** After the promotion, the worker serves again within this: a cool-down, a probe, a connection to the new primary. */
const RECOVERY_MS = 3000
/**
 * How long no server is the primary: several cool-downs, so that the worker's probes meet the dead primary and the
 * standby (read-only, turned away by target_session_attrs) and are answered 503, as they would in a real failover.
 */
const GAP_MS = 4 * DB_COOL_DOWN_MS
const CONCURRENCY = 10
/** A client's pause before its next request after a 503: short (the test wants the recovery seen at once), not a busy loop. */
const PAUSE_AFTER_503_MS = 20
const DATABASE = 'platform_failover'

let primary: OwnPostgres
let standby: Standby
let api: Worker
let token: string
let productId: string
let insightIds: string[]

/** DATABASE_URL for several hosts, in the order given. */
const hosts = (database: string, ...servers: { port: number }[]) =>
  `postgres://postgres@${servers.map((s) => `127.0.0.1:${s.port}`).join(',')}/${database}?target_session_attrs=read-write`

/** `bun run <script>` with DATABASE_URL; throws with its output unless it exits 0. */
async function runScript(script: string, databaseUrl: string, ...args: string[]): Promise<void> {
  const proc = Bun.spawn(['bun', 'run', script, ...args], { env: { ...process.env, DATABASE_URL: databaseUrl }, stdout: 'pipe', stderr: 'pipe' })
  const [code, out, err] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()])
  if (code !== 0) throw new Error(`${script} exited ${code}: ${out}${err}`)
}

const http = { handle: (request: Request) => fetch(request) }
const callApi = (method: string, path: string, body?: unknown) =>
  callApp(http, api.url, method, path, { token, productId, body })

beforeAll(async () => {
  primary = await startPrimary()
  standby = await startStandby(primary.url, { fsync: 'off' }, 'failover-standby')
  // The scripts get the standby first: target_session_attrs must take them past it to the primary.
  await runScript('scripts/create-database.ts', hosts('postgres', standby, primary), DATABASE)
  // A standby that has not replayed the new database yet refuses the connection (postgres.js then tries no other host).
  await eventually(async () => (await standby.sql`select 1 from pg_database where datname = ${DATABASE}`).length === 1, 10_000, 'the database on the standby')
  await runScript('scripts/migrate.ts', hosts(DATABASE, standby, primary))
  // Synchronous from here on: a commit is acknowledged once the standby has flushed it (synchronous_commit's default,
  // on). Set after the base backup, so the standby, once promoted, does not wait for a standby of its own.
  await primary.sql.unsafe(`alter system set synchronous_standby_names = '*'`)
  await primary.sql`select pg_reload_conf()`
  await eventually(async () => (await primary.sql`select 1 from pg_stat_replication where sync_state = 'sync'`).length === 1, 10_000, 'the standby synchronous')

  api = await startProcess('api', {
    DATABASE_URL: hosts(DATABASE, primary, standby), DB_TIMEOUT_MS: String(DB_TIMEOUT_MS), DB_COOL_DOWN_MS: String(DB_COOL_DOWN_MS),
    PRODUCT_MAX_DASHBOARDS: '100000',
  })
  const signup = await callApp(http, api.url, 'POST', '/auth/signup', { body: { email: `failover-${crypto.randomUUID()}@example.test`, password: 'correct horse battery' } })
  expect(signup.status).toBe(200)
  token = signup.body.token
  const product = await callApp(http, api.url, 'POST', '/products', { token, body: { name: 'Failover' } })
  expect(product.status).toBe(200)
  productId = product.body.id
  const metric = { entity: 'events', metrics: ['count'], range: { from: '-7d' }, bucket: 'day' }
  insightIds = []
  for (const name of ['Signups', 'Purchases']) {
    const insight = await callApi('POST', '/analytics/insights', { name, kind: 'metric', query: metric })
    expect(insight.status).toBe(200)
    insightIds.push(insight.body.id)
  }
}, 60_000)

afterAll(async () => {
  await api?.stop()
  await Promise.all([primary?.stop(), standby?.stop()])
})

/** A dashboard of two insight tiles and a text tile: one row in each of three tables, written in one transaction. */
const dashboardBody = (slug: string) => ({
  slug, name: `Dashboard ${slug}`,
  tiles: [
    ...insightIds.map((id, y) => ({ type: 'insight', insight_id: id, layout: { x: 0, y, w: 6, h: 1 } })),
    { type: 'text', markdown: '# Notes', layout: { x: 6, y: 0, w: 6, h: 2 } },
  ],
})

test('the primary dies under load and the standby is promoted: 503 with Retry-After meanwhile, never a 500; the worker serves again by itself; every acknowledged write is on the new primary, and none half-written', async () => {
  /** Each create sent, with when (performance.now()) and its status (0: no answer). */
  const writes: { slug: string; at: number; status: number }[] = []
  let n = 0
  const create = async (signal: AbortSignal) => {
    const slug = `d-${++n}`
    const write = { slug, at: performance.now(), status: 0 }
    writes.push(write)
    const response = await fetch(`${api.url}/analytics/dashboards`, {
      method: 'POST', signal, body: JSON.stringify(dashboardBody(slug)),
      headers: { authorization: `Bearer ${token}`, 'x-product-id': productId, 'content-type': 'application/json' },
    })
    write.status = response.status
    if (response.status === 503) await Bun.sleep(PAUSE_AFTER_503_MS)
    return response
  }
  const acknowledged = () => writes.filter((w) => w.status === 200)

  const load = startLoad(CONCURRENCY, create)
  await eventually(() => acknowledged().length >= 50, 10_000, 'dashboards created before the failover')
  await primary.kill()
  const killedAt = performance.now()
  const killedAtLoad = load.elapsed()
  await eventually(() => writes.some((w) => w.at > killedAt && w.status === 503), 5000, 'a 503 once the primary is dead')
  await Bun.sleep(GAP_MS)
  // The gap ends when the promotion is asked for: a request can succeed on the promoted standby before pg_promote()'s
  // answer reaches this process (under load, tens of milliseconds later).
  const promotingAt = load.elapsed()
  await standby.sql`select pg_promote()` // waits until the standby accepts writes
  const promotedAt = load.elapsed()
  await eventually(() => writes.filter((w) => w.at > killedAt + GAP_MS && w.status === 200).length >= 50, RECOVERY_MS + 5000, 'dashboards created on the new primary')
  const outcomes = await load.stop()

  // Every answer in time, 200 or 503 (with Retry-After), never a 500 or a dropped connection.
  expect(outcomes.filter((o) => o.status === 0)).toEqual([])
  expect(outcomes.filter((o) => o.ms > ANSWER_MS)).toEqual([])
  expect([...new Set(outcomes.map((o) => o.status))].filter((s) => s !== 200 && s !== 503)).toEqual([])
  expect(outcomes.filter((o) => o.status === 503 && !(Number(o.retryAfter) >= 1))).toEqual([])
  // The gap was real: nothing succeeded between the kill and the promotion.
  const duringGap = outcomes.filter((o) => o.sentAt > killedAtLoad + 100 && o.sentAt + o.ms < promotingAt)
  expect(duringGap.length).toBeGreaterThan(CONCURRENCY)
  expect(duringGap.filter((o) => o.status === 200)).toEqual([])
  // Served again by itself, within the bound, and stays up.
  const first = firstSuccessAfter(outcomes, promotedAt)
  expect(first).toBeDefined()
  expect(first!.sentAt - promotedAt).toBeLessThanOrEqual(RECOVERY_MS)
  expect(outcomes.filter((o) => o.sentAt > first!.sentAt + first!.ms && o.status !== 200)).toEqual([])

  const promoted = postgres(hosts(DATABASE, standby), { max: 1, onnotice: () => {} })
  // On the new primary: every acknowledged dashboard, each complete; whatever else is there (a commit whose answer was
  // lost with the primary) is complete too, and nothing is there that was never sent.
  const rows = await promoted<{ slug: string; tiles: number; links: number; versions: number }[]>`
    select d.slug, jsonb_array_length(d.tiles)::int as tiles,
      (select count(*) from analytics_dashboard_insights l where l.dashboard_id = d.id)::int as links,
      (select count(*) from analytics_dashboard_versions v where v.dashboard_id = d.id and v.reason = 'create')::int as versions
    from analytics_dashboards d where d.product_id = ${productId}`
  const stored = new Map(rows.map((r) => [r.slug, r]))
  expect(acknowledged().filter((w) => !stored.has(w.slug)).map((w) => w.slug)).toEqual([])
  expect(rows.filter((r) => r.tiles !== 3 || r.links !== 2 || r.versions !== 1)).toEqual([])
  const sent = new Set(writes.map((w) => w.slug))
  expect(rows.filter((r) => !sent.has(r.slug))).toEqual([])
  const [orphans] = await promoted<{ n: number }[]>`
    select count(*)::int as n from analytics_dashboard_versions v
    where not exists (select 1 from analytics_dashboards d where d.id = v.dashboard_id)`
  expect(orphans!.n).toBe(0)
  await promoted.end()
}, 60_000)

test('a primary fenced read-only (default_transaction_read_only, as before a switchover) answers writes 503 with Retry-After, not 500, and takes them again once unfenced', async () => {
  const write = () => callApi('POST', '/analytics/dashboards', dashboardBody(`f-${crypto.randomUUID().slice(0, 8)}`))
  await standby.sql.unsafe('alter system set default_transaction_read_only = on')
  await standby.sql`select pg_reload_conf()`
  const refused = await eventually(async () => {
    const result = await write()
    expect([200, 503]).toContain(result.status)
    return result.status === 503 && result
  }, 5000, 'a write refused')
  expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
  await standby.sql.unsafe('alter system reset default_transaction_read_only')
  await standby.sql`select pg_reload_conf()`
  await eventually(async () => (await write()).status === 200, RECOVERY_MS + 2000, 'a write taken again')
}, 30_000)

test('a first host that drops packets (a dead primary\'s address): each new connection moves on to the next host after its share of the connect time-out, within the statement deadline, so requests succeed, none refused', async () => {
  const dead = await startBlackhole()
  // The standby, promoted above, is the primary now. A connection tries the hosts in turn from where its last attempt
  // left off: one connected to the second host tries the dead address first when it connects again. The default
  // deadline: 1.5 s to reach the dead address, the rest for the primary and the statement.
  const timeoutMs = 2000
  const worker = await startProcess('api', {
    DATABASE_URL: hosts(DATABASE, dead, standby), DB_TIMEOUT_MS: String(timeoutMs), DB_COOL_DOWN_MS: String(DB_COOL_DOWN_MS),
    PRODUCT_MAX_DASHBOARDS: '100000',
  })
  // Concurrent transactions, so that the pool has a connection open for each.
  const round = () => Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    const started = performance.now()
    const created = await callApp(http, worker.url, 'POST', '/analytics/dashboards', { token, productId, body: dashboardBody(`b-${crypto.randomUUID().slice(0, 8)}`) })
    return { status: created.status, ms: performance.now() - started }
  }))
  try {
    expect((await round()).filter((a) => a.status !== 200)).toEqual([])
    // Every connection ends (a restart of the server's backends, say); idle, so no statement fails with them. The pool's
    // next connections all begin at the dead address.
    await standby.sql`select pg_terminate_backend(pid) from pg_stat_activity where datname = ${DATABASE} and pid <> pg_backend_pid()`
    await Bun.sleep(300)
    const answers = await round()
    expect(answers.filter((a) => a.status !== 200)).toEqual([])
    expect(answers.filter((a) => a.ms > timeoutMs + 1000)).toEqual([])
  } finally {
    await worker.stop()
    dead.close()
  }
}, 30_000)
