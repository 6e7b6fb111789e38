// Analytics reads cancelled by a replica's recovery conflict, without a database: the replica is a fake that fails the
// read and its rollback with errors shaped as postgres.js makes them (node_modules/postgres/src/errors.js), bare or
// behind the guarded pool (shared/db/deadline.ts) as production has it. The real standby's conflict is in
// test/analytics/replica.test.ts.
import { expect, test } from 'bun:test'
import postgres from 'postgres'
import { analyticsReads, isRecoveryConflict } from '../../services/api/analytics/reads'
import { withDeadlines } from '../../shared/db/deadline'
import { unavailable } from '../../shared/errors'

type Sql = postgres.Sql

// postgres.js builds a PostgresError from the server's ErrorResponse fields (its types declare no such constructor).
const PgError = postgres.PostgresError as unknown as new (fields: Record<string, string>) => Error & { code: string }
const pgError = (severity: 'ERROR' | 'FATAL', code: string, message: string) =>
  new PgError({ severity_local: severity, severity, code, message, file: 'postgres.c', line: '3200', routine: 'ProcessInterrupts' })

/** The standby's cancel: the read's statement fails, the transaction goes on to its rollback. */
const cancelled = () => pgError('ERROR', '40001', 'canceling statement due to conflict with recovery')
/** The standby ending the session for a conflict, in the statement's own answer. */
const terminatedForConflict = () => pgError('FATAL', '40001', 'terminating connection due to conflict with recovery')
/** A server shutting down (a fast stop), no conflict. */
const shutdown = () => pgError('FATAL', '57P01', 'terminating connection due to administrator command')
/** postgres.js's error for a connection that closed under a statement (Errors.connection('CONNECTION_CLOSED')). */
const connectionClosed = () =>
  Object.assign(new Error('write CONNECTION_CLOSED 127.0.0.1:55433'), { code: 'CONNECTION_CLOSED', errno: 'CONNECTION_CLOSED', address: '127.0.0.1', port: 55433 })

/**
 * A standby, caught up, whose read fails with `failure`; the rollback after it fails with `rollbackFailure` when given.
 * As postgres.js's `begin` does, the rollback's failure is what the transaction rejects with.
 */
function replicaFailing(failure: Error, rollbackFailure?: Error): Sql {
  const tx = {
    unsafe: async (text: string) => {
      if (text.includes('pg_is_in_recovery()')) return [{ standby: true, caught_up: true, replayed_at: new Date(), lag_ms: '0' }]
      throw failure
    },
  }
  const begin = async (fn: (tx: unknown) => Promise<unknown>) => {
    try {
      return await fn(tx)
    } catch (error) {
      throw rollbackFailure ?? error
    }
  }
  return { begin } as unknown as Sql
}

/**
 * A standby whose connection closes while the read is still waiting for its cancel: as postgres.js's `begin` does, the
 * transaction rejects with CONNECTION_CLOSED at once, and the read's statement fails after.
 */
function replicaClosingFirst(): Sql {
  const tx = {
    unsafe: async (text: string) => {
      if (text.includes('pg_is_in_recovery()')) return [{ standby: true, caught_up: true, replayed_at: new Date(), lag_ms: '0' }]
      await Bun.sleep(5)
      throw cancelled()
    },
  }
  const begin = (fn: (tx: unknown) => Promise<unknown>) => {
    fn(tx).catch(() => {})
    return new Promise((_, reject) => setTimeout(() => reject(connectionClosed()), 1))
  }
  return { begin } as unknown as Sql
}

const primary = { begin: async (fn: (tx: unknown) => Promise<unknown>) => fn({ unsafe: async () => [{ total: 3 }] }) } as unknown as Sql
const primaryWal = { unsafe: async () => [{ lsn: '0/1000000' }] } as unknown as Sql
/** Behind the guarded pool, as ANALYTICS_DATABASE_URL's pool is (shared/db/client.ts). */
const guarded = (replica: Sql) => withDeadlines(replica, { timeoutMs: 5000, coolDownMs: 1000 })

