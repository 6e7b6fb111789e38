// Where an analytics read runs, and how fresh its answer is: on the streaming replica (ANALYTICS_DATABASE_URL) when it
// has replayed the primary's writes up to at most ANALYTICS_REPLICA_MAX_LAG_MS before the request, else on the
// primary; a replica that is down, or cancels the read for a recovery conflict, hands it to the primary.
// docs/analytics.md, "Reads on a replica", says what a caller sees.
import { config } from '../../../shared/config'
import { analyticsReplicaSql, analyticsSql, sql, type Sql } from '../../../shared/db/client'
import { ApiError } from '../../../shared/errors'
import type postgres from 'postgres'
import { countRead } from './prometheus'
import { SQLSTATE, sqlStateOf } from '../../../shared/db/error-codes'

export type Server = 'primary' | 'replica'

/** The transaction a read runs in, on whichever server. */
type Tx = postgres.TransactionSql

/** Why a read went where it did: the `reason` label of `platform_analytics_reads_total`, a fixed set. */
export type ReadReason =
  | 'no_replica' // none configured: the primary
  | 'fresh' // the replica had replayed everything the primary had written when the request came
  | 'within_lag' // it had not, but its last replayed commit is at most the bound old
  | 'lagging' // further behind than the bound, or its lag unknown: the primary
  | 'not_standby' // the configured server is not in recovery (promoted, or not a replica): the primary
  | 'unavailable' // the replica cannot be reached, or its breaker is open: the primary
  | 'conflict' // the replica cancelled the read for a recovery conflict: the primary, once

export interface AnalyticsRead<T> {
  value: T
  /** Every write the primary acknowledged before this instant is in the answer; later ones may or may not be. */
  asOf: Date
  server: Server
  reason: ReadReason
}

export interface AnalyticsReadsOptions {
  /** The primary's analytics pool. */
  primary: Sql
  /** The replica's analytics pool; null: every read is the primary's. */
  replica: Sql | null
  /** Where the primary's WAL position is read at each request (one tiny statement: the main pool). */
  primaryWal: Sql
  /** ANALYTICS_REPLICA_MAX_LAG_MS. */
  maxLagMs: number
  /** Told of every read (metrics): where it ran, why, and the replica's lag in ms when it was measured. */
  observe?: (server: Server, reason: ReadReason, lagMs: number | null) => void
}

/**
 * SQLSTATEs of a read a hot standby cancelled because replaying the primary's WAL needed what it held (a lock, a
 * snapshot, a pinned buffer): 40001 serialization_failure, 40P01 for a deadlock with the startup process. The primary
 * has no such conflicts, so the read is run there once.
 */
const RECOVERY_CONFLICTS = new Set<string | undefined>([SQLSTATE.serializationFailure, SQLSTATE.deadlockDetected])

/**
 * The primary's WAL insert position now, as the replica must reach it to hold every write acknowledged so far. The
 * insert position, not the write or flush one: with synchronous_commit off, a commit is acknowledged before its WAL is
 * written. At the start of a WAL page (or segment) it points past the page header where the next record will start,
 * while a standby that replayed everything reports the page's start: that header is taken off, or an idle primary
 * would look forever ahead.
 */
const PRIMARY_POSITION = `
  with p as (select pg_current_wal_insert_lsn() as lsn, (pg_walfile_name_offset(pg_current_wal_insert_lsn())).file_offset as offset,
    current_setting('wal_block_size')::int as page)
  select (case when p.offset = 40 then p.lsn - 40 when p.offset % p.page = 24 then p.lsn - 24 else p.lsn end)::text as lsn from p`

/** What the replica says of itself, read in the read's own transaction, before the read (whose snapshot is later). */
const REPLICA_STATE = `
  select pg_is_in_recovery() as standby, coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false) as caught_up,
    pg_last_xact_replay_timestamp() as replayed_at,
    extract(epoch from clock_timestamp() - pg_last_xact_replay_timestamp()) * 1000 as lag_ms`

/**
 * Whether a replica read failed for a recovery conflict. `error` is what the read's transaction rejected with; `first`
 * the first error its own statements met, if any. They differ when the standby, having cancelled the read (40001),
 * ends the session before the rollback is through (PostgreSQL escalates a conflict's cancel to a termination): the
 * rollback fails, and postgres.js's `begin` rejects with that failure, CONNECTION_CLOSED (a 503 from the guarded pool),
 * the 40001 only in `first`. Such a read is still a conflict, read again on the primary. A session ended (57P01,
 * CONNECTION_CLOSED) with no conflict before it is the replica being unavailable, not a conflict.
 * @example isRecoveryConflict(connectionClosed, serializationFailure) // true
 */
