// One dashboard: its tiles drawn on the 12-column grid where they are stored, each insight run and drawn, text tiles as
// safe markdown; a date range every insight runs over instead of its own, and Refresh; tiles added (an insight picked
// from the list, ./tile-adder.ts) and removed; Edit / Save / Cancel of the layout (the editor is ./editor.ts, its rules
// ./grid.ts). Every change saves the whole tiles array with analytics_dashboard_update; and the version history
// (./history.ts) with restore.
import { api, describe } from '../../api'
import { breakable, h, replace, when } from '../../dom'
import { areaHref } from '../../router'
import type { Cleanup } from '../area'
import { metricTypesOf, readCatalog } from './catalog'
import { drawInsight, type Drawn, type MetricTypes } from './charts'
import { LayoutEditor } from './editor'
import { type Layout, rowsUsed } from './grid'
import { History } from './history'
import { renderMarkdown } from './markdown'
import { describeRange, type Range, rangePicker } from './range'
import { createRunner, type RunBody } from './runner'
import { type NewTile, TileAdder } from './tile-adder'

export interface Tile {
  id: string
  type: 'insight' | 'text'
  insight_id?: string
  markdown?: string
  title: string | null
  layout: Layout
}
export interface Dashboard {
  id: string
  slug: string
  name: string
  tags: string[]
  tiles: Tile[]
  created_by: string | null
  created_at: string
  updated_at: string
}

/** Draws the dashboard `idOrSlug` into `root`; the cleanup stops its runs and destroys its charts. */
export async function dashboardView(root: HTMLElement, productId: string, idOrSlug: string): Promise<Cleanup> {
  replace(root, h('p', { class: 'muted' }, 'Loading dashboard…'))
  const [dashboard, types] = await Promise.all([
    api.run<Dashboard>('analytics_dashboard_get', { path: dashboardPath(idOrSlug) }),
    metricTypes(),
  ])
  const page = new DashboardPage(root, productId, dashboard, types)
  page.draw()
  return () => page.stop()
}

// OpenAPI publishes the operations of one path shape under the first one's parameter name (GET …/{idOrSlug} and
// PATCH …/{id} share /analytics/dashboards/{idOrSlug}); the console resolves paths through OpenAPI, so it names both.
const dashboardPath = (id: string) => ({ id, idOrSlug: id })

async function metricTypes(): Promise<MetricTypes> {
  // Only for how totals are shown: without the catalog no type is known, and every series shows its latest value.
  const catalog = await readCatalog().catch(() => undefined)
  return catalog && metricTypesOf(catalog)
}

/** A tile added from the list: half the grid wide, four rows tall (the builder's preview is this size). */
const NEW_TILE = { w: 6, h: 4 }

/** A tile as analytics_dashboard_update takes it back: every field kept, at `layout`. */
const storedTile = (tile: Tile, layout: Layout) => ({
  id: tile.id, type: tile.type, title: tile.title, layout,
  ...(tile.type === 'insight' ? { insight_id: tile.insight_id } : { markdown: tile.markdown }),
})

class DashboardPage {
  private readonly runner = createRunner()
  private drawn: Drawn[] = []
  private stopped = false
  /** A save or a restore is in flight: every other action waits (no interleaving, no double version). */
  private working = false
  private readonly grid = h('div', { class: 'dashboard-grid', 'data-testid': 'dashboard-grid' })
  private readonly editor = new LayoutEditor(this.grid)
  private readonly actions = h('div', { class: 'dashboard-actions' })
  private readonly meta = h('p', { class: 'muted dashboard-meta', 'data-testid': 'dashboard-meta' })
  private readonly status = h('p', { class: 'error', role: 'alert', 'data-testid': 'dashboard-error' })
  private readonly history: History
  private readonly insightNames = new Map<string, Promise<string | undefined>>()
  private readonly toolbar = h('div', { class: 'dashboard-toolbar', 'data-testid': 'dashboard-toolbar' })
  private readonly adder: TileAdder
  /** The range every insight tile runs over instead of its own; undefined: each its own. Kept across redraws. */
  private range: Range | undefined
  private elements = new Map<string, HTMLElement>()
  private runs = 0

