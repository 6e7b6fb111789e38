// Monthly partitions of tracked events (migration 0015; docs/analytics.md, "Partitions"): months kept ready ahead,
// months the default partition collects rows of given their own, retention by dropping whole months, and an upgraded
// deployment's legacy rows moved into their months in small transactions.
import type postgres from 'postgres'
import type { Sql } from '../db/client'
import { isPgError } from '../db/error-codes'

export interface PartitionPolicy {
  /** Months kept ready after the current one. */
  ahead: number
  /** Whole months kept before the current one; 0 keeps every event. */
  retentionMonths: number
  /** Legacy rows moved per transaction. */
  moveBatch: number
  /** Longest a partition change waits for its lock (it would hold captures back while queued). */
  lockTimeoutMs: number
}

/**
 * Months further back than this keep their events in the default partition: a backdated event must not make a
 * partition per month of the years 0001-9999 (each costs every query's planning a little).
 */
export const MONTHS_BACK_WITH_PARTITIONS = 36

const PARTITION_NAME = /^tracked_events_p(\d{4})(\d{2})$/

const monthStart = (at: Date, plus = 0) => new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + plus, 1))
const dateOf = (at: Date) => at.toISOString().slice(0, 10)

async function withLockTimeout<T>(sql: Sql, ms: number, run: (tx: postgres.TransactionSql) => Promise<T>): Promise<T> {
  return sql.begin(async (tx) => {
    await tx.unsafe(`set local lock_timeout = ${Math.max(1, Math.floor(ms))}`)
    return run(tx)
  }) as Promise<T>
}

/** The month partitions that exist, by their first day (YYYY-MM-01). */
export async function monthPartitions(sql: Sql | postgres.TransactionSql): Promise<string[]> {
  const rows = await sql`select c.relname as name from pg_inherits i join pg_class c on c.oid = i.inhrelid
    where i.inhparent = 'tracked_events'::regclass`
  return rows.flatMap((r) => {
    const m = PARTITION_NAME.exec(r.name as string)
    return m ? [`${m[1]}-${m[2]}-01`] : []
  }).sort()
}

async function createMonth(sql: Sql, month: string, lockTimeoutMs: number): Promise<boolean> {
  const [row] = await withLockTimeout(sql, lockTimeoutMs, (tx) => tx`select tracked_events_create_month(${month}::date) as made`)
  return row!.made as boolean
}

/** The current month, the one before, and `ahead` after it: made when missing. Answers the months made. */
export async function ensureMonthsAround(sql: Sql, now: Date, policy: PartitionPolicy): Promise<string[]> {
  const made: string[] = []
  for (let m = -1; m <= policy.ahead; m++) {
    const month = dateOf(monthStart(now, m))
    if (await createMonth(sql, month, policy.lockTimeoutMs)) made.push(month)
  }
  return made
}

/**
 * Months the default partition holds events of, within MONTHS_BACK_WITH_PARTITIONS (and retention) back and `ahead`
 * forward, get a partition of their own, their rows moved into it. At most `max` per call.
 */
export async function giveDefaultRowsTheirMonths(sql: Sql, now: Date, policy: PartitionPolicy, max = 6): Promise<string[]> {
  const back = policy.retentionMonths ? Math.min(policy.retentionMonths, MONTHS_BACK_WITH_PARTITIONS) : MONTHS_BACK_WITH_PARTITIONS
  const rows = await sql`select distinct date_trunc('month', ts, 'UTC') as month from tracked_events_default
    where ts >= ${monthStart(now, -back)} and ts < ${monthStart(now, policy.ahead + 1)} order by 1 limit ${max}`
  const made: string[] = []
  for (const { month } of rows) {
    const day = dateOf(month as Date)
    if (await createMonth(sql, day, policy.lockTimeoutMs)) made.push(day)
  }
  return made
}

/**
 * Retention: months that ended before the kept ones are dropped whole, and the default partition's and the rollups'
 * rows older than that deleted. Answers the months dropped.
 */
export async function dropExpiredMonths(sql: Sql, now: Date, policy: PartitionPolicy): Promise<string[]> {
  if (!policy.retentionMonths) return []
  const keepFrom = monthStart(now, -policy.retentionMonths)
  const dropped: string[] = []
  for (const month of await monthPartitions(sql)) {
    if (new Date(`${month}T00:00:00Z`).getTime() >= keepFrom.getTime()) continue
    const name = `tracked_events_p${month.slice(0, 4)}${month.slice(5, 7)}`
    // The month's rollup rows go with its events, so no query ever counts one without the other.
    // Rollup rows first (by their hour index), then the drop, whose lock on tracked_events is held to the commit only.
    await withLockTimeout(sql, policy.lockTimeoutMs, async (tx) => {
      await tx`delete from analytics_event_rollups where hour >= ${month}::date::timestamp at time zone 'UTC'
        and hour < (${month}::date + interval '1 month')::timestamp at time zone 'UTC'`
      await tx`delete from analytics_event_slots where slot >= ${month}::date::timestamp at time zone 'UTC'
        and slot < (${month}::date + interval '1 month')::timestamp at time zone 'UTC'`
      await tx`delete from analytics_event_day_parts where part >= ${month}::date::timestamp at time zone 'UTC'
        and part < (${month}::date + interval '1 month')::timestamp at time zone 'UTC'`
      await tx.unsafe(`drop table if exists ${name}`)
    })
    dropped.push(month)
  }
  await sql`delete from tracked_events_default where ctid = any(array(
    select ctid from tracked_events_default where ts < ${keepFrom} limit ${policy.moveBatch}))`
  await sql`delete from analytics_event_rollups where hour < ${keepFrom}`
  await sql`delete from analytics_event_slots where slot < ${keepFrom}`
  await sql`delete from analytics_event_day_parts where part < ${keepFrom}`
  return dropped
}

