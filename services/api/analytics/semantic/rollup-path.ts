// The rollup path of a metric query over tracked events: rows per six hours of the UTC day and per hour for the whole
// parts and hours of the range that lie in one bucket each, five-minute slot rows for the range's ends outside them
// and for the hours a bucket boundary cuts, and raw events for the rest (less than a slot at each end, slots a boundary cuts, and every event captured past the
// rollups' watermark), merged into the same `agg` rows the raw path gives
// (bucket b, dimensions g0.., metrics m0..). Counts add up; distinct identities merge as HyperLogLog sketches, so the
// answer says `approximate`. The watermark and the set's readiness are read in the same statement, so one snapshot
// decides which events come from where: none is counted twice or missed. docs/analytics.md, "Rollups".
import { BASE_SET, binSql, DAY_PART_HOURS, EVENTS_SOURCE, identitySketch, MAX_SET_KEYS, SLOT_MINUTES } from '../../../../shared/analytics/events'
import type { Entity, Metric } from './entity'
import { type FieldResolver, filterSql, invalid, type Params, PROPERTY } from './plan'
import type { MetricQuery } from './query-schemas'

const HOUR_MS = 3_600_000
/** The metrics rollups hold: counted events and the sketch of their identities. */
const ROLLED_UP: Record<string, 'events' | 'identities'> = { count: 'events', identities: 'identities' }

export interface RollupChoice {
  setId: number
  /** The set's keys in its column order (v1, v2, v3). */
  keys: string[]
}

/**
 * The property keys a query reads, when rollups can answer it; null when it must read raw events: an exact answer
 * asked for, or a metric or a field the rollups do not hold (users_id, anonymous_id).
 */
export function rollupKeys(entity: Entity, query: MetricQuery): string[] | null {
  if (!entity.rollups || query.exact) return null
  if (!query.metrics.every((m) => m in ROLLED_UP)) return null
  const keys: string[] = []
  for (const field of [...(query.dimensions ?? []), ...(query.filters ?? []).map((f) => f.field)]) {
    if (field === 'event') continue
    const property = PROPERTY.exec(field)
    if (!property) return null
    keys.push(property[1]!)
  }
  return keys
}

/** The base set without keys; else the smallest ready set holding every key, or null (raw events, then). */
export function chooseRollupSet(keys: string[], ready: { id: number; keys: string[] }[]): RollupChoice | null {
  if (!keys.length) return { setId: BASE_SET, keys: [] }
  const set = ready.find((s) => keys.every((k) => s.keys.includes(k)))
  return set && set.keys.length <= MAX_SET_KEYS ? { setId: set.id, keys: set.keys } : null
}

export interface RollupAggInput {
  entity: Entity
  query: MetricQuery
  path: string
  choice: RollupChoice
  metrics: Metric[]
  params: Params
  productParam: string
  from: Date
  to: Date
  /** The raw rows' conditions: product, range, filters (alias `s`). */
  rawWhere: string[]
  /** The raw rows' dimension SQL, in order. */
  rawDims: string[]
  /** SQL of the bucket holding an instant (a timestamptz SQL expression), or null without a bucket. */
  truncate: ((instant: string) => string) | null
  /** SQL giving each bucket's start as an instant (one row per bucket, column `i`), or null without a bucket. */
  bucketStarts: string | null
  /**
   * A watermark read when the query was planned, at or below the one its statement reads (the replica's, when there
   * is one: ./planning-database.ts). It only lets PostgreSQL see how few events lie past the watermark (a value read
   * inside the statement it cannot estimate); were it above, events between the two would be missed.
   */
  plannedWatermark: number
}

