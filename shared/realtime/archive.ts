// The Realtime archive's storage (PostgreSQL, table realtime_archive, partitioned by month): writing entries, creating
// month partitions ahead of time, and expiring rows past their retention. Reads: ./archive-read.ts. Why PostgreSQL and
// how retention changes behave: docs/realtime-data-plane.md, "Archive".
import type postgres from 'postgres'
import type { Sql } from '../db/client'
import { sql as defaultSql } from '../db/client'
import { namespaceOf } from './names'
import { isPgError } from '../db/error-codes'

/** One stored publication as the archive keeps it. */
export interface ArchiveEntry {
  productId: string
  channel: string
  epoch: string
  offset: number
  /** The message id. */
  id: string
  /** Publish time, ms (the Redis clock, as history reports it). */
  publishedAt: number
  /** Serialized JSON as published; exactly one of `data` and `ref`. */
  data?: string
  /** The payload ref as JSON text. */
  ref?: string
  /** The namespace's archive retention when written (1..3650). */
  retentionDays: number
}

/** Month partitions this process knows exist (by name); a miss is checked, and created, once. */
const knownPartitions = new Set<string>()
/**
 * `<productId> <namespace>` pairs this process recorded in realtime_archive_namespaces, and when. Recorded again after
 * NAMESPACE_RECORD_MS: the sweeper deletes the row of a namespace that stopped archiving and has no rows left, and a
 * process whose cached policy still archives it puts the row back within that time.
 */
const knownNamespaces = new Map<string, number>()
const NAMESPACE_RECORD_MS = 60_000
/** The longest retention this process recorded per month partition in realtime_archive_partitions. */
const knownPartitionRetention = new Map<string, number>()
/**
 * How long partition DDL (create, drop) waits for its ACCESS EXCLUSIVE lock on the archive. Short: while it waits,
 * every read and write of the archive queues behind it. When it times out the DDL is tried again at the next sweep,
 * or for an insert that needed the month, at the batch's next try (the batch stays pending meanwhile).
 */
export const PARTITION_DDL_LOCK_TIMEOUT = '500ms'

/**
 * Writes entries, once each: an entry already archived (a redelivery) is skipped. Returns how many rows were new. The
 * month partitions the entries need are created first when missing, so an insert never fails for want of one.
 * @example await archiveEntries([{ productId, channel: 'chat:1', epoch, offset: 7, id, publishedAt: Date.now(), data: '{}', retentionDays: 30 }])
 */
export async function archiveEntries(entries: ArchiveEntry[], sql: Sql = defaultSql, retried = false): Promise<number> {
  if (entries.length === 0) return 0
  for (const at of new Set(entries.map((e) => monthPartition(new Date(e.publishedAt)).from.getTime()))) {
    const { name } = monthPartition(new Date(at))
    if (knownPartitions.has(name)) continue
    await ensureMonthPartition(new Date(at), sql)
    knownPartitions.add(name)
  }
  await recordPartitionRetention(entries, sql)
  const now = Date.now()
  const pairs = [...new Set(entries.map((e) => `${e.productId} ${namespaceOf(e.channel)}`))]
    .filter((pair) => now - (knownNamespaces.get(pair) ?? -Infinity) > NAMESPACE_RECORD_MS)
  if (pairs.length) {
    // Recorded before the rows, so no row is ever there without its namespace being known to the sweeper.
    await sql`
      insert into realtime_archive_namespaces (product_id, namespace)
      select * from unnest(${pairs.map((p) => p.split(' ')[0]!)}::uuid[], ${pairs.map((p) => p.split(' ')[1]!)}::text[])
      on conflict do nothing`
    for (const pair of pairs) knownNamespaces.set(pair, now)
  }
  try {
    return await insertEntries(entries, sql)
  } catch (error) {
    // A month dropped by a sweeper (perhaps another process's) after this one learned of it: learn again, once.
    if (!isPgError(error, 'checkViolation') || retried) throw error
    knownPartitions.clear()
    knownPartitionRetention.clear()
    return archiveEntries(entries, sql, true)
  }
}

