// Dashboards: arrangements of tiles on a 12-column grid, stored, never run. Every tile's insight must exist in the same
// product (kept as rows of analytics_dashboard_insights, whose foreign key stops an insight in use from being deleted).
// Every create, update and restore keeps a version: who, when, and the whole definition (Grafana-style history).
import { randomUUID } from 'node:crypto'
import type postgres from 'postgres'
import { requireCursor, type PageRequest, PAGE_DEFAULT } from '../../../shared/catalog/pagination'
import { checkCeiling } from '../../../shared/db/ceiling'
import { sql } from '../../../shared/db/client'
import { keysetPage, NEWEST_FIRST } from '../../../shared/db/keyset'
import { ApiError, badRequest, conflict, notFound, unprocessable } from '../../../shared/errors'
import { isUuid } from '../../../shared/ids'
import { isPgError } from '../../../shared/db/error-codes'

/** Versions kept per dashboard; older ones are dropped when a new one is written. */
export const VERSIONS_KEPT = 50

interface Layout { x: number; y: number; w: number; h: number }
export type TileInput =
  | { id?: string; type: 'insight'; insight_id: string; title?: string | null; layout: Layout }
  | { id?: string; type: 'text'; markdown: string; title?: string | null; layout: Layout }
export type Tile = TileInput & { id: string; title: string | null }

export interface Dashboard {
  id: string
  product_id: string
  slug: string
  name: string
  tags: string[]
  tiles: Tile[]
  created_by: string | null
  created_at: string
  updated_at: string
}

const dashboardOut = (row: Record<string, any>): Dashboard => ({
  id: row.id, product_id: row.product_id, slug: row.slug, name: row.name, tags: row.tags, tiles: row.tiles,
  created_by: row.created_by, created_at: new Date(row.created_at).toISOString(), updated_at: new Date(row.updated_at).toISOString(),
})

type Tx = postgres.TransactionSql

/** Tiles as stored: ids assigned where absent (unique within the dashboard), title null by default, fields in spec order. */
function normalizeTiles(tiles: TileInput[]): Tile[] {
  const seen = new Set<string>()
  return tiles.map((tile, i) => {
    const id = (tile.id ?? randomUUID()).toLowerCase() // a uuid in any case is the same id
    if (seen.has(id)) throw badRequest(`Invalid request: /body/tiles/${i}/id is used by another tile`, [{ path: `/body/tiles/${i}/id`, message: 'is used by another tile of this dashboard' }])
    seen.add(id)
    const { x, y, w, h } = tile.layout
    return tile.type === 'insight'
      ? { id, type: 'insight', insight_id: tile.insight_id.toLowerCase(), title: tile.title ?? null, layout: { x, y, w, h } }
      : { id, type: 'text', markdown: tile.markdown, title: tile.title ?? null, layout: { x, y, w, h } }
  })
}

/** Every insight a tile names is one of the product's, else 422 naming the first tile that does not resolve. */
async function checkInsights(tx: Tx, productId: string, tiles: Tile[]): Promise<string[]> {
  const ids = [...new Set(tiles.flatMap((t) => (t.type === 'insight' ? [t.insight_id] : [])))]
  if (ids.length === 0) return []
  // Locked while the dashboard is written, so the insight cannot be deleted in between.
  const found = new Set((await tx`select id from analytics_insights where product_id = ${productId} and id = any(${ids}::uuid[]) for key share`).map((r) => r.id as string))
  const index = tiles.findIndex((t) => t.type === 'insight' && !found.has(t.insight_id))
  if (index >= 0) {
    const tile = tiles[index] as Extract<Tile, { type: 'insight' }>
    throw unprocessable(`Tile ${index} names insight ${tile.insight_id}, which is not an insight of this product`,
      [{ path: `/body/tiles/${index}/insight_id`, message: 'names no insight of this product' }])
  }
  return ids
}

