// Rollups of tracked events, maintained incrementally (migration 0016; docs/analytics.md, "Rollups"). Each step counts
// the events captured past the watermark into per-hour rows and moves the watermark, in one transaction: a step that
// fails or is repeated counts nothing twice. The planner reads rollup rows up to the watermark and raw events past it.
import type postgres from 'postgres'
import type { Sql } from '../db/client'

/** A pool or a transaction of one. */
type Db = Sql | postgres.TransactionSql
import { BASE_SET, binSql, DAY_PART_HOURS, EVENTS_SOURCE, identitySketch, MAX_SET_KEYS, SLOT_MINUTES } from './events'

export interface RollupLimits {
  /** Most event ids one step covers. */
  chunkIds: number
  /** Longest a step waits for the captures in flight when it starts (they are never held back). */
  lockTimeoutMs: number
  /** Most value combinations of a property set in one hour. */
  maxValues: number
  /** Most property sets per product. */
  maxSets: number
}

/**
 * The highest event id below which every capture has committed or rolled back, or null when captures in flight held
 * out past `waitMs`. Ids are handed out before a capture commits, so the sequence alone is not enough. Every insert
 * holds its lock on tracked_events from before it takes its first id to its transaction's end, so: read the last id,
 * then wait for the transactions holding that lock at that moment to end (as CREATE INDEX CONCURRENTLY waits for
 * writers). New captures never wait for this; Citus' incremental rollups take an exclusive lock instead, which would
 * hold every capture back while a long insert runs.
 */
export async function settledHead(sql: Sql, waitMs: number): Promise<number | null> {
  const [row] = await sql.unsafe(`select case when is_called then last_value else last_value - 1 end as head from ${await identitySequence(sql)}`)
  const head = Number(row!.head)
  const writers = (await sql`select distinct virtualtransaction as vxid from pg_locks
    where locktype = 'relation' and relation = 'tracked_events'::regclass and mode = 'RowExclusiveLock' and granted
      and pid <> pg_backend_pid()`).map((r) => r.vxid as string)
  const deadline = Date.now() + waitMs
  while (writers.length) {
    const [open] = await sql`select count(*)::int as n from pg_locks where locktype = 'virtualxid' and virtualxid = any(${writers}::text[])`
    if (open!.n === 0) break
    if (Date.now() > deadline) return null
    await Bun.sleep(5)
  }
  return head
}

let sequenceName: string | undefined
async function identitySequence(tx: Db): Promise<string> {
  sequenceName ??= (await tx`select pg_get_serial_sequence('tracked_events', 'id') as name`)[0]!.name as string
  return sequenceName
}

/** A set's hour that a step counted events into. Hours as text: an event may be dated in 1 BC, which no Date holds. */
interface Touched { productId: string; setId: number; hour: string }

/**
 * Each group twice: per event, and over all events (event null, migration 0019). A query that names no event reads the
 * second, one sketch per hour instead of one per event and hour.
 */
const EVENT_AND_ALL = `grouping sets ((e.event), ())`

/** An event's slot (migration 0020): slots lie within hours, so an hour is its slots merged. */
const SLOT = binSql(`${SLOT_MINUTES} minutes`, 'e.ts')

/** The six-hour part of the UTC day (migration 0021) holding an instant. */
const DAY_PART = (instant: string) => binSql(`${DAY_PART_HOURS} hours`, instant)

const upsert = (key: string) => `on conflict on constraint ${key} do update
  set events = r.events + excluded.events, identities = hll_union(r.identities, excluded.identities)`

/**
 * Adds counted rows (a query giving product_id, set_id, slot, event, v1, v2, v3, events, identities) to the slots and,
 * merged per hour and per part of the day, to the hours and the day parts (unless `slotsOnly`), in one statement: the
 * events are read once. Answers the hours.
 */