/**
 * Raises the recorded longest retention of each month the entries go to, before their rows are written: the sweeper
 * never sees a month's record below a retention one of its rows was written with.
 */
async function recordPartitionRetention(entries: ArchiveEntry[], sql: Sql): Promise<void> {
  const longest = new Map<string, number>()
  for (const e of entries) {
    const { name } = monthPartition(new Date(e.publishedAt))
    longest.set(name, Math.max(longest.get(name) ?? 0, e.retentionDays))
  }
  const raise = [...longest].filter(([name, days]) => days > (knownPartitionRetention.get(name) ?? 0))
  if (raise.length === 0) return
  await sql`
    insert into realtime_archive_partitions (name, retention_days)
    select * from unnest(${raise.map(([name]) => name)}::text[], ${raise.map(([, days]) => days)}::smallint[])
    on conflict (name) do update set retention_days = excluded.retention_days
    where realtime_archive_partitions.retention_days < excluded.retention_days`
  for (const [name, days] of raise) knownPartitionRetention.set(name, days)
}

async function insertEntries(entries: ArchiveEntry[], sql: Sql): Promise<number> {
  // Arrays, one per column, through unnest: one statement of 9 parameters whatever the batch size.
  const result = await sql`
    insert into realtime_archive (product_id, channel, epoch, "offset", id, published_at, data, ref, retention_days)
    select product_id, channel, epoch, "offset", id, published_at, data, ref::jsonb, retention_days from unnest(
      ${entries.map((e) => e.productId)}::uuid[], ${entries.map((e) => e.channel)}::text[],
      ${entries.map((e) => e.epoch)}::text[], ${entries.map((e) => e.offset)}::bigint[], ${entries.map((e) => e.id)}::text[],
      ${entries.map((e) => new Date(e.publishedAt).toISOString())}::timestamptz[], ${entries.map((e) => e.data ?? null)}::text[],
      ${entries.map((e) => e.ref ?? null)}::text[], ${entries.map((e) => e.retentionDays)}::smallint[]
    ) as batch (product_id, channel, epoch, "offset", id, published_at, data, ref, retention_days)
    on conflict do nothing`
  return result.count
}

/** The month partition's table name and bounds for the month holding `at` (UTC). */
export function monthPartition(at: Date): { name: string; from: Date; to: Date } {
  const from = new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1))
  const to = new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1))
  const name = `realtime_archive_y${from.getUTCFullYear()}m${String(from.getUTCMonth() + 1).padStart(2, '0')}`
  return { name, from, to }
}

const PARTITION_NAME = /^realtime_archive_y(\d{4})m(\d{2})$/

/** Creates the month partition holding `at` unless it exists; true when it made it. */
export async function ensureMonthPartition(at: Date, sql: Sql = defaultSql): Promise<boolean> {
  const { name, from, to } = monthPartition(at)
  return await sql.begin(async (tx) => {
    // One creator at a time (several archivers): the lock is held to the end of the transaction.
    await tx`select pg_advisory_xact_lock(hashtext('realtime_archive partitions'))`
    const [exists] = await tx`select 1 from pg_class where relname = ${name} and relkind = 'r'`
    if (exists) return false
    await tx.unsafe(`set local lock_timeout = '${PARTITION_DDL_LOCK_TIMEOUT}'`)
    // DDL takes no bind parameters: the name matches PARTITION_NAME and the bounds are ISO texts made here.
    await tx.unsafe(`create table "${name}" partition of realtime_archive for values from ('${from.toISOString()}') to ('${to.toISOString()}')`)
    return true
  }) as boolean
}

