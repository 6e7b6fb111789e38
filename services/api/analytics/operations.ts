// Analytics area: the semantic catalog, metric queries and funnels over it, saved insights, and dashboards (the spec's six
// operations, plus version history and restore).
import Type from 'typebox'
import { defineOperation, productOf, userOf } from '../../../shared/catalog/operation'
import { iso, Strict, Timestamp, Uuid } from '../../../shared/catalog/schemas'
import { cutPage, HasMore, listed, pageOf, pageQuery } from '../../../shared/catalog/pagination'
import { catalogOf } from './semantic/catalog'
import { IDENTITY_KINDS, METRIC_TYPES } from './semantic/entity'
import { DashboardName, Slug, Tags, Tiles } from './dashboard-schemas'
import { runFunnel } from './semantic/funnel'
import { runMetricQuery } from './semantic/metric-query'
import { Funnel, MetricQuery, Range } from './semantic/query-schemas'
import {
  createDashboard, deleteDashboard, getDashboard, listDashboards, listVersions, restoreVersion, updateDashboard, VERSIONS_KEPT,
} from './dashboards'
import { createInsight, deleteInsight, getInsight, listInsights, runInsight, updateInsight, type Insight } from './insights'

// ---- catalog and queries

const Named = Strict({ name: Type.String(), description: Type.String() })
const CatalogSchema = Strict({
  product_id: Type.String(),
  generated_at: Type.String(),
  cycle: Type.Union([Strict({ from: Type.String(), to: Type.String() }), Type.Null()], { description: 'The current usage cycle: the calendar month, UTC' }),
  entities: Type.Array(Strict({
    entity: Type.String(), extensionSlug: Type.String(), entityName: Type.String(), description: Type.String(),
    timeColumn: Type.Union([Type.String(), Type.Null()]), propertiesColumn: Type.Union([Type.String(), Type.Null()]),
    dimensions: Type.Array(Named),
    metrics: Type.Array(Strict({ name: Type.String(), type: Type.Union(METRIC_TYPES.map((t) => Type.Literal(t))), description: Type.String() })),
    identityKinds: Type.Array(Type.Union(IDENTITY_KINDS.map((k) => Type.Literal(k)))),
  })),
})

export const catalogGet = defineOperation({
  id: 'analytics_catalog_get', method: 'GET', path: '/analytics/catalog', area: 'analytics', auth: 'product',
  summary: 'The semantic catalog: every chartable entity of the product with its dimensions, metrics and identity kinds',
  response: CatalogSchema,
  handler: async (_input, ctx) => catalogOf(productOf(ctx)) as never,
})

/** How fresh an answer is: with a replica configured, up to ANALYTICS_REPLICA_MAX_LAG_MS before the request. */
const AsOf = () => Timestamp('Every write acknowledged before this instant is counted; later ones may not be. ' +
  'The request\'s own time, or, when a streaming replica that is behind answered, the time it has replayed up to ' +
  '(never more than ANALYTICS_REPLICA_MAX_LAG_MS before the request)')
const Cell = Type.Union([Type.String(), Type.Number(), Type.Null()])
const MetricResultSchema = Strict({
  entity: Type.String(), metrics: Type.Array(Type.String()), dimensions: Type.Array(Type.String()),
  bucket: Type.Union([Type.String(), Type.Null()]), timezone: Type.String(), range: Strict({ from: Timestamp(), to: Timestamp() }),
  rows: Type.Array(Type.Record(Type.String(), Cell), { description: 'bucket (the start of the bucket, UTC), each dimension, each metric' }),
  truncated: Type.Boolean({ description: 'More rows matched than the limit' }),
  approximate: Type.Boolean({ description: 'Distinct identities came from rollup sketches: each within about 2 % of the exact count (counts are exact). exact: true in the query reads raw events' }),
  as_of: AsOf(),
})
const StepResult = Strict({
  step: Type.Integer(), entity: Type.String(), event: Type.String(), count: Type.Number(),
  conversionFromPrevious: Type.Union([Type.Number(), Type.Null()]), conversionFromFirst: Type.Union([Type.Number(), Type.Null()]),
})
const FunnelResultSchema = Strict({
  identity: Type.String(), windowDays: Type.Integer(), range: Strict({ from: Timestamp(), to: Timestamp() }),
  steps: Type.Array(StepResult),
  breakdown: Type.Optional(Type.Array(Strict({ value: Type.Union([Type.String(), Type.Null()]), steps: Type.Array(StepResult) }))),
  sampled: Type.Union([Type.Number(), Type.Null()], {
    description: 'The share of identities counted when the funnel asked for a sample (counts are scaled up from it); null: exact',
  }),
  as_of: AsOf(),
})

