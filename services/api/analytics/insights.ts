// Insights: a named, saved metric query or funnel, checked against the catalog when saved. Dashboard tiles name them;
// one that a dashboard uses cannot be deleted (409 naming the dashboards).
import { randomUUID } from 'node:crypto'
import { validateInput } from '../../../shared/catalog/validate'
import { Strict } from '../../../shared/catalog/schemas'
import { type PageRequest, PAGE_DEFAULT } from '../../../shared/catalog/pagination'
import { insertUnderCeiling } from '../../../shared/db/ceiling'
import { sql } from '../../../shared/db/client'
import { keysetPage, NEWEST_FIRST } from '../../../shared/db/keyset'
import { ApiError, notFound } from '../../../shared/errors'
import { checkFunnel, runFunnel } from './semantic/funnel'
import { checkMetricQuery, runMetricQuery } from './semantic/metric-query'
import { Funnel, MetricQuery, type Range } from './semantic/query-schemas'
import { invalid } from './semantic/plan'
import { isUuid } from '../../../shared/ids'
import { registerRollupSet } from '../../../shared/analytics/rollups'
import { config } from '../../../shared/config'
import { describeError, log } from '../../../shared/log'
import { entityNamed } from './semantic/catalog'
import { rollupKeys } from './semantic/rollup-path'
import { QUERY_HASH, runFunnelInsight, type FunnelRunOptions } from './insight-results'

export type InsightKind = 'metric' | 'funnel'

export interface Insight {
  id: string
  name: string
  description: string | null
  kind: InsightKind
  query: MetricQuery | Funnel
  createdBy: string | null
  createdAt: Date
  updatedAt: Date
}

const insightOut = (row: Record<string, any>): Insight => ({
  id: row.id, name: row.name, description: row.description, kind: row.kind, query: row.query,
  createdBy: row.created_by, createdAt: row.created_at, updatedAt: row.updated_at,
})

const QUERY_SCHEMAS = { metric: Strict({ query: MetricQuery }), funnel: Strict({ query: Funnel }) }

/** The query as its kind's schema and the catalog say (400 naming `/body/query/...` otherwise). */
async function checkQuery(kind: InsightKind, query: unknown): Promise<MetricQuery | Funnel> {
  const checked = (validateInput({ body: QUERY_SCHEMAS[kind] }, { body: { query } }).body as { query: MetricQuery | Funnel }).query
  if (kind === 'metric') await checkMetricQuery(checked as MetricQuery, '/body/query')
  else checkFunnel(checked as Funnel, '/body/query')
  return checked
}

/**
 * A saved metric insight over tracked events that groups or filters by properties gets a rollup set for those keys,
 * so that its runs read rollups (docs/analytics.md, "Rollups"). The insight is saved either way: without a set its runs
 * read raw events, so a failure here is logged, not answered.
 */
async function prepareRollups(productId: string, kind: InsightKind, query: MetricQuery | Funnel): Promise<void> {
  if (kind !== 'metric') return
  const entity = entityNamed((query as MetricQuery).entity)
  const keys = entity ? rollupKeys(entity, query as MetricQuery) : null
  if (!keys?.length) return
  try {
    await registerRollupSet(sql, productId, keys, config.analytics.maxRollupSets)
  } catch (error) {
    log('warn', 'rollup set not registered; the insight reads raw events', describeError(error))
  }
}

export async function createInsight(
  productId: string, input: { name: string; description?: string | null; kind: InsightKind; query: unknown }, createdBy: string | null,
): Promise<Insight> {
  const query = await checkQuery(input.kind, input.query)
  const count = (q: typeof sql) => q<{ n: number }[]>`select count(*)::int as n from analytics_insights where product_id = ${productId}`
  const [row] = await insertUnderCeiling(productId, 'insights', count, (tx) => tx`
    insert into analytics_insights (id, product_id, name, description, kind, query, created_by)
    values (${randomUUID()}, ${productId}, ${input.name}, ${input.description ?? null}, ${input.kind}, ${query as never}::jsonb, ${createdBy})
    returning *`)
  await prepareRollups(productId, input.kind, query)
  return insightOut(row!)
}

export async function listInsights(productId: string, page: PageRequest = { limit: PAGE_DEFAULT }): Promise<Insight[]> {
  return (await keysetPage({
    what: 'insight', order: NEWEST_FIRST,
    cursor: (after) => sql`from analytics_insights where id = ${after} and product_id = ${productId}`,
    rows: sql`select * from analytics_insights where product_id = ${productId}`,
  }, page)).map(insightOut)
}

/** One insight of the product; another product's, an unknown id and a malformed id are all 404. */
export async function getInsight(productId: string, id: string): Promise<Insight> {
  const [row] = isUuid(id) ? await sql`select * from analytics_insights where id = ${id} and product_id = ${productId}` : []
  if (!row) throw notFound('Insight')
  return insightOut(row)
}

