// Analytics reads on a streaming replica, against a real hot standby of the test run's PostgreSQL started here on
// loopback (./standby.ts): api workers with ANALYTICS_DATABASE_URL at it answer from it; with replay paused, a worker
// whose bound the standby is within answers what it replayed and says so (`as_of`), one whose bound it is past reads
// the primary; a read the standby cancels for a recovery conflict is read again on the primary, also when the standby
// then ends its session before the rollback is through; with the standby stopped, analytics still answers from the
// primary.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import postgres from 'postgres'
import { config } from '../../shared/config'
import { analyticsSql, sql } from '../../shared/db/client'
import { analyticsReads } from '../../services/api/analytics/reads'
import { call, eventually, freePort, newProduct, ok, startProcess, type Worker } from '../helpers'
import { startStandby, type Standby } from './standby'

type Owner = Awaited<ReturnType<typeof newProduct>>

/** How long a conflicting replay waits for a standby read before cancelling it (the server's default is 30 s). */
const STANDBY_DELAY_MS = 100
/** The strict worker's bound: replay paused longer than this sends its reads to the primary. */
const STRICT_LAG_MS = 500

let standby: Standby
let owner: Owner
/** ANALYTICS_REPLICA_MAX_LAG_MS 60 s: the paused standby stays within it for the whole file. */
let lenient: Worker & { metricsPort: number }
/** ANALYTICS_REPLICA_MAX_LAG_MS 500 ms. */
let strict: Worker & { metricsPort: number }

async function worker(maxLagMs: number) {
  const metricsPort = await freePort()
  const started = await startProcess('api', {
    ANALYTICS_DATABASE_URL: standby.url, ANALYTICS_REPLICA_MAX_LAG_MS: String(maxLagMs), METRICS_PORT: String(metricsPort),
    DB_COOL_DOWN_MS: '5000', // the replica's breaker stays open across the last test's second read
  })
  return Object.assign(started, { metricsPort })
}

beforeAll(async () => {
  standby = await startStandby(config.databaseUrl, { max_standby_streaming_delay: `${STANDBY_DELAY_MS}ms`, hot_standby_feedback: 'off' })
  console.log(`pg_basebackup of the test server took ${Math.round(standby.backupMs)} ms`)
  ;[lenient, strict, owner] = await Promise.all([worker(60_000), worker(STRICT_LAG_MS), newProduct('Replica reads')])
}, 60_000) // the base backup copies every database of the server: 1 to 5 s here, more beside scripts/test's other passes

afterAll(async () => {
  await Promise.all([lenient?.stop(), strict?.stop()])
  await standby?.stop()
})

const capture = async (events: { event: string; users_id: string }[]) => {
  const body = { events: events.map((e) => ({ event: e.event, identity: { users_id: e.users_id } })) }
  ok(await call('POST', '/tracking/events', { token: owner.token, productId: owner.productId, body }), 'capture')
}

/** POST to a worker over HTTP, as the owner. */
async function post(target: Worker, path: string, body: unknown) {
  const response = await fetch(`${target.url}${path}`, {
    method: 'POST', body: JSON.stringify(body),
    headers: { authorization: `Bearer ${owner.token}`, 'x-product-id': owner.productId, 'content-type': 'application/json' },
  })
  const answer = await response.json()
  if (response.status !== 200) throw new Error(`${path}: ${response.status} ${JSON.stringify(answer)}`)
  return answer
}

const RANGE = { from: '-1d' }
const countOn = async (target: Worker) => {
  const answer = await post(target, '/analytics/query', { entity: 'events', metrics: ['count'], range: RANGE })
  return { count: answer.rows[0].count as number, asOf: Date.parse(answer.as_of) }
}
const funnelOn = async (target: Worker) => {
  const answer = await post(target, '/analytics/funnel', { steps: [{ entity: 'events', event: 'signup' }, { entity: 'events', event: 'purchase' }], identity: 'users_id', range: RANGE })
  return (answer.steps as { count: number }[]).map((s) => s.count)
}