export const metricQuery = defineOperation({
  id: 'analytics_metric_query', method: 'POST', path: '/analytics/query', area: 'analytics', auth: 'product', rateClass: 'analytics',
  summary: 'Run a metric query: metrics of an entity over a time range, by dimensions and time bucket, filtered',
  description: 'Every name is resolved against the catalog. Empty buckets answer 0 (count, sum) or null (avg, ratio).',
  body: MetricQuery,
  response: MetricResultSchema,
  handler: async ({ body }, ctx) => runMetricQuery(productOf(ctx), body),
})

export const funnelRun = defineOperation({
  id: 'analytics_funnel_run', method: 'POST', path: '/analytics/funnel', area: 'analytics', auth: 'product', rateClass: 'analytics',
  summary: 'Run an ordered funnel of 2 to 10 steps joined on one identity kind, within a conversion window',
  body: Funnel,
  response: FunnelResultSchema,
  handler: async ({ body }, ctx) => runFunnel(productOf(ctx), body),
})

// ---- insights

const Kind = Type.Union([Type.Literal('metric'), Type.Literal('funnel')])
const InsightSchema = Strict({
  id: Uuid(), name: Type.String(), description: Type.Union([Type.String(), Type.Null()]), kind: Kind,
  query: Type.Unknown({ description: 'A metric query or a funnel, as analytics_metric_query / analytics_funnel_run take' }),
  created_by: Type.Union([Type.String(), Type.Null()]), created_at: Timestamp(), updated_at: Timestamp(),
})
const insightOut = (i: Insight) => ({
  id: i.id, name: i.name, description: i.description, kind: i.kind, query: i.query, created_by: i.createdBy,
  created_at: iso(i.createdAt), updated_at: iso(i.updatedAt),
})
const InsightName = () => Type.String({ minLength: 1, maxLength: 120 })
const Description = () => Type.Union([Type.String({ maxLength: 2000 }), Type.Null()])
const IdPath = (what: string) => Strict({ id: Type.String({ minLength: 1, maxLength: 64, description: `${what} id` }) })

export const insightCreate = defineOperation({
  id: 'analytics_insight_create', method: 'POST', path: '/analytics/insights', area: 'analytics', auth: 'product',
  summary: 'Save a metric query or a funnel as a named insight (checked against the catalog now); dashboard tiles name insights',
  body: Strict({ name: InsightName(), description: Type.Optional(Description()), kind: Kind, query: Type.Unknown({ description: 'MetricQuery for kind metric, Funnel for kind funnel' }) }),
  response: InsightSchema,
  handler: async ({ body }, ctx) => insightOut(await createInsight(productOf(ctx), body as never, userOf(ctx))),
})

export const insightList = defineOperation({
  id: 'analytics_insight_list', method: 'GET', path: '/analytics/insights', area: 'analytics', auth: 'product',
  summary: "List the product's insights, newest first (paginated)",
  query: Strict(pageQuery('insight')),
  response: Strict({ insights: Type.Array(InsightSchema), has_more: HasMore() }),
  handler: ({ query }, ctx) => listed('insights', query, (page) => listInsights(productOf(ctx), page), insightOut),
})

export const insightGet = defineOperation({
  id: 'analytics_insight_get', method: 'GET', path: '/analytics/insights/{id}', area: 'analytics', auth: 'product',
  summary: 'Get one insight',
  params: IdPath('Insight'),
  response: InsightSchema,
  handler: async ({ params }, ctx) => insightOut(await getInsight(productOf(ctx), params.id)),
})

