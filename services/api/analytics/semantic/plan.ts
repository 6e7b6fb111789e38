// What metric queries and funnels share: SQL parameters, names resolved against the catalog (a name not in it is a 400
// naming the field), filters, time ranges and zones, and running a query under its statement timeout.
import { config } from '../../../../shared/config'
import { ApiError, badRequest } from '../../../../shared/errors'
import { parseIsoTime, withinIsoYears } from '../../../../shared/iso-time'
import { Slots } from '../../slots'
import { readAnalytics } from '../reads'
import { entityNamed } from './catalog'
import type { Entity } from './entity'
import type { Bucket, Filter, Range } from './query-schemas'
import { isPgError } from '../../../../shared/db/error-codes'

/** Collects the values of a query: SQL text only ever holds `$n` for them and fixed SQL from the catalog. */
export class Params {
  readonly values: unknown[] = []
  add(value: unknown): string {
    this.values.push(value)
    return `$${this.values.length}`
  }
}

export const invalid = (path: string, message: string) => badRequest(`Invalid request: ${path} ${message}`, [{ path, message }])

const list = (names: string[]) => names.map((n) => JSON.stringify(n)).join(', ')

export function resolveEntity(name: string, path: string): Entity {
  const entity = entityNamed(name)
  if (!entity) throw invalid(path, `names no entity of the catalog (analytics_catalog_get lists them)`)
  return entity
}

// Any key capture accepts (1 to 200 characters) can be read back.
export const PROPERTY = /^properties\.(.{1,200})$/s

/** A dimension of the entity, or `properties.<key>` on an entity with properties: its SQL (the key as a parameter). */
export function resolveField(entity: Entity, name: string, path: string, params: Params): string {
  const property = PROPERTY.exec(name)
  if (property && entity.properties) return `(${entity.properties} ->> ${params.add(property[1])})`
  const dimension = entity.dimensions.find((d) => d.name === name)
  if (dimension) return dimension.sql
  const properties = entity.properties ? ', or properties.<key>' : ''
  throw invalid(path, `names no dimension of ${entity.entity}; one of ${list(entity.dimensions.map((d) => d.name))}${properties}`)
}

// The exponent is bounded so the cast cannot overflow numeric (a property of 8 KiB cannot have too many digits).
const NUMERIC = `'^-?[0-9]+(\\.[0-9]+)?([eE][-+]?[0-9]{1,4})?$'`

/** Where a field's value is read: the SQL of a field name (a 400 naming `path` when there is none). */
export type FieldResolver = (name: string, path: string) => string

/**
 * One filter as a SQL condition. Values are parameters; text compares as text, gt..lte compare numbers. The field is
 * read from the entity's rows unless `resolve` reads it elsewhere (a rollup's columns).
 */
export function filterSql(entity: Entity, filter: Filter, path: string, params: Params, resolve?: FieldResolver): string {
  const field = (resolve ?? ((name, at) => resolveField(entity, name, at, params)))(filter.field, `${path}/field`)
  const value = filter.value
  const needs = (what: string) => invalid(`${path}/value`, `is required for ${filter.op}: ${what}`)
  switch (filter.op) {
    case 'set':
      return `${field} is not null`
    case 'notSet':
      return `${field} is null`
    case 'in': {
      if (!Array.isArray(value)) throw needs('an array of values')
      return `${field} = any(${params.add(value.map(String))}::text[])`
    }
    case 'gt': case 'gte': case 'lt': case 'lte': {
      if (typeof value !== 'number') throw needs('a number')
      const op = { gt: '>', gte: '>=', lt: '<', lte: '<=' }[filter.op]
      // Text that is not a number never matches (and never fails the query).
      return `(case when ${field} ~ ${NUMERIC} then (${field})::numeric end) ${op} ${params.add(value)}::numeric`
    }
    default: {
      if (value === undefined || Array.isArray(value)) throw needs('one value')
      const text = params.add(String(value))
      if (filter.op === 'equals') return `${field} = ${text}`
      if (filter.op === 'notEquals') return `${field} is distinct from ${text}`
      return `strpos(lower(${field}), lower(${text})) > 0`
    }
  }
}

const RELATIVE = /^-(\d{1,6})(h|d|w|m)$/
const NOT_A_TIME = 'is not a time: use ISO-8601 (2026-03-01T00:00:00Z) with a real date and an offset within ±14:00, now, or -24h / -7d / -4w / -3m'