async function addCounts(tx: Db, counted: string, params: unknown[], slotsOnly = false): Promise<Touched[]> {
  const hours = `insert into analytics_event_rollups as r (product_id, set_id, hour, event, v1, v2, v3, events, identities)
      select product_id, set_id, date_trunc('hour', slot, 'UTC'), event, v1, v2, v3, sum(events), hll_union_agg(identities)
      from counted group by product_id, set_id, date_trunc('hour', slot, 'UTC'), event, v1, v2, v3
      ${upsert('analytics_event_rollups_key')}
      returning product_id, set_id, hour`
  const parts = `insert into analytics_event_day_parts as r (product_id, set_id, part, event, v1, v2, v3, events, identities)
      select product_id, set_id, ${DAY_PART('slot')}, event, v1, v2, v3, sum(events), hll_union_agg(identities)
      from counted group by product_id, set_id, ${DAY_PART('slot')}, event, v1, v2, v3
      ${upsert('analytics_event_day_parts_key')}`
  const touched = await tx.unsafe(`with counted as materialized (${counted}),
    slots as (insert into analytics_event_slots as r (product_id, set_id, slot, event, v1, v2, v3, events, identities)
      select product_id, set_id, slot, event, v1, v2, v3, events, identities from counted
      ${upsert('analytics_event_slots_key')}),
    ${slotsOnly ? '' : `parts as (${parts}),`}
    hours as (${slotsOnly ? 'select null::uuid as product_id, null::bigint as set_id, null::timestamptz as hour where false' : hours})
    select distinct product_id, set_id, hour::text as hour from hours`, params as never[])
  return touched.map((t) => ({ productId: t.product_id as string, setId: Number(t.set_id), hour: t.hour as string }))
}

/** The base set's counted rows of the events with ids in ($1, $2]. */
const baseCounts = `select e.product_id, ${BASE_SET}::bigint as set_id, ${SLOT} as slot, e.event,
    null::text as v1, null::text as v2, null::text as v3, count(*) as events, ${identitySketch('e')} as identities
  from ${EVENTS_SOURCE} e where e.id > $1 and e.id <= $2
  group by e.product_id, ${SLOT}, ${EVENT_AND_ALL}`

/** The property sets' rows of the events `rows` (a FROM item aliased `e`) for the sets `sets` (a condition on `s`). */
function countSets(tx: Db, rows: string, sets: string, params: unknown[]): Promise<Touched[]> {
  const values = Array.from({ length: MAX_SET_KEYS }, (_, i) => `e.properties ->> s.keys[${i + 1}]`)
  return addCounts(tx, `select e.product_id, s.id as set_id, ${SLOT} as slot, e.event,
      ${values.map((v, i) => `${v} as v${i + 1}`).join(', ')}, count(*) as events, ${identitySketch('e')} as identities
    from ${rows} join analytics_rollup_sets s on s.product_id = e.product_id and ${sets}
    group by e.product_id, s.id, ${SLOT}, ${values.join(', ')}, ${EVENT_AND_ALL}`, params)
}

/** The rollup rows of the events with ids in (lo, hi]: the base set's, and every live set's. */
async function countRange(tx: Db, lo: number, hi: number): Promise<Touched[]> {
  await addCounts(tx, baseCounts, [lo, hi])
  return countSets(tx, `${EVENTS_SOURCE} e`, `e.id > $1 and e.id <= $2 and s.state in ('building', 'ready') and e.id > s.covers_from`, [lo, hi])
}

/**
 * Sets with an hour of more than `maxValues` value combinations among those just counted stop: their rows go and
 * queries read raw events for them (a key like a URL or a user id would otherwise grow a row per event).
 */
