// One dashboard: its tiles drawn on the 12-column grid where they are stored, each insight run and drawn, text tiles as
// safe markdown; an editor that moves and resizes tiles by dragging (rules in ./grid.ts) and saves the whole tiles
// array with analytics_dashboard_update; and the version history with restore.
import { api, describe } from '../../api'
import { h, replace, when } from '../../dom'
import { areaHref } from '../../router'
import type { Cleanup } from '../area'
import { authorOf, memberEmails } from './authors'
import { drawInsight, type Drawn, type MetricTypes } from './charts'
import { COLUMNS, compactRows, gridArea, isFree, type Layout, moved, resized, rowsUsed, sameLayout } from './grid'
import { renderMarkdown } from './markdown'
import { createRunner, type Runner } from './runner'

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
interface Version {
  version: number
  reason: string
  created_by: string | null
  created_at: string
  definition: { name: string; tags: string[]; tiles: Tile[] }
}
interface Catalog { entities: { entity: string; metrics: { name: string; type: string }[] }[] }

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
  const catalog = await api.run<Catalog>('analytics_catalog_get').catch(() => undefined)
  return catalog && new Map(catalog.entities.map((entity) => [entity.entity, new Map(entity.metrics.map((metric) => [metric.name, metric.type]))]))
}

const NUMBER = new Intl.NumberFormat('en-US')
const ARROWS: Record<string, [number, number]> = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] }

class DashboardPage {
  private runner: Runner = createRunner()
  private drawn: Drawn[] = []
  private stopped = false
  /** Each tile's layout as edited, by tile id; equal to the stored one outside edit mode. */
  private layouts = new Map<string, Layout>()
  private tileElements = new Map<string, HTMLElement>()
  private editing = false
  private readonly grid = h('div', { class: 'dashboard-grid', 'data-testid': 'dashboard-grid' })
  private readonly actions = h('div', { class: 'dashboard-actions' })
  private readonly status = h('p', { class: 'error', role: 'alert', 'data-testid': 'dashboard-error' })
  private readonly history = h('section', { class: 'card history', 'data-testid': 'versions' })
  private readonly insightNames = new Map<string, Promise<string | undefined>>()
  private authors: Promise<Map<string, string>> | undefined

  constructor(private root: HTMLElement, private productId: string, private dashboard: Dashboard, private types: MetricTypes) {}

  stop(): void {
    this.stopped = true
    this.runner.stop()
    this.clearCharts()
  }

  draw(): void {
    replace(this.root,
      h('nav', { class: 'crumbs' }, h('a', { href: areaHref(this.productId, 'analytics') }, 'Dashboards'), ' / '),
      h('div', { class: 'dashboard-head' },
        h('div', {},
          h('h1', { 'data-testid': 'dashboard-name' }, this.dashboard.name),
          h('p', { class: 'muted dashboard-meta' },
            h('code', {}, this.dashboard.slug),
            this.dashboard.tags.map((tag) => h('span', { class: 'tag' }, tag)),
            ` · updated ${when(this.dashboard.updated_at)}`)),
        this.actions),
      this.status,
      this.grid,
      this.history,
    )
    this.drawGrid()
    this.drawActions()
    void this.drawHistory()
  }

  private clearCharts(): void {
    for (const drawn of this.drawn.splice(0)) drawn.destroy()
  }

  private drawGrid(): void {
    this.clearCharts()
    this.layouts = new Map(this.dashboard.tiles.map((tile) => [tile.id, { ...tile.layout }]))
    this.tileElements.clear()
    // In reading order (top to bottom, then left to right): the order of Tab, screen readers and a narrow screen.
    const ordered = [...this.dashboard.tiles].sort((a, b) => a.layout.y - b.layout.y || a.layout.x - b.layout.x)
    const tiles = ordered.map((tile) => this.tileElement(tile))
    replace(this.grid, tiles.length ? tiles : h('p', { class: 'muted empty' }, 'This dashboard has no tiles yet.'))
    this.grid.classList.toggle('editing', this.editing)
    this.placeAll()
    // Charts size themselves to their tile, so they are drawn once the tiles are on the page.
    for (const tile of this.dashboard.tiles) this.fillTile(tile)
  }