const SLOT_MS = SLOT_MINUTES * 60_000
const SLOT = `${SLOT_MINUTES} minutes`
const PART_MS = DAY_PART_HOURS * HOUR_MS
const PART = `${DAY_PART_HOURS} hours`
const DAY_PART = (instant: string) => binSql(PART, instant)
/** An instant rounded up or down to a multiple of `ms` since the epoch (hours, slots and parts all start at one). */
const ceilTo = (ms: number, at: Date) => new Date(Math.ceil(at.getTime() / ms) * ms)
const floorTo = (ms: number, at: Date) => new Date(Math.floor(at.getTime() / ms) * ms)

/**
 * Whether hour buckets in this zone start off the UTC hour (Asia/Kolkata +05:30, Australia/Lord_Howe's +10:30): every
 * rollup hour is then cut by a bucket boundary and read raw, one index scan per hour, which costs more than reading
 * the range raw at once. Asked at both ends of the range; only a choice of path, never of numbers (the cut hours are
 * found in SQL either way).
 */
export function hoursOffTheHour(timezone: string, from: Date, to: Date): boolean {
  let format: Intl.DateTimeFormat
  try {
    format = new Intl.DateTimeFormat('en-US', { timeZone: timezone, timeZoneName: 'longOffset' })
  } catch {
    return false // a zone only PostgreSQL knows: let the SQL decide hour by hour
  }
  const offMinutes = (at: Date) => /GMT[+-]\d{2}:(\d{2})/.exec(format.formatToParts(at).find((p) => p.type === 'timeZoneName')?.value ?? '')?.[1]
  return [from, to].some((at) => {
    const minutes = offMinutes(at)
    return minutes !== undefined && minutes !== '00'
  })
}

/** Whether a range holds at least one whole UTC hour (else the raw path reads it all anyway). */
export const hasWholeHour = (from: Date, to: Date) => ceilTo(HOUR_MS, from).getTime() < floorTo(HOUR_MS, to).getTime()

