// The PostgreSQL error codes (SQLSTATE; PostgreSQL's manual, Appendix A) the platform acts on, by their manual names,
// in one table, and the one way to ask an error whether it is one of them. No imports: shared/errors.ts reads it too.

/** Each code the platform tells apart, named as PostgreSQL's manual names it (snake_case there, camelCase here). */
export const SQLSTATE = {
  /** 23505: an insert or update hit a unique index (a name taken, two racing creates). */
  uniqueViolation: '23505',
  /** 23503: a row referenced by the insert is gone (deleted meanwhile), or still referenced by the delete. */
  foreignKeyViolation: '23503',
  /** 23514: a row fits none of a table's check constraints (a partitioned table with no partition for it). */
  checkViolation: '23514',
  /** 25006: a write refused by a read-only server (a primary fenced for a switchover, a standby). */
  readOnlySqlTransaction: '25006',
  /** 40001: a serialization failure; on a hot standby, a read cancelled by a recovery conflict. */
  serializationFailure: '40001',
  /** 40P01: a deadlock; PostgreSQL aborted this transaction to break it. */
  deadlockDetected: '40P01',
  /** 42P01: the table does not exist (dropped by another process meanwhile). */
  undefinedTable: '42P01',
  /** 42P04: CREATE DATABASE of a database that exists. */
  duplicateDatabase: '42P04',
  /** 55P03: a lock asked for with NOWAIT or lock_timeout was not available. */
  lockNotAvailable: '55P03',
  /** 57014: the statement was cancelled (its statement_timeout, or a cancel request). */
  queryCanceled: '57014',
  /** 57P01: the server is shutting down (a fast stop, as in a switchover) and ended the connection. */
  adminShutdown: '57P01',
  /** 57P02: another backend crashed and the server ended every connection. */
  crashShutdown: '57P02',
  /** 57P03: the server cannot take connections now (starting up, shutting down, recovering). */
  cannotConnectNow: '57P03',
} as const

export type SqlStateName = keyof typeof SQLSTATE

/** The SQLSTATE of a PostgreSQL error (postgres.js puts it in `code`); undefined for anything without one. */
export function sqlStateOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === 'string' ? code : undefined
}

/**
 * Whether `error` is PostgreSQL's error `name`.
 * @example if (isPgError(error, 'uniqueViolation')) throw conflict('That name is taken')
 */
export const isPgError = (error: unknown, name: SqlStateName): boolean => sqlStateOf(error) === SQLSTATE[name]