  private tileElement(tile: Tile): HTMLElement {
    const title = h('h3', { class: 'tile-title' }, tile.title ?? (tile.type === 'text' ? '' : '…'))
    const element = h('article', { class: `tile tile-${tile.type}`, 'data-tile-id': tile.id, 'data-type': tile.type },
      h('header', { class: `tile-head${tile.title === null && tile.type === 'text' ? ' untitled' : ''}` }, title, h('span', { class: 'stored-row muted' })),
      h('div', { class: 'tile-body' }),
      h('span', { class: 'resize-handle', title: 'Drag to resize', 'aria-hidden': 'true' }))
    if (tile.type === 'insight' && tile.title === null && tile.insight_id) {
      void this.insightName(tile.insight_id).then((name) => replace(title, name ?? 'Insight'))
    }
    this.tileElements.set(tile.id, element)
    this.makeDraggable(element, tile.id)
    return element
  }

  private insightName(id: string): Promise<string | undefined> {
    let name = this.insightNames.get(id)
    if (!name) {
      name = api.run<{ name: string }>('analytics_insight_get', { path: { id } }).then((insight) => insight.name, () => undefined)
      this.insightNames.set(id, name)
    }
    return name
  }

  /** Puts every tile where its (edited) layout says, long runs of empty rows drawn short (compactRows), and fits the grid. */
  private placeAll(): void {
    const ids = [...this.layouts.keys()]
    const layouts = ids.map((id) => this.layouts.get(id)!)
    const drawnY = compactRows(layouts)
    ids.forEach((id, index) => this.place(this.tileElements.get(id)!, layouts[index]!, drawnY[index]!))
    this.fitGrid()
  }

  private place(element: HTMLElement, layout: Layout, drawnY: number): void {
    const area = gridArea(layout, drawnY)
    element.style.gridColumn = area.gridColumn
    element.style.gridRow = area.gridRow
    // Said on the tile when the drawn row is not the stored one (empty rows above it drawn short).
    const note = element.querySelector<HTMLElement>('.stored-row')!
    note.textContent = drawnY === layout.y ? '' : `stored at row ${NUMBER.format(layout.y + 1)}`
    note.title = drawnY === layout.y ? '' : 'Empty rows above this tile are drawn short; its stored row is kept'
    element.dataset.drawnY = String(drawnY)
    element.style.setProperty('--tile-rows', String(layout.h)) // the height a narrow screen keeps (area.css)
    element.dataset.x = String(layout.x)
    element.dataset.y = String(layout.y)
    element.dataset.w = String(layout.w)
    element.dataset.h = String(layout.h)
  }

  private fillTile(tile: Tile): void {
    const body = this.tileElements.get(tile.id)!.querySelector<HTMLElement>('.tile-body')!
    if (tile.type === 'text') {
      body.classList.add('markdown')
      replace(body, renderMarkdown(tile.markdown ?? ''))
      return
    }
    replace(body, h('p', { class: 'muted loading' }, 'Running…'))
    this.runner.run(tile.insight_id!).then((run) => {
      if (this.stopped || !body.isConnected) return
      replace(body)
      body.dataset.kind = run.kind
      this.drawn.push(drawInsight(body, run, this.types))
    }, (error) => {
      if (this.stopped || !body.isConnected) return
      replace(body, h('p', { class: 'error', role: 'alert' }, describe(error)))
    })
  }

  // ---- editing

  private drawActions(): void {
    if (!this.editing) {
      replace(this.actions, h('button', { type: 'button', class: 'secondary', 'data-action': 'edit', onclick: () => this.setEditing(true) }, 'Edit layout'))
      return
    }
    replace(this.actions,
      h('span', { class: 'muted hint' }, 'Drag a tile by its title to move it, by its corner to resize it.'),
      h('button', { type: 'button', class: 'secondary', 'data-action': 'cancel', onclick: () => this.cancel() }, 'Cancel'),
      h('button', { type: 'button', 'data-action': 'save', onclick: () => void this.save() }, 'Save layout'))
  }