async function stopOverfullSets(tx: Db, touched: Touched[], maxValues: number): Promise<number[]> {
  if (!touched.length) return []
  // Value combinations, whatever the event: many event names are no reason to drop a set.
  const full = await tx`
    select distinct r.set_id from analytics_event_rollups r
    join unnest(${touched.map((t) => t.productId)}::uuid[], ${touched.map((t) => t.setId)}::bigint[],
      ${touched.map((t) => t.hour)}::text[]::timestamptz[]) as t(product_id, set_id, hour)
      on r.product_id = t.product_id and r.set_id = t.set_id and r.hour = t.hour
    group by r.set_id, r.hour having count(distinct (r.v1, r.v2, r.v3)) > ${maxValues}`
  const ids = full.map((r) => Number(r.set_id))
  if (ids.length) {
    await tx`update analytics_rollup_sets set state = 'too_many_values' where id = any(${ids}::bigint[])`
    const products = [...new Set(touched.filter((t) => ids.includes(t.setId)).map((t) => t.productId))]
    await tx`delete from analytics_event_rollups where product_id = any(${products}::uuid[]) and set_id = any(${ids}::bigint[])`
    await tx`delete from analytics_event_slots where product_id = any(${products}::uuid[]) and set_id = any(${ids}::bigint[])`
    await tx`delete from analytics_event_day_parts where product_id = any(${products}::uuid[]) and set_id = any(${ids}::bigint[])`
  }
  return ids
}

export interface StepResult {
  /** Events ids the watermark moved over (0: nothing new, or captures in flight held out). */
  advanced: number
  watermark: number
  /** Property sets whose backfill moved, and those that became ready. */
  backfilled: number
  ready: number
  /** Event ids the base set's slot backfill moved over (an upgrade's events, migration 0020). */
  slotsBackfilled: number
}

/** Moves the watermark over at most `chunkIds` captured ids, counting them in every live set. */
export async function advanceWatermark(sql: Sql, limits: RollupLimits): Promise<{ advanced: number; watermark: number }> {
  const head = await settledHead(sql, limits.lockTimeoutMs)
  return sql.begin(async (tx) => {
    const [state] = await tx`select watermark from analytics_rollup_state for update`
    const watermark = Number(state!.watermark)
    if (head === null || head <= watermark) return { advanced: 0, watermark }
    const hi = Math.min(head, watermark + limits.chunkIds)
    const touched = await countRange(tx, watermark, hi)
    await stopOverfullSets(tx, touched, limits.maxValues)
    await tx`update analytics_rollup_state set watermark = ${hi}, advanced_at = now()`
    return { advanced: hi - watermark, watermark: hi }
  })
}

/**
 * One backfill chunk for each building set (every product's sets move in the same round, so one product's long
 * history delays no other's): the product's next `chunkIds` events at or below the ids it covers from, in time order
 * (the (product_id, ts) index: a small product's set costs its own events, not the table's). A set whose backfill is
 * done becomes ready.
 */
export async function backfillSets(sql: Sql, limits: RollupLimits): Promise<{ backfilled: number; ready: number }> {
  const building = await sql`select id from analytics_rollup_sets where state = 'building' order by id`
  let backfilled = 0
  let ready = 0
  for (const { id } of building) {
    await sql.begin(async (tx) => {
      const [set] = await tx`select id, product_id, covers_from, backfilled_until::text as since from analytics_rollup_sets
        where id = ${id} and state = 'building' for update skip locked`
      if (!set) return
      // Where this chunk ends: the time of the chunk's last event (all events of that very time are in the chunk,
      // so the next one starts strictly after it), or the end of time when fewer are left.
      // Times as text, and sent as text: '-infinity', 'infinity' and years BC have no Date.
      const [last] = await tx`select ts::text as ts from ${tx(EVENTS_SOURCE)} where product_id = ${set.product_id} and id <= ${set.covers_from}
        and ts > ${set.since}::text::timestamptz order by ts offset ${limits.chunkIds - 1} limit 1`
      const until = last ? (last.ts as string) : 'infinity'
      const touched = await countSets(tx, `${EVENTS_SOURCE} e`,
        `s.id = $1 and e.product_id = $2 and e.id <= $3 and e.ts > $4::text::timestamptz and e.ts <= $5::text::timestamptz`,
        [set.id, set.product_id, set.covers_from, set.since, until])
      if ((await stopOverfullSets(tx, touched, limits.maxValues)).length) return
      const done = !last
      await tx`update analytics_rollup_sets set backfilled_until = ${until}::text::timestamptz, state = ${done ? 'ready' : 'building'} where id = ${set.id}`
      backfilled++
      if (done) ready++
    })
  }
  return { backfilled, ready }
}

