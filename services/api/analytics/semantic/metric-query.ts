// Metric queries: an entity's metrics over a time range, grouped by dimensions and optionally by time bucket in a time
// zone, filtered; empty buckets answer 0 (count and sum) or null (avg and ratio, which are undefined there).
import { config } from '../../../../shared/config'
import { parseIsoTime } from '../../../../shared/iso-time'
import type { Entity, Metric } from './entity'
import { checkTimezone, filterSql, invalid, Params, parseRange, type PlanningDatabase, resolveEntity, resolveField, runQuery } from './plan'
import { postgresPlanning } from './planning-database'
import type { Bucket, MetricQuery } from './query-schemas'
import { chooseRollupSet, hasWholeHour, hoursOffTheHour, rollupAgg, rollupKeys } from './rollup-path'

const UNIT_MS = { hour: 3_600_000, day: 86_400_000, week: 7 * 86_400_000, month: 28 * 86_400_000 } as const

export interface MetricResult {
  entity: string
  metrics: string[]
  dimensions: string[]
  bucket: string | null
  timezone: string
  range: { from: string; to: string }
  /**
   * Distinct identities came from HyperLogLog sketches of the rollups: each such value is within about 2 % of the exact
   * count (docs/analytics.md, "Rollups"). Counts are exact either way. `exact: true` in the query reads raw events.
   */
  approximate: boolean
  rows: Record<string, string | number | null>[]
  /** More rows matched than `limit`: the rest were cut off. */
  truncated: boolean
  /** Every write acknowledged before this instant is counted; later ones may not be (docs/analytics.md, "Reads on a replica"). */
  as_of: string
}

function resolveMetric(entity: Entity, name: string, path: string): Metric {
  const metric = entity.metrics.find((m) => m.name === name)
  if (!metric) throw invalid(path, `names no metric of ${entity.entity}; one of ${entity.metrics.map((m) => JSON.stringify(m.name)).join(', ')}`)
  return metric
}

/**
 * Checks a query as a run would, without running it: every name against the catalog, the range, the time zone and the
 * bucket count (insights are checked so when saved; a relative range against the time of saving).
 */
export async function checkMetricQuery(query: MetricQuery, path = '/body', now = new Date()): Promise<void> {
  await planMetricQuery(NO_PRODUCT, query, path, now, postgresPlanning)
}

/** Stands in for the product in a plan that is only checked, never run. */
const NO_PRODUCT = '00000000-0000-0000-0000-000000000000'

/** A metric query as SQL: text with `$n` placeholders, their values, what the answer says besides its rows, and the row limit. */
export interface MetricPlan {
  text: string
  params: Params
  result: Omit<MetricResult, 'rows' | 'truncated' | 'as_of'>
  limit: number
}

export async function runMetricQuery(productId: string, query: MetricQuery, path = '/body', now = new Date()): Promise<MetricResult> {
  const { text, params, result, limit } = await planMetricQuery(productId, query, path, now, postgresPlanning)
  const rows = await runQuery(productId, text, params, `${path}/range`)
  const names = query.dimensions ?? []
  return {
    ...result,
    rows: rows.slice(0, limit).map((row) => {
      const out: Record<string, string | number | null> = {}
      // Epoch milliseconds from SQL, not a timestamp: the driver's Date parse misreads the years 0001-0099 as 19xx/20xx.
      if (result.bucket) out.bucket = new Date(Number(row.bucket)).toISOString()
      names.forEach((name, i) => (out[name] = (row[`g${i}`] as string | null) ?? null))
      query.metrics.forEach((name, i) => (out[name] = row[`m${i}`] === null ? null : Number(row[`m${i}`])))
      return out
    }),
    truncated: rows.length > limit,
    as_of: rows.asOf.toISOString(),
  }
}

/**
 * Ranges starting this close to the year 0001: a zone ahead of UTC, or a week's or month's truncation, can put their
 * first bucket in 1 BC, which an ISO-8601 instant here cannot name; the database computes where it starts.
 */
const NEAR_YEAR_ONE = parseIsoTime('0001-03-01')!.getTime()
const YEAR_ONE = parseIsoTime('0001-01-01')!.getTime()

async function checkFirstBucket(from: Date, bucket: Bucket, timezone: string, path: string, db: PlanningDatabase): Promise<void> {
  if ((await db.bucketStartMs(from, bucket, timezone)) < YEAR_ONE) {
    throw invalid(path, `puts the first ${bucket} bucket in ${timezone} before the year 0001: start the range later`)
  }
}

/**
 * Resolves and checks everything, and builds the SQL; a failure is a 400 naming the field. The database is asked only
 * what PostgreSQL alone can answer (its time zones, and where a bucket near the year 0001 starts).
 */