export const isRecoveryConflict = (error: unknown, first?: unknown) =>
  RECOVERY_CONFLICTS.has(sqlStateOf(error)) || RECOVERY_CONFLICTS.has(sqlStateOf(first))
const isUnavailable = (error: unknown) => error instanceof ApiError && error.code === 'unavailable'

/** Answered by the replica. */
interface Answered<T> {
  value: T
  asOf: Date
  reason: 'fresh' | 'within_lag'
  lagMs: number
}

/** Declined by the replica: the read goes to the primary for this reason. */
class Declined {
  constructor(readonly reason: ReadReason, readonly lagMs: number | null) {}
}

/**
 * A function running one analytics read (`run`, given a transaction) where the policy says.
 * @example const { value: rows, asOf } = await read((tx) => tx.unsafe(text, values))
 */
export function analyticsReads(options: AnalyticsReadsOptions) {
  const { primary, replica, primaryWal, maxLagMs, observe } = options

  async function onPrimary<T>(run: (tx: Tx) => Promise<T>, reason: ReadReason, lagMs: number | null): Promise<AnalyticsRead<T>> {
    // Read committed: the read's statement takes its snapshot after this instant, so it holds every write acknowledged before.
    const asOf = new Date()
    const value = (await primary.begin((tx) => run(tx))) as T
    observe?.('primary', reason, lagMs)
    return { value, asOf, server: 'primary', reason }
  }

  /** The read on the replica, in its transaction, unless the replica's state declines it. */
  async function onReplica<T>(tx: Tx, run: (tx: Tx) => Promise<T>, lsn: string, asked: Date): Promise<Declined | Answered<T>> {
    const [state] = (await tx.unsafe(REPLICA_STATE, [lsn])) as unknown as [{ standby: boolean; caught_up: boolean; replayed_at: Date | null; lag_ms: string | null }]
    if (!state.standby) return new Declined('not_standby', null)
    if (state.caught_up) return { value: await run(tx), asOf: asked, reason: 'fresh', lagMs: 0 }
    const lagMs = state.lag_ms === null ? null : Math.max(0, Number(state.lag_ms))
    if (lagMs === null || lagMs > maxLagMs) return new Declined('lagging', lagMs)
    // Every write acknowledged before the last replayed commit's time was written to the WAL before that commit, so
    // it is replayed too; the read's own statement, later in this transaction, sees at least as much.
    const asOf = new Date(Math.min(state.replayed_at!.getTime(), asked.getTime()))
    return { value: await run(tx), asOf, reason: 'within_lag', lagMs }
  }

  return async function read<T>(run: (tx: Tx) => Promise<T>): Promise<AnalyticsRead<T>> {
    if (!replica) return onPrimary(run, 'no_replica', null)
    const asked = new Date()
    const [{ lsn }] = (await primaryWal.unsafe(PRIMARY_POSITION)) as unknown as [{ lsn: string }]
    let onStandby: Promise<Declined | Answered<T>> | undefined
    let outcome: Declined | Answered<T>
    try {
      outcome = (await replica.begin((tx) => (onStandby = onReplica(tx, run, lsn, asked)))) as Declined | Answered<T>
    } catch (error) {
      // The read's own first error, which a failed rollback replaces in begin's rejection. begin may reject (its
      // connection closed) before the read has failed: it fails at once then, every statement of the transaction refused.
      const first = await onStandby?.then(() => undefined, (readError: unknown) => readError)
      // A conflict first: the failed rollback after it may have made it a 503 (unavailable) on the way out.
      if (isRecoveryConflict(error, first)) return onPrimary(run, 'conflict', null)
      if (isUnavailable(error)) return onPrimary(run, 'unavailable', null)
      throw error
    }
    if (outcome instanceof Declined) return onPrimary(run, outcome.reason, outcome.lagMs)
    observe?.('replica', outcome.reason, outcome.lagMs)
    return { value: outcome.value, asOf: outcome.asOf, server: 'replica', reason: outcome.reason }
  }
}

/** This process's analytics reads: ANALYTICS_DATABASE_URL's replica under ANALYTICS_REPLICA_MAX_LAG_MS, else the primary. */
export const readAnalytics = analyticsReads({
  primary: analyticsSql, replica: analyticsReplicaSql, primaryWal: sql, maxLagMs: config.analytics.replicaMaxLagMs, observe: countRead,
})