  constructor(private root: HTMLElement, private productId: string, private dashboard: Dashboard, private types: MetricTypes) {
    this.history = new History(h('section', { class: 'card history', 'data-testid': 'versions' }), productId, dashboardPath(dashboard.id), {
      unsavedEdits: () => this.editor.editing && this.editor.changedFrom(this.dashboard.tiles),
      busy: () => this.working,
      restore: (version) => this.restore(version),
    })
    this.adder = new TileAdder(productId, (tile) => this.addTile(tile))
  }

  stop(): void {
    this.stopped = true
    this.runner.stop()
    this.history.stop()
    this.clearCharts()
  }

  draw(): void {
    replace(this.root,
      h('nav', { class: 'crumbs' }, h('a', { href: areaHref(this.productId, 'analytics') }, 'Dashboards'), ' / '),
      h('div', { class: 'dashboard-head' },
        h('div', {},
          h('h1', { 'data-testid': 'dashboard-name' }, this.dashboard.name),
          this.meta),
        this.actions),
      this.toolbar,
      this.adder.element,
      this.status,
      this.grid,
      this.history.section,
    )
    replace(this.status)
    this.drawMeta()
    this.drawToolbar()
    this.drawGrid()
    this.drawActions()
    void this.history.draw()
  }

  /** The slug, tags and when it was last updated: drawn again after every save, which changes the last. */
  private drawMeta(): void {
    replace(this.meta,
      h('code', { class: 'slug' }, breakable(this.dashboard.slug)),
      this.dashboard.tags.map((tag) => h('span', { class: 'tag' }, breakable(tag))),
      h('span', { class: 'updated' }, 'updated ', h('span', { 'data-testid': 'dashboard-updated' }, when(this.dashboard.updated_at))))
  }

  // ---- the date range and refresh

  private drawToolbar(): void {
    const picker = rangePicker(this.range, () => {
      this.range = picker.value()
      this.rerun(false)
    }, { own: true, name: 'Date range' })
    replace(this.toolbar,
      h('label', { class: 'inline' }, 'Date range', picker.element),
      h('button', { type: 'button', class: 'secondary', 'data-action': 'refresh', onclick: () => this.rerun(true) }, 'Refresh'))
  }

  /** Runs every insight tile again: over the range picked now, or anew (`refresh`: funnels recomputed, not kept ones). */
  private rerun(refresh: boolean): void {
    this.runner.clear()
    this.clearCharts()
    for (const tile of this.dashboard.tiles) {
      const element = this.elements.get(tile.id)
      if (tile.type === 'insight' && element) this.fillTile(tile, element, refresh)
    }
  }

  /** Draws `dashboard` afresh (after a restore, or Redraw): edits dropped, the old tiles' queued runs dropped. */
  private redraw(dashboard: Dashboard): void {
    this.dashboard = dashboard
    this.runner.clear()
    this.draw() // the editor closed (drawGrid)
  }

  private clearCharts(): void {
    for (const drawn of this.drawn.splice(0)) drawn.destroy()
  }

  private drawGrid(): void {
    this.clearCharts()
    // In reading order (top to bottom, then left to right): the order of Tab, screen readers and a narrow screen.
    const ordered = [...this.dashboard.tiles].sort((a, b) => a.layout.y - b.layout.y || a.layout.x - b.layout.x)
    const elements = new Map(ordered.map((tile) => [tile.id, this.tileElement(tile)]))
    this.elements = elements
    replace(this.grid, elements.size ? [...elements.values()] : h('p', { class: 'muted empty' }, 'This dashboard has no tiles yet: add one.'))
    this.editor.reset(this.dashboard.tiles, elements)
    this.editor.setEditing(false)
    // Charts size themselves to their tile, so they are drawn once the tiles are on the page.
    for (const tile of this.dashboard.tiles) this.fillTile(tile, elements.get(tile.id)!)
  }