/**
 * An upgraded deployment's events (tracked_events_legacy), moved into the partitions a batch per transaction: at every
 * instant each event is in exactly one of the two, and tracked_events_all reads both. When none is left, the view
 * reads the partitions alone and the legacy table goes. Answers the events moved (0 when there is no legacy table).
 */
export async function moveLegacyEvents(sql: Sql, now: Date, policy: PartitionPolicy): Promise<number> {
  try {
    return await moveLegacyBatch(sql, now, policy)
  } catch (error) {
    // undefined_table: another aggregator moved the last batch and dropped the table meanwhile.
    if (isPgError(error, 'undefinedTable')) return 0
    throw error
  }
}

/** The advisory lock (transaction-scoped) a legacy batch is moved under: one mover at a time. */
export const LEGACY_MOVER_LOCK = 727005
/** The advisory lock tracked_events_create_month (migration 0015) makes a month under: one maker at a time. */
export const MONTH_MAKER_LOCK = 727002

/** The months of the next legacy batch that get a partition (within MONTHS_BACK_WITH_PARTITIONS and the months ahead). */
async function batchMonths(sql: Sql | postgres.TransactionSql, now: Date, policy: PartitionPolicy): Promise<string[]> {
  const rows = await sql`select distinct date_trunc('month', ts, 'UTC') as month from (
      select ts from tracked_events_legacy order by id limit ${policy.moveBatch}) batch
    where ts >= ${monthStart(now, -MONTHS_BACK_WITH_PARTITIONS)} and ts < ${monthStart(now, policy.ahead + 1)}`
  return rows.map(({ month }) => dateOf(month as Date))
}

async function moveLegacyBatch(sql: Sql, now: Date, policy: PartitionPolicy): Promise<number> {
  const [legacy] = await sql`select to_regclass('tracked_events_legacy') is not null as present`
  if (!legacy!.present) return 0
  // Months are made outside the move: making one locks tracked_events whole, which the move must not hold.
  for (const month of await batchMonths(sql, now, policy)) await createMonth(sql, month, policy.lockTimeoutMs)
  return withLockTimeout(sql, policy.lockTimeoutMs, async (tx) => {
    // One mover at a time: a second aggregator's batch, waiting on this one's rows, would find them gone and take an
    // empty batch for an empty table.
    const [mover] = await tx`select pg_try_advisory_xact_lock(${LEGACY_MOVER_LOCK}) as mine`
    if (!mover!.mine) return 0
    // The batch is read again under the lock: another mover may have moved the one whose months were made above,
    // and this one's months may not exist. Its rows would land in the default partition, so it waits for the next
    // round, which makes them first (the other mover moved a batch meanwhile, so the upgrade still advances).
    // tracked_events held (row exclusive, as the insert takes it) keeps any month from being made or dropped between
    // this check and the insert.
    await tx`lock table tracked_events in row exclusive mode`
    const made = new Set(await monthPartitions(tx))
    if ((await batchMonths(tx, now, policy)).some((month) => !made.has(month))) return 0
    const moved = await tx`with batch as (
        delete from tracked_events_legacy where id in (select id from tracked_events_legacy order by id limit ${policy.moveBatch})
        returning id, product_id, event, ts, anonymous_id, users_id, email, phone, properties, received_at)
      insert into tracked_events (id, product_id, event, ts, anonymous_id, users_id, email, phone, properties, received_at)
      overriding system value select * from batch`
    // Empty, asked under a lock no writer gets past (nothing writes to it but this move, yet a statement may).
    if (moved.count === 0) {
      await tx`lock table tracked_events_legacy in access exclusive mode`
      const [left] = await tx`select exists (select 1 from tracked_events_legacy) as any`
      if (left!.any) return 0
      await tx`create or replace view tracked_events_all as
        select id, product_id, event, ts, anonymous_id, users_id, email, phone, properties, received_at from tracked_events`
      await tx`drop table tracked_events_legacy`
    }
    return moved.count
  })
}

/** One round of partition upkeep; answers what it did. */
export async function partitionStep(sql: Sql, now: Date, policy: PartitionPolicy): Promise<{ made: string[]; dropped: string[]; moved: number }> {
  const made = [...await ensureMonthsAround(sql, now, policy), ...await giveDefaultRowsTheirMonths(sql, now, policy)]
  const dropped = await dropExpiredMonths(sql, now, policy)
  const moved = await moveLegacyEvents(sql, now, policy)
  return { made, dropped, moved }
}