/** The current month and `ahead` more: what the archiver keeps ready, so its inserts seldom create one on demand. */
export async function ensurePartitionsAhead(now = new Date(), ahead = 2, sql: Sql = defaultSql): Promise<string[]> {
  const made: string[] = []
  for (let i = 0; i <= ahead; i++) {
    const at = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + i, 1))
    if (await ensureMonthPartition(at, sql)) made.push(monthPartition(at).name)
  }
  return made
}

export interface SweepResult {
  /** Rows deleted past their retention, or of a deleted namespace. */
  deleted: number
  /** Month partitions dropped whole. */
  dropped: string[]
  /** Month partitions due to be dropped whose lock was not had within PARTITION_DDL_LOCK_TIMEOUT: tried at the next sweep. */
  postponed: string[]
}

/**
 * Marks the archive of a deleted namespace for deletion, in the transaction that deletes the namespace: its rows are
 * never answered again (a namespace created again under that name starts empty) and the sweeper deletes them.
 */
export async function markNamespaceDeleted(productId: string, namespace: string, sql: Sql | postgres.TransactionSql = defaultSql): Promise<void> {
  await sql`
    update realtime_archive_namespaces set purge_before = greatest(coalesce(purge_before, now()), now())
    where product_id = ${productId} and namespace = ${namespace}`
}

/** How long a deleted namespace's mark is kept after its rows are gone: past any entry the archiver could still read late. */
const PURGE_MARK_KEEP_MS = 86_400_000

/**
 * Deletes rows past their retention, `batch` rows per statement (short transactions, no long locks), and drops month
 * partitions that end before every retention that could still keep one of their rows. A row's retention is its
 * namespace's current `archive_days` when the namespace archives (lowering it takes effect here, raising it keeps rows
 * longer), else the retention it was written with (archive removed: kept rows expire as they would have). The rows of
 * a deleted namespace (published before its `purge_before`) are deleted whatever their age. ./archive-read.ts answers
 * by the same rules, so a row past them is never served between sweeps.
 */
export async function sweepArchive(options: { batch?: number; now?: Date } = {}, sql: Sql = defaultSql): Promise<SweepResult> {
  const batch = options.batch ?? 5000
  const now = options.now ?? new Date()
  const result: SweepResult = { deleted: 0, dropped: [], postponed: [] }
  Object.assign(result, await dropExpiredPartitions(now, sql))
  /** Deletes, `batch` at a time, the namespace's rows matching `condition`. */
  const deleteAll = async (productId: string, namespace: string, condition: ReturnType<Sql>) => {
    for (;;) {
      const deleted = await sql`
        delete from realtime_archive where (product_id, channel, epoch, "offset", published_at) in (
          select product_id, channel, epoch, "offset", published_at from realtime_archive
          where product_id = ${productId} and channel >= ${namespace + ':'} and channel < ${namespace + ';'} and ${condition}
          limit ${batch})`
      result.deleted += deleted.count
      if (deleted.count < batch) return
    }
  }
  // Deleted namespaces first: every row published before the deletion, whatever its retention.
  const purged = await sql<{ product_id: string; namespace: string; purge_before: Date }[]>`
    select product_id, namespace, purge_before from realtime_archive_namespaces where purge_before is not null`
  for (const ns of purged) {
    await deleteAll(ns.product_id, ns.namespace, sql`published_at < ${ns.purge_before}`)
    if (now.getTime() - ns.purge_before.getTime() > PURGE_MARK_KEEP_MS) {
      await sql`
        update realtime_archive_namespaces set purge_before = null
        where product_id = ${ns.product_id} and namespace = ${ns.namespace} and purge_before = ${ns.purge_before}`
    }
  }
  // Namespaces that archive: their channels are one index range each, and `published_at < before` leaves out (prunes)
  // every month partition newer than the cutoff, so a sweep reads only the months that can hold expired rows.
  const namespaces = await sql<{ product_id: string; name: string; archive_days: number }[]>`
    select product_id, name, archive_days from realtime_namespaces where archive_days > 0`
  for (const ns of namespaces) {
    await deleteAll(ns.product_id, ns.name, sql`published_at < ${new Date(now.getTime() - ns.archive_days * 86_400_000)}`)
  }
  // Namespaces that no longer archive (removed or deleted): their rows by their own retention, never less than a day.
  const idle = await sql<{ product_id: string; namespace: string }[]>`
    select t.product_id, t.namespace from realtime_archive_namespaces t
    where not exists (select 1 from realtime_namespaces n where n.product_id = t.product_id and n.name = t.namespace and n.archive_days > 0)`
  for (const ns of idle) {
    await deleteAll(ns.product_id, ns.namespace, sql`published_at < ${new Date(now.getTime() - 86_400_000)}
      and published_at < ${now}::timestamptz - make_interval(days => retention_days)`)
    // Nothing left of a namespace that does not archive (and no deletion mark to keep): its tracking row goes too. A
    // writer whose cached policy still archives it records it again before long (NAMESPACE_RECORD_MS).
    await sql`
      delete from realtime_archive_namespaces t
      where t.product_id = ${ns.product_id} and t.namespace = ${ns.namespace} and t.purge_before is null
        and not exists (select 1 from realtime_namespaces n where n.product_id = t.product_id and n.name = t.namespace and n.archive_days > 0)
        and not exists (select 1 from realtime_archive a
          where a.product_id = t.product_id and a.channel >= ${ns.namespace + ':'} and a.channel < ${ns.namespace + ';'})`
  }
  return result
}