/** Where one read went: the server and reason it was observed with, and its answer. */
async function readOn(replica: Sql) {
  const seen: string[] = []
  const read = analyticsReads({ primary, replica, primaryWal, maxLagMs: 60_000, observe: (server, reason) => seen.push(`${server}/${reason}`) })
  const answer = await read((tx) => tx.unsafe('select the read') as Promise<unknown>)
  return { seen, value: answer.value }
}

test('a read the standby cancels for a conflict, its rollback through, is read again on the primary', async () => {
  expect(await readOn(replicaFailing(cancelled()))).toEqual({ seen: ['primary/conflict'], value: [{ total: 3 }] })
  expect(await readOn(guarded(replicaFailing(cancelled())))).toEqual({ seen: ['primary/conflict'], value: [{ total: 3 }] })
})

test('a read the standby cancels and then ends the session of, before the rollback is through, is a conflict too', async () => {
  // The transaction rejects with the rollback's CONNECTION_CLOSED; bare, and as the guarded pool's 503.
  expect(await readOn(replicaFailing(cancelled(), connectionClosed()))).toEqual({ seen: ['primary/conflict'], value: [{ total: 3 }] })
  expect(await readOn(guarded(replicaFailing(cancelled(), connectionClosed())))).toEqual({ seen: ['primary/conflict'], value: [{ total: 3 }] })
  // The rollback answered by the session's end for the conflict, or by a shutdown that came meanwhile.
  expect(await readOn(replicaFailing(cancelled(), terminatedForConflict()))).toEqual({ seen: ['primary/conflict'], value: [{ total: 3 }] })
  expect(await readOn(guarded(replicaFailing(cancelled(), shutdown())))).toEqual({ seen: ['primary/conflict'], value: [{ total: 3 }] })
})

test('a conflict is told by the read\'s own failure even when the transaction rejected before it, its connection closed', async () => {
  expect(await readOn(replicaClosingFirst())).toEqual({ seen: ['primary/conflict'], value: [{ total: 3 }] })
  expect(await readOn(guarded(replicaClosingFirst()))).toEqual({ seen: ['primary/conflict'], value: [{ total: 3 }] })
})

test('a read whose session the standby ends for a conflict while it runs is a conflict', async () => {
  expect(await readOn(replicaFailing(terminatedForConflict()))).toEqual({ seen: ['primary/conflict'], value: [{ total: 3 }] })
})

test('a session ended with no conflict is the replica unavailable: the guarded pool sends the read to the primary as such', async () => {
  expect(await readOn(guarded(replicaFailing(shutdown())))).toEqual({ seen: ['primary/unavailable'], value: [{ total: 3 }] })
  expect(await readOn(guarded(replicaFailing(connectionClosed())))).toEqual({ seen: ['primary/unavailable'], value: [{ total: 3 }] })
  // Bare, nothing calls it a conflict: the read fails with what the driver said.
  await expect(readOn(replicaFailing(shutdown()))).rejects.toMatchObject({ code: '57P01' })
  await expect(readOn(replicaFailing(connectionClosed()))).rejects.toMatchObject({ code: 'CONNECTION_CLOSED' })
})

test('isRecoveryConflict: by what the transaction rejected with, or by the first error its statements met', () => {
  expect(isRecoveryConflict(cancelled())).toBe(true)
  expect(isRecoveryConflict(pgError('ERROR', '40P01', 'deadlock detected'))).toBe(true)
  expect(isRecoveryConflict(connectionClosed(), cancelled())).toBe(true)
  expect(isRecoveryConflict(unavailable('The database is unavailable'), cancelled())).toBe(true)
  expect(isRecoveryConflict(connectionClosed())).toBe(false)
  expect(isRecoveryConflict(shutdown())).toBe(false)
  expect(isRecoveryConflict(connectionClosed(), shutdown())).toBe(false)
  expect(isRecoveryConflict(connectionClosed(), pgError('ERROR', '42P01', 'relation does not exist'))).toBe(false)
})