export async function planMetricQuery(productId: string, query: MetricQuery, path: string, now: Date, db: PlanningDatabase): Promise<MetricPlan> {
  const entity = resolveEntity(query.entity, `${path}/entity`)
  const metrics = query.metrics.map((m, i) => resolveMetric(entity, m, `${path}/metrics/${i}`))
  const params = new Params()
  const dims = (query.dimensions ?? []).map((d, i) => resolveField(entity, d, `${path}/dimensions/${i}`, params))
  const { from, to } = parseRange(query.range, `${path}/range`, now)
  const timezone = await checkTimezone(query.timezone ?? 'UTC', `${path}/timezone`, db)
  const bucket = query.bucket ?? null
  if (!entity.time) throw invalid(`${path}/range`, `cannot be used: ${entity.entity} has no time column`)
  if (bucket && (to.getTime() - from.getTime()) / UNIT_MS[bucket] + 1 > config.analytics.maxBuckets) {
    throw invalid(`${path}/bucket`, `spans more than ${config.analytics.maxBuckets} buckets over this range: use a larger bucket or a shorter range`)
  }
  if (bucket && from.getTime() < NEAR_YEAR_ONE) await checkFirstBucket(from, bucket, timezone, `${path}/range/from`, db)
  const limit = Math.min(query.limit ?? config.analytics.maxRows, config.analytics.maxRows)

  const product = params.add(productId)
  const where = [
    `s.product_id = ${product}`,
    `${entity.time} >= ${params.add(from.toISOString())}::timestamptz`,
    `${entity.time} < ${params.add(to.toISOString())}::timestamptz`,
    ...(query.filters ?? []).map((f, i) => filterSql(entity, f, `${path}/filters/${i}`, params)),
  ]
  const tz = bucket ? params.add(timezone) : '' // a parameter the query does not use would have no type
  // Aggregates: a ratio is computed from its two counts, so that it can be null where the denominator is 0.
  const aggregates = metrics.flatMap((m, i) => (m.type === 'ratio' ? [`${m.numerator} as n${i}`, `${m.denominator} as d${i}`] : [`${m.sql} as m${i}`]))
  const dimCols = dims.map((sql, i) => `${sql} as g${i}`)
  // Days, weeks and months are the zone's wall-clock ones (a DST day is one bucket of 23 or 25 hours), so they are
  // truncated in local time. Hours are real hours: across a fall-back the zone's 02:00 happens twice and is two
  // buckets, so they are truncated as instants (timestamptz, in the zone: right for half-hour offsets too).
  const wallClock = bucket !== 'hour'
  const truncate = (instant: string) => (wallClock ? `date_trunc('${bucket}', ${instant} at time zone ${tz})` : `date_trunc('hour', ${instant}, ${tz})`)
  const bucketCol = bucket ? [`${truncate(entity.time)} as b`] : []
  const groupBy = [...(bucket ? ['b'] : []), ...dims.map((_, i) => `g${i}`)]
  let agg = `select ${[...bucketCol, ...dimCols, ...aggregates].join(', ')} from ${entity.source} where ${where.join(' and ')}${groupBy.length ? ` group by ${groupBy.join(', ')}` : ''}`
  // Every bucket's start, in the zone's wall time (the answer's rows) and as instants (where the rollups' hours are cut).
  const seriesOf = (column: string) => `generate_series(${truncate(`${params.add(from.toISOString())}::timestamptz`)},
      ${truncate(`(${params.add(to.toISOString())}::timestamptz - interval '1 microsecond')`)}, interval '1 ${bucket}') as ${column}`
  let ctes = ''
  let approximate = false
  const rollable = hasWholeHour(from, to) && !(bucket === 'hour' && hoursOffTheHour(timezone, from, to))
  const keys = rollable ? rollupKeys(entity, query) : null
  const rollups = keys ? await db.rollupState(productId) : null
  const choice = keys && rollups ? chooseRollupSet(keys, rollups.sets) : null
  if (rollups && choice) {
    const rolled = rollupAgg({
      entity, query, path, choice, metrics, params, productParam: product, from, to, rawWhere: where, rawDims: dims,
      truncate: bucket ? truncate : null, plannedWatermark: rollups.watermark,
      bucketStarts: bucket ? `select ${wallClock ? `(g.b at time zone ${tz})` : 'g.b'} as i from ${seriesOf('g(b)')}` : null,
    })
    ctes = `${rolled.ctes}, `
    agg = rolled.agg
    approximate = metrics.some((m) => m.name === 'identities')
  }

  const value = (m: Metric, i: number, from: string) => {
    if (m.type === 'ratio') return `case when coalesce(${from}.d${i}, 0) = 0 then null else ${from}.n${i}::float8 / ${from}.d${i} end`
    if (m.type === 'count' || m.type === 'sum') return `coalesce(${from}.m${i}, 0)::float8`
    return `${from}.m${i}::float8`
  }
  const metricCols = (from: string) => metrics.map((m, i) => `${value(m, i, from)} as m${i}`).join(', ')
  const dimOut = (from: string) => dims.map((_, i) => `${from}.g${i}`).join(', ')
  let text: string
  if (bucket) {
    // Every bucket of the range, in the zone's wall time, whether or not it has rows; with dimensions, every bucket
    // for every combination of dimension values that has rows somewhere in the range.
    const series = `select ${seriesOf('b')}`
    const combos = dims.length ? `, combos as (select distinct ${dims.map((_, i) => `g${i}`).join(', ')} from agg)` : ''
    const join = dims.map((_, i) => ` and agg.g${i} is not distinct from combos.g${i}`).join('')
    text = `with ${ctes}agg as (${agg}), series as (${series})${combos}
      select extract(epoch from ${wallClock ? `(series.b at time zone ${tz})` : 'series.b'}) * 1000 as bucket${dims.length ? `, ${dimOut('combos')}` : ''}, ${metricCols('agg')}
      from series${dims.length ? ' cross join combos' : ''} left join agg on agg.b = series.b${join}
      order by series.b${dims.length ? `, ${dims.map((_, i) => `combos.g${i}`).join(', ')}` : ''}
      limit ${params.add(limit + 1)}`
  } else {
    text = `with ${ctes}agg as (${agg}) select ${dims.length ? `${dimOut('agg')}, ` : ''}${metricCols('agg')} from agg
      ${dims.length ? `order by ${dims.map((_, i) => `agg.g${i}`).join(', ')}` : ''} limit ${params.add(limit + 1)}`
  }
  return {
    text, params, limit,
    result: { entity: entity.entity, metrics: query.metrics, dimensions: query.dimensions ?? [], bucket, timezone, range: { from: from.toISOString(), to: to.toISOString() }, approximate },
  }
}
