// The console's dashboard grid rules (services/api/console/app/views/analytics/grid.ts), pure: no browser, no services.
import { describe, expect, test } from 'bun:test'
import { compactRows, drawnLayout, gridArea, isFree, MAX_EMPTY_ROWS, mayTake, moved, overlapArea, overlaps, resized, rowsUsed } from '../../services/api/console/app/views/analytics/grid'

describe('where a stored tile is drawn', () => {
  test('a tile past column 12 is clipped at the edge, starting no later than the last column', () => {
    expect(drawnLayout({ x: 10, y: 0, w: 6, h: 2 })).toEqual({ x: 10, y: 0, w: 2, h: 2 })
    expect(drawnLayout({ x: 40, y: 1, w: 3, h: 2 })).toEqual({ x: 11, y: 1, w: 1, h: 2 })
    expect(gridArea({ x: 40, y: 1, w: 3, h: 2 })).toEqual({ gridColumn: '12 / span 1', gridRow: '2 / span 2' })
  })

  test('long runs of empty rows are drawn short, in stored order; touching and overlapping tiles keep their rows', () => {
    const far = Number.MAX_SAFE_INTEGER
    const layouts = [
      { x: 0, y: far, w: 4, h: 2 }, // stored last, listed first
      { x: 0, y: 0, w: 4, h: 2 },
      { x: 4, y: 1, w: 4, h: 2 }, // overlaps the rows of the one above: kept
      { x: 0, y: 5, w: 4, h: 2 }, // two empty rows above: kept
      { x: 0, y: 100, w: 4, h: 12 },
      { x: 4, y: 104, w: 4, h: 1 }, // inside the rows of the one before: kept relative to it
    ]
    expect(compactRows(layouts)).toEqual([7 + MAX_EMPTY_ROWS + 12 + MAX_EMPTY_ROWS, 0, 1, 5, 7 + MAX_EMPTY_ROWS, 7 + MAX_EMPTY_ROWS + 4])
    expect(rowsUsed(layouts)).toBe(7 + MAX_EMPTY_ROWS + 12 + MAX_EMPTY_ROWS + 2)
    // Empty rows above the first tile are shortened too; a grid with no long gap is drawn as stored.
    expect(compactRows([{ x: 0, y: 50, w: 1, h: 1 }])).toEqual([MAX_EMPTY_ROWS])
    expect(compactRows([{ x: 0, y: 2, w: 1, h: 1 }, { x: 0, y: 6, w: 1, h: 1 }])).toEqual([2, 6])
    expect(rowsUsed([])).toBe(0)
  })
})

describe('the editor', () => {
  test('a move stays inside the columns and below the top; a resize keeps 1 <= w, x + w <= 12, 1 <= h <= 12', () => {
    expect(moved({ x: 10, y: 0, w: 2, h: 1 }, 5, -3)).toEqual({ x: 10, y: 0, w: 2, h: 1 })
    expect(moved({ x: 2, y: 3, w: 2, h: 1 }, -5, 1)).toEqual({ x: 0, y: 4, w: 2, h: 1 })
    expect(resized({ x: 8, y: 0, w: 2, h: 1 }, 10, 20)).toEqual({ x: 8, y: 0, w: 4, h: 12 })
    expect(resized({ x: 8, y: 0, w: 2, h: 2 }, -5, -5)).toEqual({ x: 8, y: 0, w: 1, h: 1 })
  })

  test('a position overlapping another tile is not free; touching is', () => {
    const other = { x: 0, y: 0, w: 4, h: 2 }
    expect(overlaps({ x: 3, y: 1, w: 2, h: 2 }, other)).toBe(true)
    expect(isFree({ x: 4, y: 0, w: 2, h: 2 }, [other])).toBe(true)
    expect(isFree({ x: 0, y: 2, w: 2, h: 2 }, [other])).toBe(true)
    expect(isFree({ x: 3, y: 1, w: 2, h: 2 }, [other])).toBe(false)
    // Another tile stored past column 12 takes only the columns it is drawn in.
    expect(isFree({ x: 10, y: 0, w: 1, h: 1 }, [{ x: 11, y: 0, w: 6, h: 1 }])).toBe(true)
  })

  test('tiles stored overlapping may take any step that covers fewer of the others\' cells, and no other', () => {
    const other = { x: 0, y: 0, w: 4, h: 2 }
    const stuck = { x: 2, y: 0, w: 4, h: 2 } // 4 cells over the other
    expect(overlapArea(stuck, [other])).toBe(4)
    expect(mayTake({ ...stuck, x: 3 }, stuck, [other])).toBe(true) // 2 cells
    expect(mayTake({ ...stuck, y: 1 }, stuck, [other])).toBe(true) // 2 cells
    expect(mayTake({ ...stuck, x: 1 }, stuck, [other])).toBe(false) // 6 cells
    expect(mayTake({ ...stuck, w: 5 }, stuck, [other])).toBe(false) // as many
    // A free tile still never steps onto another.
    expect(mayTake({ x: 3, y: 2, w: 2, h: 2 }, { x: 4, y: 2, w: 2, h: 2 }, [other, { x: 0, y: 2, w: 4, h: 1 }])).toBe(false)
  })
})
