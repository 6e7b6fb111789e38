// The PostgreSQL pool's breaker hears a connection failure as news about the server now, unless the pool has succeeded
// since the failing work began: then it is news from an older connection (after a failover, a backend of the old primary
// ending late, seconds after the new primary serves). Seen in test/faults/postgres-failover.test.ts as a burst of 503s
// after the worker served again; pinned here with backends ended on purpose (pg_terminate_backend: SQLSTATE 57P01).
import { afterAll, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import postgres from 'postgres'
import { config } from '../../shared/config'
import { withDeadlines } from '../../shared/db/deadline'
import { eventually } from '../helpers'

const application = `breaker-${randomUUID().slice(0, 8)}`
const pool = withDeadlines(
  postgres(config.databaseUrl, { max: 3, onnotice: () => {}, connection: { application_name: application } }),
  { timeoutMs: 20_000, coolDownMs: 60_000 },
)
const admin = postgres(config.databaseUrl, { max: 1, onnotice: () => {} })

afterAll(async () => {
  await pool.end({ timeout: 0 }).catch(() => {})
  await admin.end()
})

/** Starts a statement that holds its connection until its backend is ended; resolves to its error message. */
async function longStatement(marker: string): Promise<{ ended(): Promise<string> }> {
  const outcome = pool.unsafe(`select pg_sleep(30) as "${marker}"`).then(() => 'answered', (error: Error) => error.message)
  await eventually(async () => (await admin`select 1 from pg_stat_activity where application_name = ${application}
    and state = 'active' and query like ${`%${marker}%`}`).length === 1, 5000, `${marker} running`)
  return {
    async ended() {
      await admin`select pg_terminate_backend(pid) from pg_stat_activity where application_name = ${application}
        and query like ${`%${marker}%`} and pid <> pg_backend_pid()`
      return outcome
    },
  }
}

const failure = (query: Promise<unknown>) => query.then(() => 'answered', (error: Error) => error.message)

test('a statement begun before the pool\'s latest success fails with its connection: new work is still taken', async () => {
  const old = await longStatement('old')
  expect(await failure(pool`select 1`)).toBe('answered') // the pool succeeds after the old statement began
  expect(await old.ended()).toContain('The database is unavailable (cannot connect)')
  expect(await failure(pool`select 1`)).toBe('answered')
  expect(await failure(pool.begin((tx) => tx`select 1`))).toBe('answered')
})

test('a statement begun after the pool\'s latest success fails with its connection: the breaker opens and refuses new work', async () => {
  expect(await failure(pool`select 1`)).toBe('answered')
  const fresh = await longStatement('fresh')
  expect(await fresh.ended()).toContain('The database is unavailable (cannot connect)')
  expect(await failure(pool`select 1`)).toContain('recent connection failure')
})