async function linkInsights(tx: Tx, dashboardId: string, insightIds: string[]): Promise<void> {
  await tx`delete from analytics_dashboard_insights where dashboard_id = ${dashboardId}`
  if (insightIds.length) {
    await tx`insert into analytics_dashboard_insights (dashboard_id, insight_id) select ${dashboardId}, unnest(${insightIds}::uuid[])`
  }
}

async function keepVersion(tx: Tx, dashboard: Dashboard, createdBy: string | null, reason: string): Promise<void> {
  const definition = { name: dashboard.name, tags: dashboard.tags, tiles: dashboard.tiles }
  await tx`
    insert into analytics_dashboard_versions (dashboard_id, version, definition, created_by, reason)
    select ${dashboard.id}, coalesce(max(version), 0) + 1, ${definition as never}::jsonb, ${createdBy}, ${reason}
    from analytics_dashboard_versions where dashboard_id = ${dashboard.id}`
  await tx`
    delete from analytics_dashboard_versions where dashboard_id = ${dashboard.id}
      and version <= (select max(version) from analytics_dashboard_versions where dashboard_id = ${dashboard.id}) - ${VERSIONS_KEPT}`
}

const slugTaken = (slug: string) => conflict(`A dashboard with slug ${slug} already exists in this product`, [{ path: '/body/slug', message: 'is already used by another dashboard' }])

export async function createDashboard(
  productId: string, input: { slug: string; name: string; tiles: TileInput[]; tags?: string[] }, createdBy: string | null,
): Promise<Dashboard> {
  const tiles = normalizeTiles(input.tiles)
  try {
    return await sql.begin(async (tx) => {
      await checkCeiling(tx, productId, 'dashboards', (q) => q<{ n: number }[]>`
        select count(*)::int as n from analytics_dashboards where product_id = ${productId}`)
      const insightIds = await checkInsights(tx, productId, tiles)
      const [row] = await tx`
        insert into analytics_dashboards (product_id, slug, name, tags, tiles, created_by)
        values (${productId}, ${input.slug}, ${input.name}, ${input.tags ?? []}::text[], ${tiles as never}::jsonb, ${createdBy})
        returning *`
      const dashboard = dashboardOut(row!)
      await linkInsights(tx, dashboard.id, insightIds)
      await keepVersion(tx, dashboard, createdBy, 'create')
      return dashboard
    })
  } catch (error) {
    if (isPgError(error, 'uniqueViolation')) throw slugTaken(input.slug)
    throw error
  }
}

/** Newest first; `tag` an exact tag, `q` a case-insensitive substring of the name or the slug. */
export async function listDashboards(
  productId: string, filter: { tag?: string; q?: string }, page: PageRequest = { limit: PAGE_DEFAULT },
): Promise<Dashboard[]> {
  // The cursor is any dashboard of the product, matching the filter or not: its position in the order is what counts.
  const rows = await keysetPage({
    what: 'dashboard', order: NEWEST_FIRST,
    cursor: (after) => sql`from analytics_dashboards where id = ${after} and product_id = ${productId}`,
    rows: sql`
      select * from analytics_dashboards where product_id = ${productId}
      ${filter.tag !== undefined ? sql`and ${filter.tag} = any(tags)` : sql``}
      ${filter.q !== undefined ? sql`and (strpos(lower(name), lower(${filter.q})) > 0 or strpos(slug, lower(${filter.q})) > 0)` : sql``}`,
  }, page)
  return rows.map(dashboardOut)
}

/** By uuid or by slug (a uuid-shaped value is looked up as an id first, then as a slug). */
export async function getDashboard(productId: string, idOrSlug: string): Promise<Dashboard> {
  const [row] = isUuid(idOrSlug)
    ? await sql`select * from analytics_dashboards where product_id = ${productId} and (id = ${idOrSlug} or slug = ${idOrSlug.toLowerCase()}) order by (id = ${idOrSlug}) desc limit 1`
    : await sql`select * from analytics_dashboards where product_id = ${productId} and slug = ${idOrSlug}`
  if (!row) throw notFound('Dashboard')
  return dashboardOut(row)
}