/** The CTEs (without `with`) and the `agg` select of the rollup path. */
export function rollupAgg(input: RollupAggInput): { ctes: string; agg: string } {
  const { entity, query, path, choice, metrics, params, productParam, truncate } = input
  const h0 = params.add(ceilTo(HOUR_MS, input.from).toISOString())
  const h1 = params.add(floorTo(HOUR_MS, input.to).toISOString())
  // Whole slots at the range's ends, outside the whole hours: f0 <= h0 < h1 <= f1.
  const f0 = params.add(ceilTo(SLOT_MS, input.from).toISOString())
  const f1 = params.add(floorTo(SLOT_MS, input.to).toISOString())
  // Whole parts of the day within the whole hours: h0 <= p0, p1 <= h1 (none when p0 >= p1).
  const p0 = params.add(ceilTo(PART_MS, ceilTo(HOUR_MS, input.from)).toISOString())
  const p1 = params.add(floorTo(PART_MS, floorTo(HOUR_MS, input.to)).toISOString())
  const time = entity.time!
  const rollupColumn: FieldResolver = (name, at) => {
    if (name === 'event') return 'r.event'
    const property = PROPERTY.exec(name)
    const index = property ? choice.keys.indexOf(property[1]!) : -1
    if (index < 0) throw invalid(at, 'is not held by the rollup set chosen for this query') // chooseRollupSet rules it out
    return `r.v${index + 1}`
  }
  const dims = query.dimensions ?? []
  const rollupDims = dims.map((d, i) => rollupColumn(d, `${path}/dimensions/${i}`))
  const rollupFilters = (query.filters ?? []).map((f, i) => filterSql(entity, f, `${path}/filters/${i}`, params, rollupColumn))
  const wantsIdentities = metrics.some((m) => ROLLED_UP[m.name] === 'identities')
  // A query that names no event reads the rows over all events (event null): one sketch per hour, not one per event.
  const namesEvent = dims.includes('event') || (query.filters ?? []).some((f) => f.field === 'event')

  // One snapshot: how far the rollups go, whether the set is ready (a set dropped for too many values is not), and
  // whether its slots are (the base set's, during an upgrade's slot backfill, are not yet; a set's become ready with it).
  const setId = params.add(choice.setId)
  const ready = choice.setId === BASE_SET ? 'true'
    : `exists (select 1 from analytics_rollup_sets where id = ${setId} and product_id = ${productParam} and state = 'ready')`
  const slotsReady = choice.setId === BASE_SET ? 'slots_backfilled >= slots_from' : ready
  const ctes = [`st as (select watermark as w, ${ready} as ok, ${slotsReady} as sok from analytics_rollup_state)`]
  // Hours a bucket boundary cuts: their row spans two buckets, so their slots are read instead (or, before the slots
  // are ready, raw events). Candidates are the hours around each bucket's start; the test is the bucket of the hour's
  // first and last instants. The same test finds the slots a boundary cuts (a zone whose offset is not a whole number
  // of five minutes, such as a city's local mean time before 1900): those are read raw.
  const cuts = (span: string, unit: string) => `${truncate!(span)} <> ${truncate!(`(${span} + interval '${unit}' - interval '1 microsecond')`)}`
  if (truncate && input.bucketStarts) {
    ctes.push(`cut as (select distinct c.h from (select date_trunc('hour', x.i, 'UTC') + k * interval '1 hour' as h
        from (${input.bucketStarts}) x cross join (values (-1), (0), (1)) as k(k)) c
      where c.h >= ${h0}::timestamptz and c.h < ${h1}::timestamptz and ${cuts('c.h', '1 hour')})`)
    ctes.push(`slotcut as (select c.s from (
        select generate_series(${f0}::timestamptz, ${h0}::timestamptz - interval '${SLOT}', interval '${SLOT}') as s
        union all select generate_series(${h1}::timestamptz, ${f1}::timestamptz - interval '${SLOT}', interval '${SLOT}')
        union all select generate_series(cut.h, cut.h + interval '1 hour' - interval '${SLOT}', interval '${SLOT}') from cut) c
      where ${cuts('c.s', SLOT)})`)
  } else {
    ctes.push(`cut as (select null::timestamptz as h where false)`, `slotcut as (select null::timestamptz as s where false)`)
  }
  // Parts of the day no bucket boundary cuts: read as one row each instead of their six hours.
  ctes.push(`parts as (select q.p from generate_series(${p0}::timestamptz, ${p1}::timestamptz - interval '${PART}', interval '${PART}') as q(p)
    ${truncate ? `where not (${cuts('q.p', PART)})` : ''})`)
  // Spans read raw one index range scan each, up to the watermark: the cut slots once slots are ready, else the cut
  // hours (while the set is ready; when it is not, its whole hours are read raw below).
  ctes.push(`rawcut as (select s as lo, s + interval '${SLOT}' as hi from slotcut where (select ok and sok from st)
    union all select h, h + interval '1 hour' from cut where (select ok and not sok from st))`)

  const groupCols = (bucketSql: string | null, dimSql: string[]) =>
    [...(bucketSql ? [`${bucketSql} as b`] : []), ...dimSql.map((sql, i) => `${sql} as g${i}`)]
  const groupBy = [...(truncate ? ['b'] : []), ...dims.map((_, i) => `g${i}`)]
  const group = groupBy.length ? ` group by ${groupBy.join(', ')}` : ''
  const sketch = (sql: string) => (wantsIdentities ? `, ${sql} as h` : '')

  // Rollup rows of `table` (alias r, time column `at`) in the spans `spans`, grouped as the raw rows are.
  const rows = (table: string, at: string, spans: string, extra: string[] = []) => `select ${[...groupCols(truncate ? truncate(`r.${at}`) : null, rollupDims), 'sum(r.events) as c'].join(', ')}
      ${sketch('hll_union_agg(r.identities)')}
    from ${table} r
    where r.product_id = ${productParam} and r.set_id = ${setId} and ${spans}
      and r.event is ${namesEvent ? 'not null' : 'null'}
      ${[...extra, ...rollupFilters].map((f) => `and ${f}`).join(' ')}${group}`
  // Raw events of `from` (alias `s`) with the query's own conditions and `extra` ones, grouped as the rollup rows are.
  const raw = (from: string, extra: string[], own = input.rawWhere) => `select ${[...groupCols(truncate ? truncate(time) : null, input.rawDims), 'count(*) as c'].join(', ')}
      ${sketch(identitySketch('s'))}
    from ${from}${[...own, ...extra].length ? ` where ${[...own, ...extra].join(' and ')}` : ''}${group}`
  const source = `${EVENTS_SOURCE} s`
  const upToWatermark = `s.id + 0 <= (select w from st)`
  const edges = (column: string) => `((${column} >= ${f0}::timestamptz and ${column} < ${h0}::timestamptz) or (${column} >= ${h1}::timestamptz and ${column} < ${f1}::timestamptz))`
  const pieces = [
    // The whole parts of the day no bucket boundary cuts, and the whole hours outside them that none cuts.
    rows('analytics_event_day_parts', 'part', `(select ok from st) and r.part >= ${p0}::timestamptz and r.part < ${p1}::timestamptz
      and r.part in (select p from parts)`),
    rows('analytics_event_rollups', 'hour', `(select ok from st) and r.hour >= ${h0}::timestamptz and r.hour < ${h1}::timestamptz
      and r.hour not in (select h from cut) and ${DAY_PART('r.hour')} not in (select p from parts)`),
    // The slots at the range's ends outside the whole hours, and those of the cut hours (one index range scan per
    // hour: lateral, and fenced by `offset 0` so PostgreSQL cannot flatten it into a join over the product's slots).
    rows('analytics_event_slots', 'slot', `(select ok and sok from st) and ${edges('r.slot')}`, ['r.slot not in (select s from slotcut)']),
    `select l.* from cut cross join lateral (${rows('analytics_event_slots', 'slot', `(select ok and sok from st) and r.slot >= cut.h
      and r.slot < cut.h + interval '1 hour'`, ['r.slot not in (select s from slotcut)'])} offset 0) l`,
    // Less than a slot at each end (empty when the range starts or ends on a slot).
    raw(source, [`${time} < ${f0}::timestamptz`]),
    raw(source, [`${time} >= ${f1}::timestamptz`]),
    // Events captured past the watermark, between those.
    raw(source, [`${time} >= ${f0}::timestamptz`, `${time} < ${f1}::timestamptz`,
      `s.id > ${params.add(input.plannedWatermark)}::bigint`, `s.id > (select w from st)`]),
    // The cut spans up to the watermark, a lateral index range scan each as above. The query's own conditions go
    // inside, where the indexes are (`s.id + 0`: the watermark's side is a filter, not an index scan of every event below it).
    raw(`rawcut cross join lateral (select s.* from ${source} where ${[...input.rawWhere, `${time} >= rawcut.lo`,
      `${time} < rawcut.hi`, upToWatermark].join(' and ')} offset 0) s`, [], []),
    // Before the slots are ready (an upgrade's backfill), the ends outside the whole hours raw.
    raw(source, [`not (select ok and sok from st)`, edges(time), upToWatermark]),
    // A set that stopped being ready since the plan was made: its whole hours raw (the planner chose it a moment ago).
    raw(source, [`not (select ok from st)`, `${time} >= ${h0}::timestamptz`, `${time} < ${h1}::timestamptz`, upToWatermark]),
  ]
  const merged = metrics.map((m, i) => (ROLLED_UP[m.name] === 'events'
    ? `sum(p.c) as m${i}`
    : `round(hll_cardinality(hll_union_agg(p.h)))::bigint as m${i}`))
  const agg = `select ${[...groupBy, ...merged].join(', ')} from (${pieces.join('\n    union all ')}) p${group}`
  return { ctes: ctes.join(', '), agg }
}