export const insightUpdate = defineOperation({
  id: 'analytics_insight_update', method: 'PATCH', path: '/analytics/insights/{id}', area: 'analytics', auth: 'product',
  summary: 'Change an insight; only the supplied fields change (its kind cannot); a new query is checked against the catalog',
  params: IdPath('Insight'),
  body: Strict({ name: Type.Optional(InsightName()), description: Type.Optional(Description()), query: Type.Optional(Type.Unknown()) }),
  response: InsightSchema,
  handler: async ({ params, body }, ctx) => insightOut(await updateInsight(productOf(ctx), params.id, body)),
})

export const insightDelete = defineOperation({
  id: 'analytics_insight_delete', method: 'DELETE', path: '/analytics/insights/{id}', area: 'analytics', auth: 'product',
  summary: 'Delete an insight that no dashboard uses (409 naming the dashboards otherwise)',
  params: IdPath('Insight'),
  response: Strict({ id: Type.String(), deleted: Type.Literal(true) }),
  handler: async ({ params }, ctx) => {
    await deleteInsight(productOf(ctx), params.id)
    return { id: params.id, deleted: true as const }
  },
})

export const insightRun = defineOperation({
  id: 'analytics_insight_run', method: 'POST', path: '/analytics/insights/{id}/run', area: 'analytics', auth: 'product',
  rateClass: 'analytics',
  summary: 'Run a saved insight: a metric insight now; a funnel insight answers its kept result while fresh (computed_at, cached: true), else computes it',
  description: 'A funnel\'s result is kept ANALYTICS_FUNNEL_RESULT_TTL_MS (15 min), refreshed in the background while a dashboard ' +
    'uses it; relative ranges (-7d) count from computed_at. `refresh: true` computes anew; `range` runs over another range for ' +
    'this run only (computed now, never kept).',
  params: IdPath('Insight'),
  body: Strict({
    refresh: Type.Optional(Type.Boolean({ description: 'Compute a new result now even when a fresh one is kept (funnel insights; metric insights always run now)' })),
    range: Type.Optional(Range),
  }),
  response: Strict({
    insight_id: Type.String(), kind: Kind, result: Type.Union([MetricResultSchema, FunnelResultSchema]),
    computed_at: Timestamp('When the result was computed: relative ranges were taken from this instant (its as_of says how fresh its data was then)'),
    cached: Type.Boolean({ description: 'true: a kept result, computed by an earlier run or the background refresh; false: computed for this run' }),
  }),
  handler: async ({ params, body }, ctx) => runInsight(productOf(ctx), params.id, { refresh: body?.refresh === true, range: body?.range }) as never,
})

// ---- dashboards (the spec's six operations) and their history

const TileOut = Type.Unknown({ description: 'A tile as stored: id, type, insight_id or markdown, title, layout' })
const DashboardSchema = Strict({
  id: Uuid(), product_id: Uuid(), slug: Type.String(), name: Type.String(), tags: Type.Array(Type.String()),
  tiles: Type.Array(TileOut), created_by: Type.Union([Type.String(), Type.Null()]), created_at: Timestamp(), updated_at: Timestamp(),
})
const DashboardId = Strict({ id: Uuid('Dashboard id (slugs are not accepted here)') })

export const dashboardList = defineOperation({
  id: 'analytics_dashboard_list', method: 'GET', path: '/analytics/dashboards', area: 'analytics', auth: 'product',
  summary: "List the product's dashboards, newest first (definitions only, not results; paginated)",
  query: Strict({
    tag: Type.Optional(Type.String({ maxLength: 40, description: 'Exact tag match' })),
    q: Type.Optional(Type.String({ maxLength: 120, description: 'Case-insensitive substring of the name or the slug' })),
    ...pageQuery('dashboard'),
  }),
  response: Strict({ dashboards: Type.Array(DashboardSchema), has_more: HasMore() }),
  handler: ({ query }, ctx) => listed('dashboards', query, (page) => listDashboards(productOf(ctx), { tag: query.tag, q: query.q }, page), (dashboard) => dashboard),
})