  private tileElement(tile: Tile): HTMLElement {
    // One line, cut with an ellipsis in a narrow tile: the whole title in its title attribute.
    const title = h('h3', { class: 'tile-title', title: tile.title }, tile.title ?? (tile.type === 'text' ? '' : '…'))
    if (tile.type === 'insight' && tile.title === null && tile.insight_id) {
      void this.insightName(tile.insight_id).then((name) => { replace(title, name ?? 'Insight'); title.title = name ?? '' })
    }
    const remove = h('div', { class: 'tile-remove' })
    const offer = () => replace(remove, h('button', { type: 'button', class: 'secondary small', 'data-action': 'remove-tile', 'aria-label': 'Remove this tile', onclick: ask }, 'Remove'))
    // Asked in the tile (no window.confirm); its insight stays.
    const ask = () => replace(remove, h('span', { class: 'confirm', 'data-testid': 'confirm-remove' },
      h('span', {}, 'Remove this tile?'), ' ',
      h('button', { type: 'button', class: 'small danger', 'data-action': 'confirm-remove', onclick: () => void this.removeTile(tile.id).finally(offer) }, 'Remove'), ' ',
      h('button', { type: 'button', class: 'secondary small', 'data-action': 'keep', onclick: offer }, 'Keep')))
    offer()
    return h('article', { class: `tile tile-${tile.type}`, 'data-tile-id': tile.id, 'data-type': tile.type },
      h('header', { class: `tile-head${tile.title === null && tile.type === 'text' ? ' untitled' : ''}` }, title, h('span', { class: 'stored-row muted' })),
      h('div', { class: 'tile-body' }),
      remove,
      h('span', { class: 'resize-handle', title: 'Drag to resize', 'aria-hidden': 'true' }))
  }

  private insightName(id: string): Promise<string | undefined> {
    let name = this.insightNames.get(id)
    if (!name) {
      name = api.run<{ name: string }>('analytics_insight_get', { path: { id } }).then((insight) => insight.name, () => undefined)
      this.insightNames.set(id, name)
    }
    return name
  }

  private fillTile(tile: Tile, element: HTMLElement, refresh = false): void {
    const body = element.querySelector<HTMLElement>('.tile-body')!
    if (tile.type === 'text') {
      body.classList.add('markdown')
      replace(body, renderMarkdown(tile.markdown ?? ''))
      return
    }
    replace(body, h('p', { class: 'muted loading' }, 'Running…'))
    delete body.dataset.kind
    const request: RunBody = { ...(this.range ? { range: this.range } : {}), ...(refresh ? { refresh: true } : {}) }
    // What the drawn numbers were asked with, on the tile: its own range, or the dashboard's.
    body.dataset.range = this.range ? JSON.stringify(this.range) : 'own'
    body.title = this.range ? `Over ${describeRange(this.range)} (the dashboard's range)` : ''
    const turn = String(++this.runs) // only the tile's latest run is drawn (a range changed or Refresh meanwhile)
    body.dataset.turn = turn
    this.runner.run(tile.insight_id!, request).then((run) => {
      if (this.stopped || !body.isConnected || body.dataset.turn !== turn) return
      replace(body)
      body.dataset.kind = run.kind
      this.drawn.push(drawInsight(body, run, this.types))
    }, (error) => {
      // A run dropped by a redraw, a new range or by leaving lands here too.
      if (this.stopped || !body.isConnected || body.dataset.turn !== turn) return
      replace(body, h('p', { class: 'error', role: 'alert' }, describe(error)))
    })
  }

  // ---- editing

  private drawActions(): void {
    this.root.classList.toggle('busy', this.working)
    if (!this.editor.editing) {
      replace(this.actions,
        h('button', { type: 'button', class: 'secondary', 'data-action': 'add-tile', disabled: this.working, onclick: () => void this.adder.open() }, 'Add tile'),
        h('button', { type: 'button', class: 'secondary', 'data-action': 'edit', disabled: this.working, onclick: () => this.setEditing(true) }, 'Edit layout'))
      return
    }
    this.adder.close()
    replace(this.actions,
      h('span', { class: 'muted hint' }, 'Drag a tile by its title to move it, by its corner to resize it.'),
      h('button', { type: 'button', class: 'secondary', 'data-action': 'cancel', disabled: this.working, onclick: () => this.cancel() }, 'Cancel'),
      h('button', { type: 'button', 'data-action': 'save', disabled: this.working, onclick: () => void this.save() }, 'Save layout'))
  }

  private setEditing(editing: boolean): void {
    this.editor.setEditing(editing)
    replace(this.status)
    this.drawActions()
  }

