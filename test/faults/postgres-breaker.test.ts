// The PostgreSQL pool's breaker hears a connection failure as news about the server now, unless it is late news of an
// outage it already opened for and the pool has come back from since (after a failover, a backend of the old primary
// ending seconds after the new primary serves: seen in test/faults/postgres-failover.test.ts as a burst of 503s after
// the worker served again). Pinned here with backends ended on purpose (pg_terminate_backend: SQLSTATE 57P01), each
// test on a pool of its own.
import { afterAll, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import postgres from 'postgres'
import { config } from '../../shared/config'
import { withDeadlines } from '../../shared/db/deadline'
import { eventually } from '../helpers'

const COOL_DOWN_MS = 300
const admin = postgres(config.databaseUrl, { max: 1, onnotice: () => {} })
const pools: ReturnType<typeof withDeadlines>[] = []

afterAll(async () => {
  await Promise.all(pools.map((pool) => pool.end({ timeout: 0 }).catch(() => {})))
  await admin.end()
})

/** Waits until the statement marked `marker` of the backends named `application` runs. */
const running = (application: string, marker: string) =>
  eventually(async () => (await admin`select 1 from pg_stat_activity where application_name = ${application}
    and state = 'active' and query like ${`%${marker}%`}`).length === 1, 5000, `${marker} running`)

/** Ends the backend running the statement marked `marker` (SQLSTATE 57P01, as at a server's shutdown). */
const endBackend = (application: string, marker: string) =>
  admin`select pg_terminate_backend(pid) from pg_stat_activity where application_name = ${application}
    and query like ${`%${marker}%`} and pid <> pg_backend_pid()`

/** A pool of its own (its backends named, so a test ends only its own), its breaker cooling down for COOL_DOWN_MS. */
function newPool(max = 3) {
  const application = `breaker-${randomUUID().slice(0, 8)}`
  const pool = withDeadlines(
    postgres(config.databaseUrl, { max, onnotice: () => {}, connection: { application_name: application } }),
    { timeoutMs: 20_000, coolDownMs: COOL_DOWN_MS },
  )
  pools.push(pool)
  /** Starts a statement that holds its connection until its backend is ended; `ended()` ends it, gives its error. */
  const longStatement = async (marker: string) => {
    const outcome = pool.unsafe(`select pg_sleep(30) as "${marker}"`).then(() => 'answered', (error: Error) => error.message)
    await running(application, marker)
    return {
      async ended() {
        await endBackend(application, marker)
        return outcome
      },
    }
  }
  return { pool, longStatement }
}

const failure = (query: Promise<unknown>) => query.then(() => 'answered', (error: Error) => error.message)
const CANNOT_CONNECT = 'The database is unavailable (cannot connect)'
const REFUSED = 'recent connection failure'

test('a crash: the statements in flight fail and the breaker opens at once, though the last success came after they began', async () => {
  const { pool, longStatement } = newPool()
  const inFlight = await longStatement('in-flight')
  expect(await failure(pool`select 1`)).toBe('answered')
  expect(await inFlight.ended()).toContain(CANNOT_CONNECT)
  expect(await failure(pool`select 1`)).toContain(REFUSED)
})

test('late news of an outage the breaker opened for, after the pool came back: new work is still taken', async () => {
  const { pool, longStatement } = newPool()
  const late = await longStatement('late') // began before the outage, ends only after the pool serves again
  const outage = await longStatement('outage')
  expect(await outage.ended()).toContain(CANNOT_CONNECT)
  expect(await failure(pool`select 1`)).toContain(REFUSED)
  // After the cool-down a probe passes and the pool serves again.
  await eventually(async () => (await failure(pool`select 1`)) === 'answered', 5000, 'the pool serving again')
  expect(await late.ended()).toContain(CANNOT_CONNECT)
  expect(await failure(pool`select 1`)).toBe('answered')
  expect(await failure(pool.begin((tx) => tx`select 1`))).toBe('answered')
})

test('a failure of work begun after the pool came back is news of a new outage: the breaker opens again', async () => {
  const { pool, longStatement } = newPool()
  const first = await longStatement('first')
  expect(await first.ended()).toContain(CANNOT_CONNECT)
  await eventually(async () => (await failure(pool`select 1`)) === 'answered', 5000, 'the pool serving again')
  const second = await longStatement('second')
  expect(await second.ended()).toContain(CANNOT_CONNECT)
  expect(await failure(pool`select 1`)).toContain(REFUSED)
})

test('late news of a probe: one let through during the outage fails after a later probe found the server back, and new work is still taken', async () => {
  // The failover's race (test/faults/postgres-failover.test.ts): a probe meets the standby before its promotion and is
  // answered only after another probe, a cool-down later, reached the promoted one.
  const { pool, longStatement } = newPool()
  const outage = await longStatement('outage')
  expect(await outage.ended()).toContain(CANNOT_CONNECT)
  expect(await failure(pool`select 1`)).toContain(REFUSED)
  await Bun.sleep(COOL_DOWN_MS + 50)
  const probe = await longStatement('probe') // let through as the probe, and held
  expect(await failure(pool`select 1`)).toContain(REFUSED) // no second probe while it may still answer
  await Bun.sleep(COOL_DOWN_MS + 50)
  expect(await failure(pool`select 1`)).toBe('answered') // the next probe: the pool serves again
  expect(await probe.ended()).toContain(CANNOT_CONNECT)
  expect(await failure(pool`select 1`)).toBe('answered')
  expect(await failure(pool.begin((tx) => tx`select 1`))).toBe('answered')
})

test('the error a backend sent as it ended is its own connection\'s: the next statement, on a new connection, is not answered with it', async () => {
  // postgres.js kept a connection's last error across the reconnect and answered the next connection's first statement
  // with it, unsent (scripts/patches/postgres@3.4.9.patch): after a failover, each of the old primary's idle
  // connections failed one more request once the new primary served.
  const { pool, longStatement } = newPool(1)
  const ended = await longStatement('ended')
  expect(await ended.ended()).toContain(CANNOT_CONNECT)
  await Bun.sleep(COOL_DOWN_MS + 50)
  expect(await failure(pool`select 1`)).toBe('answered')
  expect(await failure(pool`select 1`)).toBe('answered')
})

test('with several hosts in DATABASE_URL, the first statement of a connection whose backend ends while it runs fails with the connection, never answered with an empty result; the next connection goes round the hosts again', async () => {
  // A refusing address (nothing listens on port 1), then the server: each connection moves past the first.
  const { host } = new URL(config.databaseUrl)
  const application = `hosts-${randomUUID().slice(0, 8)}`
  const pool = postgres(config.databaseUrl.replace(`@${host}`, `@127.0.0.1:1,${host}`), { max: 1, onnotice: () => {}, connection: { application_name: application } })
  try {
    const outcome = pool.unsafe('select pg_sleep(30) as "first"').then((rows) => `answered ${JSON.stringify(rows)}`, (error: Error) => error.message)
    await running(application, '"first"')
    await endBackend(application, '"first"')
    expect(await Promise.race([outcome, Bun.sleep(5000).then(() => 'still waiting after 5 s')])).toMatch(/CONNECTION_CLOSED|terminating connection/)
    expect((await pool`select 1 as x`).map((row) => row.x)).toEqual([1]) // on a new connection, past the refusing address again
  } finally {
    await pool.end({ timeout: 0 })
  }
})

test('a connection that dies while a statement\'s rows arrive leaves none of them to the next connection\'s first statement', async () => {
  const application = `rows-${randomUUID().slice(0, 8)}`
  // No array-types fetch, as the platform's pools once a statement has succeeded: the next statement is the first.
  const pool = postgres(config.databaseUrl, { max: 1, fetch_types: false, onnotice: () => {}, connection: { application_name: application } })
  try {
    // Three rows, then a wait: the rows reach the driver before the backend ends.
    const outcome = pool.unsafe('select g as "partial" from generate_series(1, 3) g union all select pg_sleep(30)::text::int')
      .then(() => 'answered', (error: Error) => error.message)
    await running(application, '"partial"')
    await endBackend(application, '"partial"')
    expect(await outcome).not.toBe('answered')
    expect([...(await pool`select 1 as x`)]).toEqual([{ x: 1 }])
  } finally {
    await pool.end({ timeout: 0 })
  }
})
