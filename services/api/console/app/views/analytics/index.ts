// Analytics: the product's dashboards (list, one drawn on its grid, edited, its history) and the semantic catalog.
// Routes: #/p/{id}/analytics (dashboards), …/analytics/dashboards/{idOrSlug}, …/analytics/catalog.
import { describe } from '../../api'
import { readAll } from '../../lists'
import { breakable, count, h, replace, table, when } from '../../dom'
import { areaHref } from '../../router'
import type { AreaView } from '../area'
import { catalogView } from './catalog'
import { type Dashboard, dashboardView } from './dashboard'

const MAX_LISTED = 500 // PRODUCT_MAX_DASHBOARDS: the list never holds more

export const analyticsView: AreaView = async ({ root, productId, rest }) => {
  const [section, id] = rest
  const tab = section === 'catalog' ? 'catalog' : 'dashboards'
  const content = h('div', { class: 'analytics-area' }) // area.css scopes every rule under it
  replace(root,
    h('nav', { class: 'tabs' },
      h('a', { href: areaHref(productId, 'analytics'), class: tab === 'dashboards' ? 'active' : '' }, 'Dashboards'),
      h('a', { href: areaHref(productId, 'analytics', 'catalog'), class: tab === 'catalog' ? 'active' : '' }, 'Catalog')),
    content)
  try {
    if (section === 'catalog') return await catalogView(content)
    if (section === 'dashboards' && id) return await dashboardView(content, productId, id)
    return await dashboardList(content, productId)
  } catch (failure) {
    // Under the tabs, so the reader can go elsewhere in the area (a dashboard deleted meanwhile is a 404 here).
    replace(content, h('p', { class: 'error', role: 'alert' }, describe(failure)))
  }
}

async function dashboardList(root: HTMLElement, productId: string): Promise<void> {
  replace(root, h('p', { class: 'muted' }, 'Loading dashboards…'))
  const dashboards = await readAll<Dashboard>('analytics_dashboard_list', 'dashboards', { max: MAX_LISTED })
  replace(root, h('section', { class: 'card', 'data-testid': 'dashboards' },
    h('h1', {}, 'Dashboards'),
    dashboards.length
      ? table(dashboards, [
        ['name', (dashboard) => h('a', { href: areaHref(productId, 'analytics', 'dashboards', dashboard.id), 'data-dashboard-id': dashboard.id }, dashboard.name)],
        ['slug', (dashboard) => h('code', {}, breakable(dashboard.slug))],
        ['tags', (dashboard) => dashboard.tags.map((tag) => h('span', { class: 'tag' }, breakable(tag)))],
        ['tiles', (dashboard) => count(dashboard.tiles.length)],
        ['updated', (dashboard) => when(dashboard.updated_at)],
      ])
      : h('p', { class: 'muted' }, 'No dashboards yet: create one with analytics_dashboard_create (REST, or an agent over MCP).'),
  ))
}