/**
 * One chunk of the base set's slot backfill: events counted into hours before slots existed (ids at or below
 * slots_from, migration 0020), in id order. Queries read the base set's slots once it reaches slots_from.
 */
export async function backfillSlots(sql: Sql, limits: RollupLimits): Promise<number> {
  return sql.begin(async (tx) => {
    const [state] = await tx`select slots_from, slots_backfilled from analytics_rollup_state for update`
    const [from, done] = [Number(state!.slots_from), Number(state!.slots_backfilled)]
    if (done >= from) return 0
    const hi = Math.min(from, done + limits.chunkIds)
    await addCounts(tx, baseCounts, [done, hi], true)
    await tx`update analytics_rollup_state set slots_backfilled = ${hi}`
    return hi - done
  })
}

/** One round: the watermark forward, then a backfill chunk of each building set and of the base set's slots. */
export async function rollupStep(sql: Sql, limits: RollupLimits): Promise<StepResult> {
  const { advanced, watermark } = await advanceWatermark(sql, limits)
  const { backfilled, ready } = await backfillSets(sql, limits)
  const slotsBackfilled = await backfillSlots(sql, limits)
  return { advanced, watermark, backfilled, ready, slotsBackfilled }
}

/** Runs rounds until the watermark reaches every settled capture and no set is building (tests and the benchmark). */
export async function rollupUntilCurrent(sql: Sql, limits: RollupLimits): Promise<void> {
  for (;;) {
    const step = await rollupStep(sql, limits)
    if (step.advanced === 0 && step.backfilled === 0 && step.slotsBackfilled === 0) {
      const head = await settledHead(sql, limits.lockTimeoutMs)
      if (head !== null && head <= step.watermark) return
    }
  }
}

/** Property keys as a set keeps them: distinct, sorted. */
export const setKeys = (keys: readonly string[]): string[] => [...new Set(keys)].sort()

/**
 * Makes a property set for these keys unless one of the product's sets already holds them all, or the product has
 * `maxSets` already (its queries then read raw events). It covers events past the watermark from now on; a backfill
 * counts the ones before. Answers whether a set was made.
 */
export async function registerRollupSet(sql: Sql, productId: string, keys: readonly string[], maxSets: number): Promise<boolean> {
  const wanted = setKeys(keys)
  if (wanted.length === 0 || wanted.length > MAX_SET_KEYS) return false
  return sql.begin(async (tx) => {
    // One product's registrations one at a time, so the count below holds.
    await tx`select pg_advisory_xact_lock(727003, hashtext(${productId}))`
    const sets = await tx`select keys, state from analytics_rollup_sets where product_id = ${productId}`
    if (sets.some((s) => s.state !== 'too_many_values' && wanted.every((k) => (s.keys as string[]).includes(k)))) return false
    // A set dropped for too many values keeps its keys from being made again, but not the product's room for others.
    if (sets.filter((s) => s.state !== 'too_many_values').length >= maxSets) return false
    // Read under a share lock: a step counting right now commits first, so every id past this one reaches the set live.
    const [state] = await tx`select watermark from analytics_rollup_state for share`
    const made = await tx`insert into analytics_rollup_sets (product_id, keys, covers_from, state)
      values (${productId}, ${wanted}, ${state!.watermark}, ${Number(state!.watermark) === 0 ? 'ready' : 'building'})
      on conflict (product_id, keys) do nothing returning id`
    return made.length > 0
  })
}

/** The watermark, and the product's sets that queries may read (id and keys, smallest first). */
export async function readState(sql: Sql, productId: string): Promise<{ watermark: number; sets: { id: number; keys: string[] }[] }> {
  const rows = await sql`select (select watermark from analytics_rollup_state) as watermark, s.id, s.keys
    from (select 1) one left join analytics_rollup_sets s on s.product_id = ${productId} and s.state = 'ready'
    order by cardinality(s.keys), s.id`
  return {
    watermark: Number(rows[0]!.watermark),
    sets: rows.filter((r) => r.id !== null).map((r) => ({ id: Number(r.id), keys: r.keys as string[] })),
  }
}
