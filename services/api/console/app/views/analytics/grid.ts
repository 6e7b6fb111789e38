// The 12-column grid of a dashboard: where a stored tile is drawn, and the editor's rules for moving and resizing.
// Editing rules (docs/console.md): a tile snaps to whole cells, keeps 1 <= w <= 12 and x + w <= 12, 1 <= h <= 12 and
// y >= 0, and never overlaps another tile: a position that would overlap is not taken, the tile stays at its last free
// one. Nothing else moves, so a save changes exactly the tiles the reader moved.
export const COLUMNS = 12
export const MAX_HEIGHT = 12

export interface Layout { x: number; y: number; w: number; h: number }

/**
 * Where a stored layout is drawn. The API stores a tile reaching past column 12 as given (docs/analytics.md): it is
 * drawn clipped at the grid's edge, starting no later than the last column. Any layout within the grid is drawn as is.
 */
export function drawnLayout(layout: Layout): Layout {
  const x = Math.min(layout.x, COLUMNS - 1)
  return { x, y: layout.y, w: Math.min(layout.w, COLUMNS - x), h: layout.h }
}

/** The CSS grid lines of a layout (grid lines count from 1). */
export function gridArea(layout: Layout): { gridColumn: string; gridRow: string } {
  const drawn = drawnLayout(layout)
  return { gridColumn: `${drawn.x + 1} / span ${drawn.w}`, gridRow: `${drawn.y + 1} / span ${drawn.h}` }
}

export const overlaps = (a: Layout, b: Layout) => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h

const clamp = (value: number, low: number, high: number) => Math.max(low, Math.min(high, value))

/** The layout moved by whole cells, kept inside the grid's columns and below its top. */
export function moved(start: Layout, columns: number, rows: number): Layout {
  const w = Math.min(start.w, COLUMNS)
  return { x: clamp(start.x + columns, 0, COLUMNS - w), y: Math.max(0, start.y + rows), w, h: start.h }
}

/** The layout grown or shrunk by whole cells from its top-left corner, kept within the grid. */
export function resized(start: Layout, columns: number, rows: number): Layout {
  const x = Math.min(start.x, COLUMNS - 1)
  return { x, y: start.y, w: clamp(start.w + columns, 1, COLUMNS - x), h: clamp(start.h + rows, 1, MAX_HEIGHT) }
}

/** Whether a tile may take `candidate`: no other tile (by index) overlaps it. */
export const isFree = (candidate: Layout, others: Layout[]) => others.every((other) => !overlaps(candidate, drawnLayout(other)))

export const sameLayout = (a: Layout, b: Layout) => a.x === b.x && a.y === b.y && a.w === b.w && a.h === b.h

/** The rows the drawn tiles take: the grid's height in cells. */
export const rowsUsed = (layouts: Layout[]) => layouts.reduce((rows, layout) => Math.max(rows, layout.y + layout.h), 0)
