// Bounded waits on PostgreSQL: every statement and every transaction of a guarded pool answers within a deadline, and a
// pool that cannot reach the server fails new work at once (a circuit breaker) instead of queueing it.
//
// Why: postgres.js keeps queries queued through its reconnect backoff while the server is unreachable, and a stalled
// link never answers at all, so without this a request could hang for tens of seconds or forever. With it, a request
// that needs PostgreSQL gets `503 unavailable` with Retry-After within the deadline, and the pool serves again on its
// own as soon as one statement succeeds after the cool-down.
import type postgres from 'postgres'
import { type ApiError, isConnectionFailure, isReadOnlyServer, unavailable } from '../errors'
import { countBackendError, postgresErrorKind } from '../backend-errors'
import { Breaker } from '../breaker'
import { SQLSTATE } from './error-codes'

type Sql = postgres.Sql

export interface DeadlineOptions {
  /** Longest wait for one statement, or for one transaction as a whole: queueing, connecting and running. */
  timeoutMs: number
  /** After a connection failure, new work fails at once for this long; then the next statement probes the server. */
  coolDownMs: number
  /** The pool's name in the metrics (`platform_db_statements_pending`); a pool without one is not counted there. */
  name?: string
}

/** Statements of a pool handed to it and not answered yet: `sent` to a connection, or `waiting` for one. */
export interface PendingStatements {
  sent: number
  waiting: number
}

const pools = new Map<string, PoolState>()

/**
 * The pending statements of each named pool, by name, read now (metrics). A statement is written to a connection as
 * soon as one is open and not full (postgres.js pipelines), so `waiting` counts those for which every connection is
 * busy connecting or full, and `sent` those whose answer is awaited (running, or queued behind another on its connection).
 */
export function pendingStatements(): Map<string, PendingStatements> {
  const counts = new Map<string, PendingStatements>()
  for (const [name, pool] of pools) {
    let sent = 0
    for (const query of pool.waiting) if (query.state !== null) sent++
    counts.set(name, { sent, waiting: pool.waiting.size - sent })
  }
  return counts
}

/** The 503 every PostgreSQL outage turns into; `retryAfter` seconds. */
const databaseUnavailable = (reason: string, retryAfter = 1) =>
  unavailable(`The database is unavailable (${reason}); retry shortly`, retryAfter)

/**
 * A connection failure as the caller sees it: the platform's 503, logged once per outage by the breaker, not per request.
 * A write refused by a read-only server (a primary being failed over) is a 503 too: the request was fine.
 */
const asUnavailable = (error: unknown) =>
  isConnectionFailure(error) ? databaseUnavailable('cannot connect')
    : isReadOnlyServer(error) ? databaseUnavailable('the server is read-only now')
      : error

/** The parts of a postgres.js Query this module relies on (see node_modules/postgres/src/query.js). */
interface PendingQuery extends Promise<unknown> {
  /** Set once the statement is written to a connection. */
  state: unknown
  executed: boolean
  reject(error: unknown): void
  strings: readonly string[]
  args: unknown[]
  tagged: boolean
}

const NO_OP = Object.freeze(['select 1 where false'])

/**
 * A statement already answered 503 that has not reached the server yet must never run later (a write the caller was
 * told failed): it becomes a no-op. postgres.js' own cancel() cannot be used for this: on a statement that is the first
 * one of a connection still connecting, it leaves that connection stuck in the pool for good.
 */
function defuse(query: PendingQuery): void {
  query.strings = NO_OP
  query.args = []
  query.tagged = false
}

const isQuery = (value: unknown): value is PendingQuery =>
  value instanceof Promise && 'executed' in value && 'strings' in value

/**
 * The failure of an attempt to get a new connection (refused, timed out, no host of the list the primary), as opposed
 * to an established connection failing under a statement.
 */
