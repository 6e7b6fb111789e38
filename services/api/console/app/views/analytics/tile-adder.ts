// "Add tile" on a dashboard: a panel that lists the product's insights (analytics_insight_list, every page) to pick
// one for a new tile, or takes a text tile's markdown; the dashboard page places and saves it.
import { describe } from '../../api'
import { h, replace } from '../../dom'
import { readAll } from '../../lists'
import { areaHref } from '../../router'
import type { Insight } from './builder'
import { summaryOf } from './query'

const MAX_LISTED = 2000 // PRODUCT_MAX_INSIGHTS: the list never holds more
// A text tile's bounds (dashboard-schemas.ts).
const MAX_MARKDOWN = 4000
const MAX_TITLE = 120

/** What a new tile holds; where it goes is the dashboard's to decide. */
export type NewTile = { type: 'insight'; insight_id: string } | { type: 'text'; markdown: string; title: string | null }

export class TileAdder {
  readonly element = h('section', { class: 'card tile-adder', 'data-testid': 'tile-adder' })

  /** `add` saves the new tile; whether it was saved (the panel closes then). */
  constructor(private readonly productId: string, private readonly add: (tile: NewTile) => Promise<boolean>) {
    this.element.hidden = true
  }

  close(): void {
    this.element.hidden = true
    replace(this.element)
  }

  async open(): Promise<void> {
    this.element.hidden = false
    replace(this.element, h('p', { class: 'muted' }, 'Loading insights…'))
    let insights: Insight[]
    try {
      insights = await readAll<Insight>('analytics_insight_list', 'insights', { max: MAX_LISTED })
    } catch (error) {
      replace(this.element, h('p', { class: 'error', role: 'alert' }, describe(error)), this.cancel())
      return
    }
    const create = h('a', { href: areaHref(this.productId, 'analytics', 'insights', 'new') }, 'build a new insight')
    const select = h('select', { 'data-field': 'tile-insight', 'aria-label': 'Insight' },
      insights.map((insight) => h('option', { value: insight.id }, `${insight.name} (${summaryOf(insight.kind, insight.query)})`)))
    const title = h('input', { 'data-field': 'tile-title', maxlength: MAX_TITLE, placeholder: 'none' })
    const markdown = h('textarea', { 'data-field': 'tile-markdown', rows: 4, maxlength: MAX_MARKDOWN, placeholder: '**Markdown**: headings, lists, links, `code`' })
    replace(this.element,
      h('h2', {}, 'Add a tile'),
      insights.length
        ? h('div', { class: 'form-row' }, h('label', { class: 'grow' }, 'An insight', select),
          this.button('confirm-add-tile', 'Add insight', () => ({ type: 'insight', insight_id: select.value })))
        : h('p', {}, 'This product has no insights yet: ', create, '.'),
      h('div', { class: 'form-row' },
        h('label', {}, 'Or text: a title (optional)', title),
        h('label', { class: 'grow' }, 'Markdown', markdown),
        this.button('confirm-add-text', 'Add text', () => ({ type: 'text', markdown: markdown.value, title: title.value.trim() || null }))),
      h('p', { class: 'muted' }, 'A tile goes below the others, half the grid wide; move it with Edit layout. ', insights.length ? ['Or ', create, '.'] : null),
      this.cancel())
  }

  private button(action: string, label: string, tile: () => NewTile): HTMLButtonElement {
    const button = h('button', { type: 'button', 'data-action': action }, label)
    button.addEventListener('click', async () => {
      button.disabled = true
      if (await this.add(tile())) this.close()
      else button.disabled = false
    })
    return button
  }

  private cancel(): HTMLElement {
    return h('button', { type: 'button', class: 'secondary', 'data-action': 'cancel-add-tile', onclick: () => this.close() }, 'Cancel')
  }
}