/**
 * Drops each month partition that ended before `now` minus the longest retention that could still keep one of its
 * rows: the longest `archive_days` of any namespace, and the longest retention its own rows were written with (from
 * realtime_archive_partitions; a partition older than that table is scanned once and recorded). Each DROP waits at
 * most PARTITION_DDL_LOCK_TIMEOUT for its lock; one that does not get it is postponed to the next sweep.
 */
async function dropExpiredPartitions(now: Date, sql: Sql): Promise<Pick<SweepResult, 'dropped' | 'postponed'>> {
  const [longest] = await sql<{ days: number }[]>`select coalesce(max(archive_days), 0)::int as days from realtime_namespaces`
  const partitions = await sql<{ name: string; days: number | null }[]>`
    select c.relname as name, p.retention_days as days from pg_inherits i join pg_class c on c.oid = i.inhrelid
      left join realtime_archive_partitions p on p.name = c.relname::text
    where i.inhparent = 'realtime_archive'::regclass`
  const dropped: string[] = []
  const postponed: string[] = []
  for (const { name, days } of partitions) {
    const match = PARTITION_NAME.exec(name)
    if (!match) continue
    const end = new Date(Date.UTC(Number(match[1]), Number(match[2]), 1))
    if (end.getTime() > now.getTime() - longest!.days * 86_400_000) continue
    let own = days
    if (own === null) {
      // Made before the record existed: scanned this once.
      const [scanned] = await sql<{ days: number }[]>`select coalesce(max(retention_days), 0)::int as days from ${sql(name)}`
      own = scanned!.days
      await sql`
        insert into realtime_archive_partitions (name, retention_days) values (${name}, ${own})
        on conflict (name) do update set retention_days = greatest(realtime_archive_partitions.retention_days, excluded.retention_days)`
    }
    if (end.getTime() > now.getTime() - own * 86_400_000) continue
    try {
      await sql.begin(async (tx) => {
        await tx.unsafe(`set local lock_timeout = '${PARTITION_DDL_LOCK_TIMEOUT}'`)
        await tx`drop table if exists ${tx(name)}` // another archiver may have swept it meanwhile
        await tx`delete from realtime_archive_partitions where name = ${name}`
      })
    } catch (error) {
      if (!isPgError(error, 'lockNotAvailable')) throw error
      postponed.push(name) // lock_not_available: readers or writers held the archive; next sweep
      continue
    }
    knownPartitions.delete(name)
    knownPartitionRetention.delete(name)
    dropped.push(name)
  }
  return { dropped, postponed }
}
