// The product's dashboards (analytics_dashboard_list, every page), a new one made with analytics_dashboard_create
// (a name and its slug; tiles are added on the dashboard), and one deleted after asking in the page.
import { api, describe } from '../../api'
import { breakable, count, h, replace, table, when } from '../../dom'
import { readAll } from '../../lists'
import { areaHref, go } from '../../router'
import type { Dashboard } from './dashboard'

const MAX_LISTED = 500 // PRODUCT_MAX_DASHBOARDS: the list never holds more
const MAX_NAME = 120
const MAX_SLUG = 64

/** A slug the API takes (^[a-z0-9][a-z0-9-]{1,63}$) made from a name: lower case, accents dropped, dashes for the rest. */
export function slugOf(name: string): string {
  const slug = name.normalize('NFKD').replace(/\p{M}/gu, '').toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, MAX_SLUG).replace(/-+$/, '')
  return slug.length >= 2 ? slug : ''
}

export async function dashboardList(root: HTMLElement, productId: string): Promise<void> {
  replace(root, h('p', { class: 'muted' }, 'Loading dashboards…'))
  const dashboards = await readAll<Dashboard>('analytics_dashboard_list', 'dashboards', { max: MAX_LISTED })
  const status = h('p', { class: 'error', role: 'alert', 'data-testid': 'dashboards-error' })
  const rows = table(dashboards, [
    ['name', (dashboard) => h('a', { href: areaHref(productId, 'analytics', 'dashboards', dashboard.id), 'data-dashboard-id': dashboard.id }, dashboard.name)],
    ['slug', (dashboard) => h('code', {}, breakable(dashboard.slug))],
    ['tags', (dashboard) => dashboard.tags.map((tag) => h('span', { class: 'tag' }, breakable(tag)))],
    ['tiles', (dashboard) => count(dashboard.tiles.length)],
    ['updated', (dashboard) => when(dashboard.updated_at)],
    ['', (dashboard) => deleteButton(dashboard, status)],
  ], { class: 'dashboards-table stacked' })
  replace(root,
    h('section', { class: 'card', 'data-testid': 'dashboards' },
      h('h1', {}, 'Dashboards'),
      status,
      dashboards.length
        ? h('div', { class: 'table-scroll' }, rows)
        : h('p', { class: 'muted' }, 'No dashboards yet: make one below, then add insights to it.')),
    newDashboardForm(productId))
}

function deleteButton(dashboard: Dashboard, status: HTMLElement): HTMLElement {
  const cell = h('span', { class: 'row-action' })
  const offer = () => replace(cell, h('button', { type: 'button', class: 'secondary small', 'data-action': 'delete-dashboard', onclick: ask }, 'Delete'))
  // Asked in the page (no window.confirm); the insights on its tiles stay.
  const ask = () => replace(cell, h('span', { class: 'confirm', 'data-testid': 'confirm-delete' },
    h('span', {}, 'Delete this dashboard? Its insights stay.'), ' ',
    h('button', { type: 'button', class: 'small danger', 'data-action': 'confirm-delete', onclick: (event: Event) => void remove(event.target as HTMLButtonElement) }, 'Delete'), ' ',
    h('button', { type: 'button', class: 'secondary small', 'data-action': 'keep', onclick: offer }, 'Keep')))
  const remove = async (button: HTMLButtonElement) => {
    button.disabled = true
    replace(status)
    try {
      await api.run('analytics_dashboard_delete', { path: { id: dashboard.id, idOrSlug: dashboard.id } })
      cell.closest('tr')?.remove()
    } catch (error) {
      replace(status, `"${dashboard.name}" not deleted: ${describe(error)}`)
      offer()
    }
  }
  offer()
  return cell
}

function newDashboardForm(productId: string): HTMLElement {
  const name = h('input', { 'data-field': 'dashboard-name', required: true, maxlength: MAX_NAME, placeholder: 'Growth' })
  const slug = h('input', { 'data-field': 'dashboard-slug', required: true, maxlength: MAX_SLUG, placeholder: 'growth' })
  const status = h('p', { class: 'error', role: 'alert', 'data-testid': 'new-dashboard-error' })
  // The slug follows the name until the reader types one of their own.
  let slugTyped = false
  name.addEventListener('input', () => { if (!slugTyped) slug.value = slugOf(name.value) })
  slug.addEventListener('input', () => { slugTyped = slug.value !== '' })
  const create = async (event: Event) => {
    event.preventDefault()
    const button = (event.target as HTMLFormElement).querySelector('button')!
    button.disabled = true
    replace(status)
    try {
      const created = await api.run<Dashboard>('analytics_dashboard_create', { body: { name: name.value.trim(), slug: slug.value.trim(), tiles: [] } })
      go(areaHref(productId, 'analytics', 'dashboards', created.id))
    } catch (error) {
      replace(status, `Not created: ${describe(error)}`)
      button.disabled = false
    }
  }
  return h('form', { class: 'card new-dashboard', 'data-testid': 'new-dashboard', onsubmit: (event: Event) => void create(event) },
    h('h2', {}, 'New dashboard'),
    h('div', { class: 'form-row' }, h('label', {}, 'Name', name), h('label', {}, 'Slug (its address; cannot change)', slug)),
    h('button', { type: 'submit', 'data-action': 'create-dashboard' }, 'Create dashboard'),
    status)
}