/** PATCH: only the supplied fields change (none: nothing is written); `tiles` replaces the whole arrangement; the slug never changes. */
export async function updateDashboard(
  productId: string, id: string, patch: { name?: string; tiles?: TileInput[]; tags?: string[] }, updatedBy: string | null, reason = 'update',
): Promise<Dashboard> {
  const tiles = patch.tiles === undefined ? undefined : normalizeTiles(patch.tiles)
  return sql.begin(async (tx) => {
    const [current] = await tx`select * from analytics_dashboards where id = ${id} and product_id = ${productId} for update`
    if (!current) throw notFound('Dashboard')
    // Nothing to change: no new version, and `updated_at` keeps telling when something last did.
    if (patch.name === undefined && tiles === undefined && patch.tags === undefined) return dashboardOut(current)
    const insightIds = tiles === undefined ? undefined : await checkInsights(tx, productId, tiles)
    const [row] = await tx`
      update analytics_dashboards set
        name = ${patch.name ?? current.name},
        tags = ${patch.tags ?? current.tags}::text[],
        tiles = ${(tiles ?? current.tiles) as never}::jsonb,
        updated_at = now()
      where id = ${id}
      returning *`
    const dashboard = dashboardOut(row!)
    if (insightIds !== undefined) await linkInsights(tx, id, insightIds)
    await keepVersion(tx, dashboard, updatedBy, reason)
    return dashboard
  })
}

export async function deleteDashboard(productId: string, id: string): Promise<void> {
  const [row] = await sql`delete from analytics_dashboards where id = ${id} and product_id = ${productId} returning id`
  if (!row) throw notFound('Dashboard')
}

export interface DashboardVersion {
  version: number
  reason: string
  created_by: string | null
  created_at: string
  definition: { name: string; tags: string[]; tiles: Tile[] }
}

/** The kept versions of a dashboard, newest first. */
export async function listVersions(productId: string, id: string, page: PageRequest<number> = { limit: PAGE_DEFAULT }): Promise<DashboardVersion[]> {
  await getDashboardById(productId, id)
  if (page.after !== undefined) {
    requireCursor(await sql`select 1 from analytics_dashboard_versions where dashboard_id = ${id} and version = ${page.after}`, 'version')
  }
  const rows = await sql`
    select * from analytics_dashboard_versions where dashboard_id = ${id}
    ${page.after !== undefined ? sql`and version < ${page.after}` : sql``}
    order by version desc limit ${page.limit + 1}`
  return rows.map((r) => ({ version: r.version, reason: r.reason, created_by: r.created_by, created_at: new Date(r.created_at).toISOString(), definition: r.definition }))
}

async function getDashboardById(productId: string, id: string): Promise<Dashboard> {
  const [row] = await sql`select * from analytics_dashboards where id = ${id} and product_id = ${productId}`
  if (!row) throw notFound('Dashboard')
  return dashboardOut(row)
}

/** Makes an earlier version current again, as a new version (history is never rewritten). */
export async function restoreVersion(productId: string, id: string, version: number, restoredBy: string | null): Promise<Dashboard> {
  await getDashboardById(productId, id)
  const [row] = await sql`select definition from analytics_dashboard_versions where dashboard_id = ${id} and version = ${version}`
  if (!row) throw new ApiError('not_found', `Version ${version} of this dashboard is not kept (the last ${VERSIONS_KEPT} are)`)
  const definition = row.definition as DashboardVersion['definition']
  try {
    return await updateDashboard(productId, id, definition, restoredBy, `restore of version ${version}`)
  } catch (error) {
    if (error instanceof ApiError && error.status === 422) {
      throw unprocessable(`Version ${version} cannot be restored: ${error.message} (it was deleted since)`, (error.extra.fields as never) ?? undefined)
    }
    throw error
  }
}