  private setEditing(editing: boolean): void {
    this.editing = editing
    for (const element of this.tileElements.values()) {
      const head = element.querySelector('.tile-head')!
      if (editing) {
        head.setAttribute('tabindex', '0')
        head.setAttribute('title', 'Drag, or arrows, to move; drag the corner, or Shift+arrows, to resize')
      } else {
        head.removeAttribute('tabindex')
        head.removeAttribute('title')
      }
    }
    this.grid.classList.toggle('editing', editing)
    this.status.textContent = ''
    this.drawActions()
    this.fitGrid()
  }

  private cancel(): void {
    for (const tile of this.dashboard.tiles) this.layouts.set(tile.id, { ...tile.layout })
    this.placeAll()
    this.setEditing(false)
  }

  /** In edit mode the grid shows a few empty rows below the tiles, room to drag a tile down into. */
  private fitGrid(): void {
    const rows = rowsUsed([...this.layouts.values()]) + (this.editing ? 3 : 0)
    this.grid.style.gridTemplateRows = `repeat(${Math.max(rows, 1)}, var(--row-height))`
  }

  private makeDraggable(element: HTMLElement, tileId: string): void {
    const handles: [HTMLElement, (start: Layout, columns: number, rows: number) => Layout][] = [
      [element.querySelector<HTMLElement>('.tile-head')!, moved],
      [element.querySelector<HTMLElement>('.resize-handle')!, resized],
    ]
    // The keyboard does what the pointer does, a cell at a time: arrows move, Shift+arrows resize.
    const head = handles[0]![0]
    head.addEventListener('keydown', (event) => {
      const step = ARROWS[event.key]
      if (!this.editing || !step) return
      event.preventDefault()
      const others = [...this.layouts].filter(([id]) => id !== tileId).map(([, layout]) => layout)
      const candidate = (event.shiftKey ? resized : moved)(this.layouts.get(tileId)!, step[0], step[1])
      if (!isFree(candidate, others)) return
      this.layouts.set(tileId, candidate)
      this.placeAll()
    })
    for (const [handle, change] of handles) {
      handle.addEventListener('pointerdown', (down) => {
        if (!this.editing || down.button !== 0) return
        down.preventDefault()
        handle.setPointerCapture(down.pointerId)
        const start = { ...this.layouts.get(tileId)! }
        const others = [...this.layouts].filter(([id]) => id !== tileId).map(([, layout]) => layout)
        const { column, row } = this.cellSize()
        element.classList.add('dragging')
        const onMove = (move: PointerEvent) => {
          const candidate = change(start, Math.round((move.clientX - down.clientX) / column), Math.round((move.clientY - down.clientY) / row))
          if (sameLayout(candidate, this.layouts.get(tileId)!) || !isFree(candidate, others)) return
          this.layouts.set(tileId, candidate)
          this.placeAll()
        }
        const onEnd = () => {
          element.classList.remove('dragging')
          handle.removeEventListener('pointermove', onMove)
          handle.removeEventListener('pointerup', onEnd)
          handle.removeEventListener('pointercancel', onEnd)
        }
        handle.addEventListener('pointermove', onMove)
        handle.addEventListener('pointerup', onEnd)
        handle.addEventListener('pointercancel', onEnd)
      })
    }
  }

  /** One grid cell's step in pixels, gap included: how far a pointer moves to move a tile one cell. */
  private cellSize(): { column: number; row: number } {
    const style = getComputedStyle(this.grid)
    const gap = parseFloat(style.columnGap) || 0
    const rowGap = parseFloat(style.rowGap) || 0
    const rowHeight = parseFloat(style.getPropertyValue('--row-height')) || 80
    return { column: (this.grid.clientWidth + gap) / COLUMNS, row: rowHeight + rowGap }
  }

  private async save(): Promise<void> {
    this.status.textContent = ''
    // Nothing moved: no update, so no empty version in the history.
    if (this.dashboard.tiles.every((tile) => sameLayout(tile.layout, this.layouts.get(tile.id)!))) {
      this.setEditing(false)
      return
    }
    const button = this.actions.querySelector<HTMLButtonElement>('[data-action=save]')
    if (button) button.disabled = true // one save at a time
    try {
      await this.write()
    } finally {
      if (button) button.disabled = false
    }
  }