/** The worker's `platform_analytics_reads_total` by `server/reason`. */
async function reads(target: { metricsPort: number }): Promise<Record<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${target.metricsPort}/metrics`)).text()
  const counts: Record<string, number> = {}
  for (const [, server, reason, value] of text.matchAll(/^platform_analytics_reads_total\{server="(\w+)",reason="(\w+)"\} (\S+)$/gm)) {
    counts[`${server}/${reason}`] = Number(value)
  }
  return counts
}
const onServer = (counts: Record<string, number>, server: string) =>
  Object.entries(counts).filter(([key]) => key.startsWith(`${server}/`)).reduce((sum, [, n]) => sum + n, 0)

/** The product's events the standby has replayed. */
const standbyCount = async () => Number((await standby.sql`select count(*)::int as n from tracked_events where product_id = ${owner.productId}`)[0]!.n)

/**
 * A read of a table of its own that sleeps on the standby (not on the primary) is cancelled there for a recovery
 * conflict, by an exclusive lock taken on the primary and replayed: it must be read again on the primary, counted as a
 * conflict, without sleeping out. `run` runs `query` (the sleeping read) in the transaction it is given.
 */
async function expectConflictReadOnPrimary(name: string, run: (tx: postgres.TransactionSql, query: string) => Promise<unknown>) {
  const table = `analytics_replica_${name}_${process.pid}`
  await sql.unsafe(`create table ${table} (n int); insert into ${table} values (1), (2)`)
  const replica = postgres(standby.url, { max: 1, onnotice: () => {} })
  const seen: string[] = []
  try {
    await eventually(async () => (await standby.sql`select to_regclass(${table}) is not null as there`)[0]!.there, 5000, 'the table on the standby')
    const read = analyticsReads({ primary: analyticsSql, replica, primaryWal: sql, maxLagMs: 60_000, observe: (server, reason) => seen.push(`${server}/${reason}`) })
    const reading = read((tx) => run(tx, `select (select sum(n)::int from ${table}) as total, pg_sleep(case when pg_is_in_recovery() then 10 else 0 end)::text`))
    await eventually(async () => (await standby.sql`select count(*)::int as n from pg_stat_activity where query like '%pg_sleep(case%' and state = 'active' and pid <> pg_backend_pid()`)[0]!.n === 1, 5000, 'the read running on the standby')
    const started = Date.now()
    await sql.begin((tx) => tx.unsafe(`lock table ${table} in access exclusive mode`))
    const answer = await reading
    expect([answer.server, answer.reason, (answer.value as unknown as { total: number }[])[0]!.total]).toEqual(['primary', 'conflict', 3])
    expect(seen).toEqual(['primary/conflict'])
    expect(Date.now() - started).toBeLessThan(5000) // cancelled, not slept out
  } finally {
    await replica.end({ timeout: 1 })
    await sql.unsafe(`drop table if exists ${table}`)
  }
}

describe('analytics reads on a streaming replica', () => {
  test('a worker with ANALYTICS_DATABASE_URL at the standby answers metric queries and funnels from it', async () => {
    await capture([{ event: 'signup', users_id: 'u1' }, { event: 'signup', users_id: 'u2' }, { event: 'signup', users_id: 'u3' }])
    await eventually(async () => (await standbyCount()) === 3, 5000, 'the standby replays the capture')
    const before = await reads(lenient)
    expect((await countOn(lenient)).count).toBe(3)
    expect(await funnelOn(lenient)).toEqual([3, 0])
    const after = await reads(lenient)
    expect(onServer(after, 'replica') - onServer(before, 'replica')).toBe(2)
    expect(onServer(after, 'primary') - onServer(before, 'primary')).toBe(0)
  })

  test('replay paused: within its bound the standby answers what it replayed, with an as_of before the new writes; past it the primary answers them', async () => {
    await standby.sql`select pg_wal_replay_pause()`
    await eventually(async () => (await standby.sql`select pg_get_wal_replay_pause_state() as state`)[0]!.state === 'paused', 5000, 'replay paused')
    const pausedAt = Date.now()
    const capturing = Date.now()
    await capture([{ event: 'purchase', users_id: 'u1' }, { event: 'purchase', users_id: 'u2' }])
    const captured = Date.now()
    expect(Number((await sql`select count(*)::int as n from tracked_events where product_id = ${owner.productId}`)[0]!.n)).toBe(5)

    // Lenient (60 s): the standby's 3 events, and an as_of that says the answer predates the purchases.
    const asked = Date.now()
    const stale = await countOn(lenient)
    expect(stale.count).toBe(3)
    expect(stale.asOf).toBeLessThan(capturing)
    expect(stale.asOf).toBeGreaterThanOrEqual(asked - 60_000)
    expect(await funnelOn(lenient)).toEqual([3, 0])
    expect((await reads(lenient))['replica/within_lag']).toBeGreaterThanOrEqual(2)

    // Strict (500 ms): once replay has stood still longer than that, the primary answers, purchases included.
    await Bun.sleep(Math.max(0, pausedAt + STRICT_LAG_MS + 200 - Date.now()))
    const before = await reads(strict)
    const fresh = await countOn(strict)
    expect(fresh.count).toBe(5)
    expect(fresh.asOf).toBeGreaterThanOrEqual(captured)
    expect(await funnelOn(strict)).toEqual([3, 2])
    expect(((await reads(strict))['primary/lagging'] ?? 0) - (before['primary/lagging'] ?? 0)).toBe(2)
    const metrics = await (await fetch(`http://127.0.0.1:${strict.metricsPort}/metrics`)).text()
    const lag = Number(/^platform_analytics_replica_lag_seconds (\S+)$/m.exec(metrics)?.[1])
    expect(lag).toBeGreaterThan(STRICT_LAG_MS / 1000)

    // Resumed, the standby catches up and answers everything again.
    await standby.sql`select pg_wal_replay_resume()`
    await eventually(async () => (await standbyCount()) === 5, 5000, 'the standby replays the purchases')
    const replica = onServer(await reads(lenient), 'replica')
    expect((await countOn(lenient)).count).toBe(5)
    expect(onServer(await reads(lenient), 'replica')).toBe(replica + 1)
  })

  test('a read the standby cancels for a recovery conflict (SQLSTATE 40001) is read again on the primary', async () => {
    await expectConflictReadOnPrimary('probe', (tx, query) => tx.unsafe(query))
  })

  test('a read whose session the standby ends after cancelling it, before its rollback is through, is read again on the primary', async () => {
    await expectConflictReadOnPrimary('ended', async (tx, query) => {
      const [session] = await tx`select pg_backend_pid() as pid, pg_is_in_recovery() as standby`
      try {
        return await tx.unsafe(query)
      } catch (error) {
        // Cancelled on the standby: its session ends before the rollback is sent, as when PostgreSQL escalates the
        // cancel to a termination. The transaction then rejects with its closed connection, not the 40001.
        if (session!.standby) {
          await standby.sql`select pg_terminate_backend(${session!.pid})`
          await eventually(async () => (await standby.sql`select count(*)::int as n from pg_stat_activity where pid = ${session!.pid}`)[0]!.n === 0, 5000, 'the session ended')
        }
        throw error
      }
    })
  })

  test('with the standby stopped, analytics answers from the primary, at once once the breaker is open', async () => {
    await standby.stop()
    const before = await reads(lenient)
    expect((await countOn(lenient)).count).toBe(5)
    const started = Date.now()
    expect(await funnelOn(lenient)).toEqual([3, 2])
    expect(Date.now() - started).toBeLessThan(1000)
    const after = await reads(lenient)
    expect((after['primary/unavailable'] ?? 0) - (before['primary/unavailable'] ?? 0)).toBe(2)
    expect(onServer(after, 'replica')).toBe(onServer(before, 'replica'))
  })
})
