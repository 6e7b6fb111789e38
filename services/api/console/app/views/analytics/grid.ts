// The 12-column grid of a dashboard: where a stored tile is drawn, and the editor's rules for moving and resizing.
// Editing rules (docs/console.md): a tile snaps to whole cells, keeps 1 <= w <= 12 and x + w <= 12, 1 <= h <= 12 and
// y >= 0, and never overlaps another tile: a position that would overlap is not taken, the tile stays at its last free
// one (tiles stored overlapping may take steps that overlap less: mayTake). Nothing else moves, so a save changes
// exactly the tiles the reader moved.
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

/** The CSS grid lines of a layout drawn from row `drawnY` (grid lines count from 1). */
export function gridArea(layout: Layout, drawnY = layout.y): { gridColumn: string; gridRow: string } {
  const drawn = drawnLayout(layout)
  return { gridColumn: `${drawn.x + 1} / span ${drawn.w}`, gridRow: `${drawnY + 1} / span ${drawn.h}` }
}

/** The most empty rows drawn in a row: a longer run of empty rows (above or between tiles) is drawn this tall. */
export const MAX_EMPTY_ROWS = 3

/**
 * The row each layout is drawn from, by index. The API takes any y up to Number.MAX_SAFE_INTEGER, and a grid millions
 * of rows tall is not a page (the browser clamps it and pushes everything below off): runs of empty rows longer than
 * MAX_EMPTY_ROWS are drawn MAX_EMPTY_ROWS tall. Tiles keep their stored order, and tiles that touch or overlap keep
 * their relative rows, so the drawn grid reads as the stored one with the empty stretches shortened.
 */
export function compactRows(layouts: Layout[]): number[] {
  const order = layouts.map((layout, index) => ({ layout, index })).sort((a, b) => a.layout.y - b.layout.y)
  const drawnY: number[] = new Array(layouts.length)
  let storedEnd = 0 // the first stored row below every tile seen so far
  let removed = 0 // empty rows left out above the current tile
  for (const { layout, index } of order) {
    const gap = layout.y - storedEnd
    if (gap > MAX_EMPTY_ROWS) removed += gap - MAX_EMPTY_ROWS
    drawnY[index] = layout.y - removed
    storedEnd = Math.max(storedEnd, layout.y + layout.h)
  }
  return drawnY
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

/** How many cells of `candidate` other tiles (as drawn) cover. */
export const overlapArea = (candidate: Layout, others: Layout[]) => others.reduce((cells, other) => {
  const drawn = drawnLayout(other)
  const columns = Math.min(candidate.x + candidate.w, drawn.x + drawn.w) - Math.max(candidate.x, drawn.x)
  const rows = Math.min(candidate.y + candidate.h, drawn.y + drawn.h) - Math.max(candidate.y, drawn.y)
  return cells + (columns > 0 && rows > 0 ? columns * rows : 0)
}, 0)

/**
 * Whether a tile at `current` may step to `candidate`: onto free cells, or, for tiles stored overlapping (the API takes
 * them), any step that covers fewer cells of the others than it does now, so the editor can pull them apart.
 */
export const mayTake = (candidate: Layout, current: Layout, others: Layout[]) =>
  isFree(candidate, others) || overlapArea(candidate, others) < overlapArea(current, others)

export const sameLayout = (a: Layout, b: Layout) => a.x === b.x && a.y === b.y && a.w === b.w && a.h === b.h

/** The rows the tiles take as drawn (compactRows): the grid's height in cells. */
export function rowsUsed(layouts: Layout[]): number {
  const drawnY = compactRows(layouts)
  return layouts.reduce((rows, layout, index) => Math.max(rows, drawnY[index]! + layout.h), 0)
}
