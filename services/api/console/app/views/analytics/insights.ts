// The product's insights (analytics_insight_list, newest first, a page at a time), each opened in the builder, and
// deleted after asking in the page; one a dashboard uses is refused by the API, which names the dashboards.
import { api, describe } from '../../api'
import { h, replace, when } from '../../dom'
import { areaHref } from '../../router'
import type { Insight } from './builder'
import { summaryOf } from './query'

const PAGE = 20

export async function insightsView(root: HTMLElement, productId: string): Promise<void> {
  const body = h('tbody', {})
  const more = h('div', { class: 'list-more' })
  const status = h('p', { class: 'error', role: 'alert', 'data-testid': 'insights-error' })
  const empty = h('p', { class: 'muted', 'data-testid': 'no-insights' }, 'No insights yet: build one with New insight.')
  empty.hidden = true
  replace(root, h('section', { class: 'card', 'data-testid': 'insights' },
    h('div', { class: 'list-head' },
      h('h1', {}, 'Insights'),
      h('a', { class: 'button', href: areaHref(productId, 'analytics', 'insights', 'new'), 'data-action': 'new-insight' }, 'New insight')),
    status,
    h('div', { class: 'table-scroll' },
      h('table', { class: 'insights-table stacked' },
        h('thead', {}, h('tr', {}, ['Name', 'Kind', 'Query', 'Updated', ''].map((title) => h('th', {}, title)))),
        body)),
    empty,
    more))

  const row = (insight: Insight): HTMLElement => {
    const action = h('td', { class: 'row-action' })
    const offer = () => replace(action, h('button', { type: 'button', class: 'secondary small', 'data-action': 'delete-insight', onclick: ask }, 'Delete'))
    // Asked in the page (no window.confirm), in the row it deletes.
    const ask = () => replace(action, h('span', { class: 'confirm', 'data-testid': 'confirm-delete' },
      h('span', {}, 'Delete this insight?'), ' ',
      h('button', { type: 'button', class: 'small danger', 'data-action': 'confirm-delete', onclick: (event: Event) => void remove(event.target as HTMLButtonElement) }, 'Delete'), ' ',
      h('button', { type: 'button', class: 'secondary small', 'data-action': 'keep', onclick: offer }, 'Keep')))
    const remove = async (button: HTMLButtonElement) => {
      button.disabled = true
      replace(status)
      try {
        await api.run('analytics_insight_delete', { path: { id: insight.id } })
        tr.remove()
        empty.hidden = body.childElementCount > 0
      } catch (error) {
        replace(status, `"${insight.name}" not deleted: ${describe(error)}`)
        offer()
      }
    }
    offer()
    const tr = h('tr', { 'data-insight-id': insight.id },
      h('td', { class: 'wrap' }, h('a', { href: areaHref(productId, 'analytics', 'insights', insight.id), 'data-action': 'edit-insight' }, insight.name)),
      h('td', {}, insight.kind === 'metric' ? 'Trend' : 'Funnel'),
      h('td', { class: 'wrap muted' }, summaryOf(insight.kind, insight.query)),
      h('td', { class: 'nowrap' }, when(insight.updated_at)),
      action)
    return tr
  }

  const load = async (after?: string) => {
    replace(more, h('span', { class: 'muted' }, 'Loading…'))
    try {
      const page = await api.run<{ insights: Insight[]; has_more: boolean }>('analytics_insight_list', { query: { limit: PAGE, after } })
      body.append(...page.insights.map(row))
      empty.hidden = body.childElementCount > 0
      replace(more, page.has_more
        ? h('button', { type: 'button', class: 'secondary', 'data-action': 'more-insights', onclick: () => void load(page.insights.at(-1)!.id) }, 'Older insights')
        : null)
    } catch (error) {
      replace(more, h('span', { class: 'error', role: 'alert' }, describe(error)))
    }
  }
  await load()
}
