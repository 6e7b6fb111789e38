// Analytics: the product's dashboards (list, one drawn on its grid, edited, its history), its insights (list, built
// and edited in the page) and the semantic catalog.
// Routes: #/p/{id}/analytics (dashboards), …/analytics/dashboards/{idOrSlug}, …/analytics/insights,
// …/analytics/insights/new, …/analytics/insights/{id}, …/analytics/catalog.
import { describe } from '../../api'
import { h, replace } from '../../dom'
import { areaHref } from '../../router'
import type { AreaView } from '../area'
import { insightBuilder } from './builder'
import { catalogView } from './catalog'
import { dashboardView } from './dashboard'
import { dashboardList } from './dashboards'
import { insightsView } from './insights'

const TABS: [string, string][] = [['dashboards', 'Dashboards'], ['insights', 'Insights'], ['catalog', 'Catalog']]

export const analyticsView: AreaView = async ({ root, productId, rest }) => {
  const [section, id] = rest
  const tab = section === 'catalog' || section === 'insights' ? section : 'dashboards'
  const content = h('div', { class: 'analytics-area' }) // area.css scopes every rule under it
  replace(root,
    h('nav', { class: 'tabs' }, TABS.map(([name, title]) =>
      h('a', { href: name === 'dashboards' ? areaHref(productId, 'analytics') : areaHref(productId, 'analytics', name), class: tab === name ? 'active' : '', 'data-tab': name }, title))),
    content)
  try {
    if (section === 'catalog') return await catalogView(content)
    if (section === 'insights' && id) return await insightBuilder(content, productId, id === 'new' ? undefined : id)
    if (section === 'insights') return await insightsView(content, productId)
    if (section === 'dashboards' && id) return await dashboardView(content, productId, id)
    return await dashboardList(content, productId)
  } catch (failure) {
    // Under the tabs, so the reader can go elsewhere in the area (a dashboard deleted meanwhile is a 404 here).
    replace(content, h('p', { class: 'error', role: 'alert' }, describe(failure)))
  }
}
