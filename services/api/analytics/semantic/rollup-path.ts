// The rollup path of a metric query over tracked events: rollup rows for the whole UTC hours of the range that lie
// in one bucket each, and raw events for the rest (the partial hours at the range's ends, the hours a bucket boundary
// cuts, and every event captured past the rollups' watermark), merged into the same `agg` rows the raw path gives
// (bucket b, dimensions g0.., metrics m0..). Counts add up; distinct identities merge as HyperLogLog sketches, so the
// answer says `approximate`. The watermark and the set's readiness are read in the same statement, so one snapshot
// decides which events come from where: none is counted twice or missed. docs/analytics.md, "Rollups".
import { BASE_SET, EVENTS_SOURCE, identitySketch, MAX_SET_KEYS } from '../../../../shared/analytics/events'
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

const ceilHour = (at: Date) => new Date(Math.ceil(at.getTime() / HOUR_MS) * HOUR_MS)
const floorHour = (at: Date) => new Date(Math.floor(at.getTime() / HOUR_MS) * HOUR_MS)

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
export const hasWholeHour = (from: Date, to: Date) => ceilHour(from).getTime() < floorHour(to).getTime()

/** The CTEs (without `with`) and the `agg` select of the rollup path. */
export function rollupAgg(input: RollupAggInput): { ctes: string; agg: string } {
  const { entity, query, path, choice, metrics, params, productParam, truncate } = input
  const h0 = params.add(ceilHour(input.from).toISOString())
  const h1 = params.add(floorHour(input.to).toISOString())
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

  // One snapshot: how far the rollups go, and whether the set is ready (a set dropped for too many values is not).
  const ready = choice.setId === BASE_SET ? 'true'
    : `exists (select 1 from analytics_rollup_sets where id = ${params.add(choice.setId)} and product_id = ${productParam} and state = 'ready')`
  const ctes = [`st as (select watermark as w, ${ready} as ok from analytics_rollup_state)`]
  // Hours a bucket boundary cuts: their rollup row spans two buckets, so they are read raw. Candidates are the hours
  // around each bucket's start; the test is the bucket of the hour's first and last instants.
  if (truncate && input.bucketStarts) {
    ctes.push(`cut as (select distinct c.h from (select date_trunc('hour', x.i, 'UTC') + k * interval '1 hour' as h
        from (${input.bucketStarts}) x cross join (values (-1), (0), (1)) as k(k)) c
      where c.h >= ${h0}::timestamptz and c.h < ${h1}::timestamptz
        and ${truncate('c.h')} <> ${truncate(`(c.h + interval '1 hour' - interval '1 microsecond')`)})`)
  } else {
    ctes.push(`cut as (select null::timestamptz as h where false)`)
  }

  const groupCols = (bucketSql: string | null, dimSql: string[]) =>
    [...(bucketSql ? [`${bucketSql} as b`] : []), ...dimSql.map((sql, i) => `${sql} as g${i}`)]
  const groupBy = [...(truncate ? ['b'] : []), ...dims.map((_, i) => `g${i}`)]
  const group = groupBy.length ? ` group by ${groupBy.join(', ')}` : ''
  const sketch = (sql: string) => (wantsIdentities ? `, ${sql} as h` : '')

  const rollupRows = `select ${[...groupCols(truncate ? truncate('r.hour') : null, rollupDims), 'sum(r.events) as c'].join(', ')}
      ${sketch('hll_union_agg(r.identities)')}
    from analytics_event_rollups r
    where (select ok from st) and r.product_id = ${productParam} and r.set_id = ${params.add(choice.setId)}
      and r.hour >= ${h0}::timestamptz and r.hour < ${h1}::timestamptz and r.hour not in (select h from cut)
      and r.event is ${namesEvent ? 'not null' : 'null'}
      ${rollupFilters.map((f) => `and ${f}`).join(' ')}${group}`
  // Raw events of `from` (alias `s`) with the query's own conditions and `extra` ones, grouped as the rollup rows are.
  const raw = (from: string, extra: string[], own = input.rawWhere) => `select ${[...groupCols(truncate ? truncate(entity.time!) : null, input.rawDims), 'count(*) as c'].join(', ')}
      ${sketch(identitySketch('s'))}
    from ${from} where ${[...own, ...extra].join(' and ')}${group}`
  const source = `${EVENTS_SOURCE} s`
  const pieces = [
    rollupRows,
    // The partial hours at the range's ends (empty when it starts or ends on the hour).
    raw(source, [`${entity.time} < ${h0}::timestamptz`]),
    raw(source, [`${entity.time} >= ${h1}::timestamptz`]),
    // Events captured past the watermark, in the whole hours.
    raw(source, [`${entity.time} >= ${h0}::timestamptz`, `${entity.time} < ${h1}::timestamptz`,
      `s.id > ${params.add(input.plannedWatermark)}::bigint`, `s.id > (select w from st)`]),
    // The hours a bucket boundary cuts, up to the watermark: one index range scan per cut hour (lateral, and fenced by
    // `offset 0` so PostgreSQL cannot flatten it into a join that reads every event first and then finds no hour).
    // The query's own conditions go inside, where the indexes are (`s.id + 0`: the watermark's side is a filter, not
    // an index scan of every event below it).
    raw(`cut cross join lateral (select s.* from ${source} where ${[...input.rawWhere, `${entity.time} >= cut.h`,
      `${entity.time} < cut.h + interval '1 hour'`, `s.id + 0 <= (select w from st)`].join(' and ')} offset 0) s`, [`(select ok from st)`], []),
    // A set that stopped being ready since the plan was made: its whole hours raw (the planner chose it a moment ago).
    raw(source, [`not (select ok from st)`, `${entity.time} >= ${h0}::timestamptz`, `${entity.time} < ${h1}::timestamptz`, `s.id + 0 <= (select w from st)`]),
  ]
  const merged = metrics.map((m, i) => (ROLLED_UP[m.name] === 'events'
    ? `sum(p.c) as m${i}`
    : `round(hll_cardinality(hll_union_agg(p.h)))::bigint as m${i}`))
  const agg = `select ${[...groupBy, ...merged].join(', ')} from (${pieces.join('\n    union all ')}) p${group}`
  return { ctes: ctes.join(', '), agg }
}
