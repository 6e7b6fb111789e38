// PostgreSQL and Redis failures by kind, counted where each backend's guard already sees every outcome once
// (shared/db/deadline.ts per statement, shared/redis/guard.ts per command and server), as plain numbers that
// shared/metrics/breakers.ts reads at scrape time. Only failures of the backend count, never a statement's or command's
// own error (a unique violation, a NOSCRIPT, a script's refusal): those are answers, not outages.
import { SQLSTATE } from './db/error-codes'

export type Backend = 'postgres' | 'redis'
/** `timeout`: no answer within the deadline; `unavailable`: the server cannot be reached; `other`: it answered that it cannot serve. */
export type BackendErrorKind = 'timeout' | 'unavailable' | 'other'

export const BACKEND_ERROR_KINDS: readonly BackendErrorKind[] = ['timeout', 'unavailable', 'other']

/** `${backend}:${kind}` → failures since the process started. */
export const backendErrorCounts = new Map<string, number>()

export function countBackendError(backend: Backend, kind: BackendErrorKind): void {
  const key = `${backend}:${kind}`
  backendErrorCounts.set(key, (backendErrorCounts.get(key) ?? 0) + 1)
}

/**
 * SQLSTATE classes of the server's own trouble rather than the statement's: 53 insufficient resources, 54 program limit,
 * 55 object not in prerequisite state (a lock not available), 57 operator intervention (shutdown; 57014, a statement
 * cancelled by its statement_timeout, is a timeout), 58 system error, XX internal error; and 25006, a write refused by
 * a server that is read-only now (a primary fenced or being failed over).
 */
const SERVER_TROUBLE = new RegExp(`^(53|54|55|57|58|XX|${SQLSTATE.readOnlySqlTransaction})`)

/** The kind of a PostgreSQL statement's failure, or null for the statement's own error (or a connection failure, told apart by the caller). */
export function postgresErrorKind(error: unknown): BackendErrorKind | null {
  const code = (error as { code?: unknown } | null)?.code
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return null
  if (code === SQLSTATE.queryCanceled) return 'timeout'
  return SERVER_TROUBLE.test(code) ? 'other' : null
}

/** Error replies by which Redis says it cannot serve now: out of memory, loading, busy script, read-only replica, … */
const REDIS_TROUBLE = /^(OOM|LOADING|BUSY|READONLY|MASTERDOWN|MISCONF|NOREPLICAS|TRYAGAIN) /

/** The kind of a Redis command's failure (`unreachable`: already judged by shared/errors.ts backendUnreachable), or null for a plain error reply. */
export function redisErrorKind(error: Error, unreachable: boolean): BackendErrorKind | null {
  if (/timed out/i.test(error.message)) return 'timeout'
  if (unreachable) return 'unavailable'
  return REDIS_TROUBLE.test(error.message) ? 'other' : null
}