  private async write(): Promise<void> {
    const tiles = this.dashboard.tiles.map((tile) => ({
      id: tile.id, type: tile.type, title: tile.title, layout: this.layouts.get(tile.id)!,
      ...(tile.type === 'insight' ? { insight_id: tile.insight_id } : { markdown: tile.markdown }),
    }))
    try {
      // The API keeps no version check on update (last write wins); the console checks that nobody saved since this
      // page drew the dashboard, so a save never silently replaces another person's arrangement. The check is not
      // atomic with the update: the version history keeps whatever was overwritten, for restore.
      const current = await api.run<Dashboard>('analytics_dashboard_get', { path: dashboardPath(this.dashboard.id) })
      if (current.updated_at !== this.dashboard.updated_at) {
        this.status.textContent = 'This dashboard was changed since it was drawn here; reload it (its history shows the change) and edit again.'
        return
      }
      this.dashboard = await api.run<Dashboard>('analytics_dashboard_update', { path: dashboardPath(this.dashboard.id), body: { tiles } })
    } catch (error) {
      this.status.textContent = `Not saved: ${describe(error)}`
      return
    }
    for (const tile of this.dashboard.tiles) this.layouts.set(tile.id, { ...tile.layout })
    this.setEditing(false)
    void this.drawHistory()
  }

  // ---- history

  private async drawHistory(after?: number): Promise<void> {
    if (after === undefined) replace(this.history, h('h2', {}, 'Version history'), h('p', { class: 'muted' }, 'Loading versions…'))
    let page: { versions: Version[]; has_more: boolean }
    try {
      this.authors ??= memberEmails(this.productId)
      page = await api.run('analytics_dashboard_versions_list', { path: dashboardPath(this.dashboard.id), query: { limit: 20, after } })
    } catch (error) {
      replace(this.history, h('h2', {}, 'Version history'), h('p', { class: 'error', role: 'alert' }, describe(error)))
      return
    }
    const emails = await this.authors!
    if (this.stopped) return
    const rows = page.versions.map((version) => h('tr', { 'data-version': version.version },
      h('td', {}, h('strong', {}, `v${version.version}`)),
      h('td', {}, version.reason),
      h('td', {}, when(version.created_at)),
      h('td', { class: 'muted', title: version.created_by ?? '' }, authorOf(emails, version.created_by)),
      h('td', {}, `${version.definition.tiles.length} tiles`),
      h('td', {}, after === undefined && version === page.versions[0]
        ? h('span', { class: 'muted' }, 'current')
        : h('button', { type: 'button', class: 'secondary small', 'data-action': 'restore', onclick: () => void this.restore(version.version) }, 'Restore'))))
    const more = page.has_more
      ? h('button', { type: 'button', class: 'link', onclick: (event: Event) => { (event.target as HTMLElement).remove(); void this.drawHistory(page.versions.at(-1)!.version) } }, 'Older versions')
      : null
    if (after === undefined) {
      replace(this.history,
        h('h2', {}, 'Version history'),
        h('p', { class: 'muted' }, 'Every save and restore is a version; restoring one writes it again as the newest.'),
        h('table', { class: 'versions' },
          h('thead', {}, h('tr', {}, ['Version', 'Why', 'When', 'By', 'Tiles', ''].map((title) => h('th', {}, title)))),
          h('tbody', {}, rows)),
        more)
    } else {
      this.history.querySelector('tbody')?.append(...rows)
      if (more) this.history.append(more)
    }
  }

  private async restore(version: number): Promise<void> {
    this.status.textContent = ''
    try {
      this.dashboard = await api.run<Dashboard>('analytics_dashboard_restore', { path: dashboardPath(this.dashboard.id), body: { version } })
    } catch (error) {
      this.status.textContent = `Not restored: ${describe(error)}`
      return
    }
    if (this.stopped) return
    this.editing = false
    this.draw()
  }
}