/** Changes only the supplied fields; a new query is checked against the insight's kind (the kind cannot change). */
export async function updateInsight(productId: string, id: string, input: { name?: string; description?: string | null; query?: unknown }): Promise<Insight> {
  const found = await getInsight(productId, id)
  const { kind } = found
  if (input.name === undefined && input.description === undefined && input.query === undefined) return found // nothing to write
  const query = input.query === undefined ? undefined : await checkQuery(kind, input.query)
  if (query) await prepareRollups(productId, kind, query)
  // Read and written under the row lock: two updates of different fields at once both stand.
  return sql.begin(async (tx) => {
    const [current] = await tx`select * from analytics_insights where id = ${id} and product_id = ${productId} for update`
    if (!current) throw notFound('Insight')
    const [row] = await tx`
      update analytics_insights set name = ${input.name ?? current.name},
        description = ${input.description === undefined ? current.description : input.description},
        query = ${(query ?? current.query) as never}::jsonb, updated_at = now()
      where id = ${id}
      returning *`
    // A kept result of the query before is never answered (its hash differs); dropped here so it is not kept either.
    if (query) {
      await tx`delete from analytics_insight_results r using analytics_insights i
        where r.insight_id = ${id} and i.id = r.insight_id and r.query_hash is distinct from ${QUERY_HASH}`
    }
    return insightOut(row!)
  })
}

export async function deleteInsight(productId: string, id: string): Promise<void> {
  if (!isUuid(id)) throw notFound('Insight')
  await sql.begin(async (tx) => {
    // The row lock waits for (and then sees) a dashboard being saved with this insight: saving takes a key-share lock
    // on the insights its tiles name, so either the dashboard is listed here or its save finds the insight gone.
    const [row] = await tx`select id from analytics_insights where id = ${id} and product_id = ${productId} for update`
    if (!row) throw notFound('Insight')
    const users = await tx`
      select d.id, d.slug from analytics_dashboard_insights di join analytics_dashboards d on d.id = di.dashboard_id
      where di.insight_id = ${id} order by d.slug`
    if (users.length) {
      throw new ApiError('insight_in_use',
        `The insight is used by ${users.length} dashboard(s): ${users.map((d) => d.slug).join(', ')}; remove its tiles first`,
        { dashboards: users.map((d) => ({ id: d.id as string, slug: d.slug as string })) })
    }
    await tx`delete from analytics_insights where id = ${id} and product_id = ${productId}`
  })
}

/** What a run may ask besides the insight: `refresh` (funnels), and `range`, another time range for this run only. */
export interface RunOptions extends FunnelRunOptions {
  range?: Range
}

/**
 * Runs a saved insight. A metric insight runs now (it reads rollups); a funnel insight answers its kept result while
 * fresher than the TTL, else computes it (docs/analytics.md, "Kept funnel results"). `computed_at`: the instant its
 * relative ranges were taken from. With `range`, the insight's query runs over that range instead, now, and nothing
 * is kept (a dashboard's date range, as PostHog's dashboard filter overrides its insights' ranges).
 */
export async function runInsight(productId: string, id: string, options: RunOptions = {}) {
  const insight = await getInsight(productId, id)
  const now = options.now ?? new Date()
  if (options.range) {
    const result = await runOverRange(productId, insight, options.range, now)
    return { insight_id: insight.id, kind: insight.kind, result, computed_at: now.toISOString(), cached: false }
  }
  if (insight.kind === 'funnel') {
    const { result, computedAt, cached } = await runFunnelInsight(productId, insight, options)
    return { insight_id: insight.id, kind: insight.kind, result, computed_at: computedAt.toISOString(), cached }
  }
  const result = await runMetricQuery(productId, insight.query as MetricQuery, '/query', now)
  return { insight_id: insight.id, kind: insight.kind, result, computed_at: now.toISOString(), cached: false }
}

/**
 * The insight's query with its range replaced, run now. Everything else was checked when the insight was saved, so
 * what the new range can break is the range itself (`/body/range/from`, `/to`) or the bucket count it makes, which is
 * said of the range too: the bucket is the insight's, the range is the caller's.
 */
async function runOverRange(productId: string, insight: Insight, range: Range, now: Date) {
  const query = { ...insight.query, range }
  try {
    return insight.kind === 'funnel'
      ? await runFunnel(productId, query as Funnel, '/body', now)
      : await runMetricQuery(productId, query as MetricQuery, '/body', now)
  } catch (error) {
    const fields = error instanceof ApiError ? (error.extra.fields as { path: string }[] | undefined) : undefined
    if (fields?.some((field) => field.path === '/body/bucket')) {
      throw invalid('/body/range', `spans more than ${config.analytics.maxBuckets} of the insight's ${(query as MetricQuery).bucket} buckets: choose a shorter range`)
    }
    throw error
  }
}