  /** Save and restore run one at a time, and nothing else is offered meanwhile. */
  private async exclusive(work: () => Promise<void>): Promise<void> {
    if (this.working) return
    this.working = true
    this.drawActions()
    this.history.setDisabled(true)
    try {
      await work()
    } finally {
      this.working = false
      if (!this.stopped) {
        this.drawActions()
        this.history.setDisabled(false)
      }
    }
  }

  private cancel(): void {
    this.editor.revert(this.dashboard.tiles)
    this.setEditing(false)
  }

  private async save(): Promise<void> {
    replace(this.status)
    // Nothing moved: no update, so no empty version in the history.
    if (!this.editor.changedFrom(this.dashboard.tiles)) {
      this.setEditing(false)
      return
    }
    await this.exclusive(() => this.write())
  }

  private async write(): Promise<void> {
    const tiles = this.dashboard.tiles.map((tile) => storedTile(tile, this.editor.layoutOf(tile.id)))
    if (!(await this.store(tiles, 'Not saved'))) return
    if (this.stopped) return
    this.editor.revert(this.dashboard.tiles)
    this.setEditing(false)
    this.drawMeta()
    void this.history.draw()
  }

  // ---- adding and removing tiles

  /** Adds a tile below the others, half the grid wide, and draws the dashboard as saved. */
  private async addTile(tile: NewTile): Promise<boolean> {
    let added = false
    await this.exclusive(async () => {
      replace(this.status)
      const layout = { x: 0, y: rowsUsed(this.dashboard.tiles.map((tile) => tile.layout)), w: NEW_TILE.w, h: NEW_TILE.h }
      const tiles = [...this.dashboard.tiles.map((stored) => storedTile(stored, stored.layout)), { title: null, ...tile, layout }]
      added = await this.store(tiles, 'Not added')
    })
    if (added && !this.stopped) this.redraw(this.dashboard)
    return added
  }

  private async removeTile(tileId: string): Promise<void> {
    if (this.editor.editing) return
    let removed = false
    await this.exclusive(async () => {
      replace(this.status)
      const tiles = this.dashboard.tiles.filter((tile) => tile.id !== tileId).map((tile) => storedTile(tile, tile.layout))
      removed = await this.store(tiles, 'Not removed')
    })
    if (removed && !this.stopped) this.redraw(this.dashboard)
  }

  /**
   * Saves `tiles` as the whole arrangement, unless the dashboard changed since this page drew it (then offers Redraw);
   * whether it was saved. A refusal is shown above the grid, starting with `failure`.
   */
  private async store(tiles: unknown[], failure: string): Promise<boolean> {
    try {
      // The API keeps no version check on update (last write wins); the console checks that nobody saved since this
      // page drew the dashboard, so a save never silently replaces another person's arrangement. The check is not
      // atomic with the update: the version history keeps whatever was overwritten, for restore.
      const current = await api.run<Dashboard>('analytics_dashboard_get', { path: dashboardPath(this.dashboard.id) })
      if (current.updated_at !== this.dashboard.updated_at) {
        // Redraw draws what is stored now, without loading the page and running every other view's work again.
        replace(this.status,
          'This dashboard was changed since it was drawn here (its history shows the change). Redraw it, then edit again; redrawing drops your edits. ',
          h('button', { type: 'button', class: 'secondary small', 'data-action': 'redraw', onclick: () => this.redraw(current) }, 'Redraw'))
        return false
      }
      this.dashboard = await api.run<Dashboard>('analytics_dashboard_update', { path: dashboardPath(this.dashboard.id), body: { tiles } })
      return true
    } catch (error) {
      replace(this.status, `${failure}: ${describe(error)}`)
      return false
    }
  }

  // ---- history

  private async restore(version: number): Promise<void> {
    let failure: unknown
    await this.exclusive(async () => {
      replace(this.status)
      try {
        const restored = await api.run<Dashboard>('analytics_dashboard_restore', { path: dashboardPath(this.dashboard.id), body: { version } })
        if (!this.stopped) this.redraw(restored)
      } catch (error) {
        failure = error
        replace(this.status, `Not restored: ${describe(error)}`)
      }
    })
    if (failure) throw failure
  }
}
