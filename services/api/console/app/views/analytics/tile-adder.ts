// "Add insight" on a dashboard: a panel that lists the product's insights (analytics_insight_list, every page) to
// pick one for a new tile; the dashboard page places and saves it.
import { describe } from '../../api'
import { h, replace } from '../../dom'
import { readAll } from '../../lists'
import { areaHref } from '../../router'
import type { Insight } from './builder'
import { summaryOf } from './query'

const MAX_LISTED = 2000 // PRODUCT_MAX_INSIGHTS: the list never holds more

export class TileAdder {
  readonly element = h('section', { class: 'card tile-adder', 'data-testid': 'tile-adder' })

  /** `add` saves a tile of the insight picked; whether it was saved (the panel closes then). */
  constructor(private readonly productId: string, private readonly add: (insightId: string) => Promise<boolean>) {
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
    if (!insights.length) {
      replace(this.element, h('p', {}, 'This product has no insights yet: ', create, '.'), this.cancel())
      return
    }
    const select = h('select', { 'data-field': 'tile-insight', 'aria-label': 'Insight' },
      insights.map((insight) => h('option', { value: insight.id }, `${insight.name} (${summaryOf(insight.kind, insight.query)})`)))
    const add = h('button', { type: 'button', 'data-action': 'confirm-add-tile' }, 'Add tile')
    add.addEventListener('click', async () => {
      add.disabled = true
      if (await this.add(select.value)) this.close()
      else add.disabled = false
    })
    replace(this.element,
      h('h2', {}, 'Add an insight'),
      h('div', { class: 'form-row' }, h('label', { class: 'grow' }, 'Insight', select), add, this.cancel()),
      h('p', { class: 'muted' }, 'The tile goes below the others, half the grid wide; move it with Edit layout. Or ', create, '.'))
  }

  private cancel(): HTMLElement {
    return h('button', { type: 'button', class: 'secondary', 'data-action': 'cancel-add-tile', onclick: () => this.close() }, 'Cancel')
  }
}