const CONNECT_ATTEMPT_CODES = new Set(['ECONNREFUSED', 'CONNECT_TIMEOUT', 'CONNECTION_DESTROYED', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', SQLSTATE.cannotConnectNow])
const isConnectAttemptFailure = (error: unknown) => CONNECT_ATTEMPT_CODES.has((error as { code?: string } | null)?.code ?? '')

/** What the queries of one pool share: its breaker, and the queries handed to it that are not answered yet. */
class PoolState {
  readonly waiting = new Set<PendingQuery>()
  /** performance.now() of the latest success, and of the latest connection failure the breaker was told of. */
  private lastSuccessAt = Number.NEGATIVE_INFINITY
  private lastFailureAt = Number.NEGATIVE_INFINITY
  constructor(readonly breaker: Breaker, private readonly pool: Sql) {}

  /**
   * postgres.js fetches the array types on every new connection and drops that promise: when the link dies during the
   * fetch (an outage), its rejection is unhandled and would end the process. The parsers it registers are kept for the
   * pool, so once one statement has succeeded (its connection fetched them), later connections need not fetch again.
   */
  succeeded(): void {
    this.lastSuccessAt = performance.now()
    this.breaker.succeeded()
    if (this.pool.options.fetch_types) (this.pool.options as { fetch_types: boolean }).fetch_types = false
  }

  /**
   * A connection failure of work begun at `since` (`probe`: let through while the breaker was open; `connecting`: the
   * failure of an attempt to get a new connection, isConnectAttemptFailure): open the breaker and answer every query still
   * waiting for a connection now, not one by one. Unless it is late news of an outage the breaker has been told of and
   * the pool has come back from since: the work began before that outage's failures (after a failover, a backend of
   * the old primary ending seconds late); or it began before the pool's latest success and was a probe of that outage
   * (one that met the standby before its promotion, answered after a later probe reached the promoted one) or an
   * attempt to connect (a host list's dead primary refusing it): the server that serves answered after it began.
   * Opening the breaker then would refuse work the server that serves now takes. A first outage's failures always
   * count, however recent the last success (at a crash, the statements in flight began before it), and so does the
   * failure of a statement that had its connection, whenever it began (a cut after a recovery).
   */
  connectionFailed(since: number, probe: boolean, connecting: boolean): void {
    const recovered = this.lastFailureAt !== Number.NEGATIVE_INFINITY && this.lastFailureAt < this.lastSuccessAt
    if (recovered && (since < this.lastFailureAt || (since < this.lastSuccessAt && (probe || connecting)))) return
    this.lastFailureAt = performance.now()
    this.breaker.failed()
    for (const query of this.waiting) {
      if (query.state !== null) continue
      this.waiting.delete(query)
      query.reject(databaseUnavailable('cannot connect'))
      defuse(query)
    }
  }
}

/**
 * Arms a postgres.js query when it is first awaited (fragments interpolated into other queries are never awaited, so
 * they stay untouched): refuse it while `refuse()` says so, else reject it at the deadline. A query still waiting for
 * a connection at the deadline is defused, so a 503 never turns into a late write; one already sent finishes in the
 * background (its outcome is unknown to the caller, as with any timeout).
 */
function arm(query: PendingQuery, refuse: () => ApiError | null, deadline: () => number, pool: PoolState): void {
  const then = query.then
  let armed = false
  // biome-ignore lint/suspicious/noThenProperty: arming the deadline when the query is awaited is this function's job
  query.then = function (this: PendingQuery, ...args: Parameters<Promise<unknown>['then']>) {
    if (!armed) {
      armed = true
      const refusal = refuse()
      if (refusal) {
        query.executed = true // postgres.js then never hands it to a connection
        query.reject(refusal)
      } else {
        watch(query, then, deadline(), pool)
      }
    }
    const [onFulfilled, onRejected] = args
    return then.call(this, onFulfilled, onRejected && ((error: unknown) => onRejected(asUnavailable(error)))) as never
  } as never
}

/** Rejects `query` at the deadline and reports its outcome to the breaker (through the query's own, untranslated `then`). */
function watch(query: PendingQuery, then: PendingQuery['then'], ms: number, pool: PoolState): void {
  pool.waiting.add(query)
  const begun = performance.now()
  const probe = pool.breaker.isOpen
  let timedOut = false
  const timer = setTimeout(() => {
    // Not a verdict on the server: a busy pool queues statements too. Only connection errors open the breaker.
    timedOut = true
    countBackendError('postgres', 'timeout')
    const sent = query.state !== null
    query.reject(databaseUnavailable(sent ? 'no answer within the deadline' : 'no connection within the deadline'))
    if (!sent) defuse(query)
  }, ms)
  const settled = () => {
    clearTimeout(timer)
    pool.waiting.delete(query)
  }
  then.call(
    query,
    () => {
      settled()
      pool.succeeded()
    },
    (error) => {
      settled()
      const connection = isConnectionFailure(error)
      // One count per statement: a late failure of one already answered at its deadline is not counted again.
      const kind = connection ? 'unavailable' : postgresErrorKind(error)
      if (kind && !timedOut) countBackendError('postgres', kind)
      if (connection) pool.connectionFailed(begun, probe, isConnectAttemptFailure(error))
    },
  )
}

/**
 * A postgres.js pool whose statements and transactions are bounded by `options.timeoutMs` and refused at once while the
 * breaker is open. Everything else (helpers, fragments, `end`) behaves exactly as the pool's own.
 */
export function withDeadlines(pool: Sql, options: DeadlineOptions, breaker = new Breaker('postgres', options.coolDownMs)): Sql {
  const state = new PoolState(breaker, pool)
  if (options.name) pools.set(options.name, state)
  const refuseWhileOpen = () => (breaker.tryPass() ? null : databaseUnavailable('recent connection failure', breaker.retryAfter))
  const guardQueries = (target: Sql, refuse: () => ApiError | null, deadline: () => number): Sql =>
    new Proxy(target, {
      apply(fn, self, args) {
        const result = Reflect.apply(fn as never, self, args)
        if (isQuery(result)) arm(result, refuse, deadline, state)
        return result
      },
      get(fn, property, receiver) {
        const value = Reflect.get(fn, property, receiver)
        if (property === 'unsafe' && typeof value === 'function') {
          return (...args: unknown[]) => {
            const result = value.apply(fn, args)
            if (isQuery(result)) arm(result, refuse, deadline, state)
            return result
          }
        }
        if (property === 'begin' && target === pool) return begin
        return value
      },
    })

  /**
   * The whole transaction gets one deadline. Past it, the caller has its 503 and the transaction must not go on: a
   * statement issued afterwards is refused (the callback then throws and postgres.js rolls back), and a transaction
   * that only gets its connection afterwards never runs the callback.
   */
  const begin = (...args: unknown[]) => {
    if (!breaker.tryPass()) return Promise.reject(databaseUnavailable('recent connection failure', breaker.retryAfter))
    const probe = breaker.isOpen
    const fn = args.pop() as (tx: Sql) => unknown
    let expired = false
    const started = Date.now()
    const begun = performance.now()
    const remaining = () => Math.max(1, options.timeoutMs - (Date.now() - started))
    const refuseExpired = () => (expired ? databaseUnavailable('transaction outlived its deadline') : null)
    const run = (pool.begin as (...a: unknown[]) => Promise<unknown>)(...args, (tx: Sql) => {
      if (expired) throw databaseUnavailable('transaction started after its deadline')
      return fn(guardQueries(tx, refuseExpired, remaining))
    })
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        expired = true
        reject(databaseUnavailable('transaction did not finish within the deadline'))
      }, options.timeoutMs)
      run.then(
        (value) => {
          clearTimeout(timer)
          state.succeeded()
          resolve(value)
        },
        (error) => {
          clearTimeout(timer)
          if (isConnectionFailure(error)) state.connectionFailed(begun, probe, isConnectAttemptFailure(error))
          reject(asUnavailable(error))
        },
      )
    })
  }

  return guardQueries(pool, refuseWhileOpen, () => options.timeoutMs)
}