export const dashboardCreate = defineOperation({
  id: 'analytics_dashboard_create', method: 'POST', path: '/analytics/dashboards', area: 'analytics', auth: 'product',
  summary: 'Store a dashboard: tiles on a 12-column grid, each naming an insight of the product or holding markdown (not run)',
  body: Strict({ slug: Slug(), name: DashboardName(), tiles: Tiles, tags: Type.Optional(Tags()) }),
  response: DashboardSchema,
  handler: async ({ body }, ctx) => createDashboard(productOf(ctx), body as never, userOf(ctx)),
})

export const dashboardGet = defineOperation({
  id: 'analytics_dashboard_get', method: 'GET', path: '/analytics/dashboards/{idOrSlug}', area: 'analytics', auth: 'product',
  summary: 'Get a dashboard by slug or uuid (tiles and layout, not results)',
  params: Strict({ idOrSlug: Type.String({ minLength: 1, maxLength: 64 }) }),
  response: DashboardSchema,
  handler: async ({ params }, ctx) => getDashboard(productOf(ctx), params.idOrSlug),
})

export const dashboardUpdate = defineOperation({
  id: 'analytics_dashboard_update', method: 'PATCH', path: '/analytics/dashboards/{id}', area: 'analytics', auth: 'product',
  summary: 'Change a dashboard: only the supplied fields change; tiles replaces the whole arrangement; the slug cannot change',
  params: DashboardId,
  body: Strict({ name: Type.Optional(DashboardName()), tiles: Type.Optional(Tiles), tags: Type.Optional(Tags()) }),
  response: DashboardSchema,
  handler: async ({ params, body }, ctx) => updateDashboard(productOf(ctx), params.id, body as never, userOf(ctx)),
})

export const dashboardDelete = defineOperation({
  id: 'analytics_dashboard_delete', method: 'DELETE', path: '/analytics/dashboards/{id}', area: 'analytics', auth: 'product',
  summary: 'Delete a dashboard; the insights its tiles named stay',
  params: DashboardId,
  response: Strict({ id: Uuid(), deleted: Type.Literal(true) }),
  handler: async ({ params }, ctx) => {
    await deleteDashboard(productOf(ctx), params.id)
    return { id: params.id, deleted: true as const }
  },
})

const VersionSchema = Strict({
  version: Type.Integer(), reason: Type.String(), created_by: Type.Union([Type.String(), Type.Null()]), created_at: Timestamp(),
  definition: Strict({ name: Type.String(), tags: Type.Array(Type.String()), tiles: Type.Array(TileOut) }),
})

export const dashboardVersions = defineOperation({
  id: 'analytics_dashboard_versions_list', method: 'GET', path: '/analytics/dashboards/{id}/versions', area: 'analytics', auth: 'product',
  summary: `Every kept version of a dashboard, newest first (the last ${VERSIONS_KEPT}; paginated): who, when, why, and the whole definition`,
  params: DashboardId,
  query: Strict(pageQuery('version', Type.Integer({
    minimum: 1, maximum: 2_147_483_647, description: 'The version number of the last version of the previous page: the page after it',
  }))),
  response: Strict({ versions: Type.Array(VersionSchema), has_more: HasMore() }),
  handler: async ({ params, query }, ctx) => {
    const page = pageOf(query)
    const { items, has_more } = cutPage(await listVersions(productOf(ctx), params.id, page), page)
    return { versions: items, has_more }
  },
})

export const dashboardRestore = defineOperation({
  id: 'analytics_dashboard_restore', method: 'POST', path: '/analytics/dashboards/{id}/restore', area: 'analytics', auth: 'product',
  summary: 'Make an earlier version current again; the restore is itself a new version',
  params: DashboardId,
  body: Strict({ version: Type.Integer({ minimum: 1, maximum: 2_147_483_647 }) }),
  response: DashboardSchema,
  handler: async ({ params, body }, ctx) => restoreVersion(productOf(ctx), params.id, body.version, userOf(ctx)),
})

export const analyticsOperations = [
  catalogGet, metricQuery, funnelRun,
  insightCreate, insightList, insightGet, insightUpdate, insightDelete, insightRun,
  dashboardList, dashboardCreate, dashboardGet, dashboardUpdate, dashboardDelete, dashboardVersions, dashboardRestore,
]
