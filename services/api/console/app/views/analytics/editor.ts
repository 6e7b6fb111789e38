// The layout editor of a dashboard's grid: where each tile is placed (long runs of empty rows drawn short), and moving
// and resizing tiles by pointer (drag the title bar, or the corner) or keyboard (arrows, Shift+arrows), by the rules of
// ./grid.ts. It holds each tile's layout as edited; the page saves them.
import { COLUMNS, compactRows, gridArea, type Layout, mayTake, moved, resized, rowsUsed, sameLayout } from './grid'

const ARROWS: Record<string, [number, number]> = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] }
const ROWS = new Intl.NumberFormat('en-US')
/** Empty rows shown below the tiles while editing: room to drag a tile down into. */
const SPARE_ROWS = 3

export class LayoutEditor {
  /** Each tile's layout as edited, by tile id; equal to the stored one outside edit mode. */
  private layouts = new Map<string, Layout>()
  private elements = new Map<string, HTMLElement>()
  editing = false

  constructor(private readonly grid: HTMLElement) {}

  /** Starts over with these tiles (their stored layouts) and their elements, placing them. */
  reset(tiles: { id: string; layout: Layout }[], elements: Map<string, HTMLElement>): void {
    this.layouts = new Map(tiles.map((tile) => [tile.id, { ...tile.layout }]))
    this.elements = elements
    for (const [id, element] of elements) this.attach(element, id)
    this.placeAll()
  }

  /** Every tile back where `tiles` store it (Cancel, or after a save). */
  revert(tiles: { id: string; layout: Layout }[]): void {
    for (const tile of tiles) this.layouts.set(tile.id, { ...tile.layout })
    this.placeAll()
  }

  layoutOf(id: string): Layout {
    return this.layouts.get(id)!
  }

  /** Whether any tile is not where `tiles` store it. */
  changedFrom(tiles: { id: string; layout: Layout }[]): boolean {
    return tiles.some((tile) => !sameLayout(tile.layout, this.layouts.get(tile.id)!))
  }

  setEditing(editing: boolean): void {
    this.editing = editing
    for (const element of this.elements.values()) {
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
    this.fitGrid()
  }

  /** Puts every tile where its layout says, long runs of empty rows drawn short (compactRows), and fits the grid. */
  private placeAll(): void {
    const ids = [...this.layouts.keys()]
    const layouts = ids.map((id) => this.layouts.get(id)!)
    const drawnY = compactRows(layouts)
    ids.forEach((id, index) => this.place(this.elements.get(id)!, layouts[index]!, drawnY[index]!))
    this.fitGrid()
  }

  private place(element: HTMLElement, layout: Layout, drawnY: number): void {
    const area = gridArea(layout, drawnY)
    element.style.gridColumn = area.gridColumn
    element.style.gridRow = area.gridRow
    // Said on the tile when the drawn row is not the stored one (empty rows above it drawn short).
    const note = element.querySelector<HTMLElement>('.stored-row')!
    note.textContent = drawnY === layout.y ? '' : `stored at row ${ROWS.format(layout.y + 1)}`
    note.title = drawnY === layout.y ? '' : 'Empty rows above this tile are drawn short; its stored row is kept'
    element.dataset.drawnY = String(drawnY)
    element.style.setProperty('--tile-rows', String(layout.h)) // the height a narrow screen keeps (area.css)
    element.dataset.x = String(layout.x)
    element.dataset.y = String(layout.y)
    element.dataset.w = String(layout.w)
    element.dataset.h = String(layout.h)
  }

  private fitGrid(): void {
    const rows = rowsUsed([...this.layouts.values()]) + (this.editing ? SPARE_ROWS : 0)
    this.grid.style.gridTemplateRows = `repeat(${Math.max(rows, 1)}, var(--row-height))`
  }

  /** Takes `candidate` for the tile if the rules allow it (grid.ts mayTake); whether it did. */
  private step(tileId: string, candidate: Layout): boolean {
    const current = this.layouts.get(tileId)!
    const others = [...this.layouts].filter(([id]) => id !== tileId).map(([, layout]) => layout)
    if (sameLayout(candidate, current) || !mayTake(candidate, current, others)) return false
    this.layouts.set(tileId, candidate)
    this.placeAll()
    return true
  }

  private attach(element: HTMLElement, tileId: string): void {
    const head = element.querySelector<HTMLElement>('.tile-head')!
    const handles: [HTMLElement, (start: Layout, columns: number, rows: number) => Layout][] = [
      [head, moved],
      [element.querySelector<HTMLElement>('.resize-handle')!, resized],
    ]
    // The keyboard does what the pointer does, a cell at a time: arrows move, Shift+arrows resize.
    head.addEventListener('keydown', (event) => {
      const arrow = ARROWS[event.key]
      if (!this.editing || !arrow) return
      event.preventDefault()
      this.step(tileId, (event.shiftKey ? resized : moved)(this.layouts.get(tileId)!, arrow[0], arrow[1]))
    })
    for (const [handle, change] of handles) {
      handle.addEventListener('pointerdown', (down) => {
        if (!this.editing || down.button !== 0) return
        down.preventDefault()
        handle.setPointerCapture(down.pointerId)
        const start = { ...this.layouts.get(tileId)! }
        const { column, row } = this.cellSize()
        element.classList.add('dragging')
        const onMove = (move: PointerEvent) => {
          this.step(tileId, change(start, Math.round((move.clientX - down.clientX) / column), Math.round((move.clientY - down.clientY) / row)))
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
}