/** A time of a range: ISO-8601 (UTC when it has no offset), `now`, or relative to now (-24h, -7d, -4w, -3m). */
export function parseTime(value: string, path: string, now: Date): Date {
  if (value === 'now') return now
  const relative = RELATIVE.exec(value)
  if (relative) {
    const n = Number(relative[1])
    const at = new Date(now)
    if (relative[2] === 'h') at.setTime(at.getTime() - n * 3_600_000)
    else if (relative[2] === 'd') at.setTime(at.getTime() - n * 86_400_000)
    else if (relative[2] === 'w') at.setTime(at.getTime() - n * 7 * 86_400_000)
    else at.setUTCMonth(at.getUTCMonth() - n)
    if (!withinIsoYears(at)) throw invalid(path, 'reaches before the year 0001: use a shorter relative time')
    return at
  }
  const at = parseIsoTime(value)
  if (!at) throw invalid(path, NOT_A_TIME)
  return at
}

export function parseRange(range: Range, path: string, now = new Date()): { from: Date; to: Date } {
  const from = parseTime(range.from, `${path}/from`, now)
  // `to` is exclusive; a range that ends `now` still holds what was captured in this very millisecond (capture stamps
  // events with its own clock to the millisecond), so "capture, then query up to now" always sees the capture.
  const to = (range.to ?? 'now') === 'now' ? new Date(now.getTime() + 1) : parseTime(range.to!, `${path}/to`, now)
  if (from.getTime() >= to.getTime()) throw invalid(`${path}/from`, 'must be before to')
  return { from, to }
}

/**
 * What planning asks the database, whose time rules a query must agree with: narrow, so a query can be planned (and
 * its plan tested) with no database. The real one is ./planning-database.ts.
 */
export interface PlanningDatabase {
  /** The IANA time zones PostgreSQL knows (pg_timezone_names). */
  timezones(): Promise<ReadonlySet<string>>
  /** Where PostgreSQL starts the `bucket` holding `from` in `timezone`, in epoch milliseconds (it may precede the year 0001). */
  bucketStartMs(from: Date, bucket: Bucket, timezone: string): Promise<number>
  /**
   * How far the rollups go, and the product's property sets that queries may read, smallest first
   * (docs/analytics.md, "Rollups").
   */
  rollupState(productId: string): Promise<RollupState>
}

export interface RollupState {
  watermark: number
  sets: { id: number; keys: string[] }[]
}

/** An IANA time zone PostgreSQL knows. */
export async function checkTimezone(zone: string, path: string, db: PlanningDatabase): Promise<string> {
  if (!(await db.timezones()).has(zone)) throw invalid(path, 'is not an IANA time zone known to the database, such as UTC or Europe/Berlin')
  return zone
}

/**
 * 429 too_many_queries with Retry-After 1, in the header and as `retryAfter` in the body (for clients, such as a browser
 * page, that read only the body): every bound on analytics runs at once (product, organization, worker) answers so.
 */
export const tooManyQueries = (message: string, extra: Record<string, unknown>) =>
  new ApiError('too_many_queries', message, { ...extra, retryAfter: 1 }, { 'retry-after': '1' })

/** Analytics queries running now on this worker, per product (config.analytics.maxConcurrentPerProduct). */
const productSlots = new Slots()

/** PostgreSQL's datetime errors: format, field overflow, time zone. */
const DATETIME_ERRORS = new Set(['22007', '22008', '22009'])

/**
 * Runs a built query under the statement timeout; a query that runs out of it is 422 query_timeout. Times are checked
 * before they get here; should the database still refuse one, that is a 400 naming the range, never a 500. A product
 * already running its share of queries on this worker is 429 too_many_queries (PostHog answers concurrency so too).
 */
export async function runQuery(productId: string, text: string, params: Params, rangePath: string): Promise<Record<string, unknown>[] & { asOf: Date }> {
  const limit = config.analytics.maxConcurrentPerProduct
  const refuse = (running: number) =>
    tooManyQueries(`This product already runs ${running} analytics queries on this worker; retry when one has finished`, { limit })
  try {
    // On the replica or the primary (../reads.ts); `asOf`: every write acknowledged before it is in the rows.
    const read = await productSlots.run(productId, limit, refuse, () => readAnalytics(async (tx) => {
      await tx.unsafe(`set local statement_timeout = ${Math.max(1, Math.floor(config.analytics.queryTimeoutMs))}`)
      return (await tx.unsafe(text, params.values as never[])) as unknown as Record<string, unknown>[]
    }))
    return Object.assign(read.value, { asOf: read.asOf })
  } catch (error) {
    if (isPgError(error, 'queryCanceled')) {
      throw new ApiError('query_timeout', `The query ran longer than ${config.analytics.queryTimeoutMs} ms: narrow its range, filters or dimensions`)
    }
    if (DATETIME_ERRORS.has((error as { code?: string }).code ?? '')) {
      throw invalid(rangePath, `is outside what the database can compute with (${(error as Error).message})`)
    }
    throw error
  }
}
