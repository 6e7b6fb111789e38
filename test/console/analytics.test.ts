// The console's Analytics area in a real Chromium against a real api process: a dashboard of a time series, a
// breakdown, a funnel and a text tile drawn on its stored grid with the numbers analytics_insight_run answers, its
// markdown inert, a tile dragged and resized and saved, an older version restored, and the catalog listed.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Page } from 'playwright-core'
import { call, newProduct, ok, startProcess, type Worker } from '../helpers'
import { type ConsolePage, expectNoProblems, openArea, screenshot, useBrowser } from './browser'

type Owner = Awaited<ReturnType<typeof newProduct>>
type Layout = { x: number; y: number; w: number; h: number }

let apiWorker: Worker
let owner: Owner
beforeAll(async () => {
  apiWorker = await startProcess('api')
  owner = await newProduct('Analytics console')
})
afterAll(async () => {
  await apiWorker?.stop()
})
const browser = useBrowser(() => apiWorker.url)

const as = async (method: string, path: string, body?: unknown) =>
  ok(await call(method, path, { token: owner.token, productId: owner.productId, body }), `${method} ${path}`).body

// A fixed week, so the buckets and counts do not depend on when the test runs.
const RANGE = { from: '2026-11-01T00:00:00Z', to: '2026-11-08T00:00:00Z' }
const at = (day: number, hour = 12) => `2026-11-0${day}T${String(hour).padStart(2, '0')}:00:00Z`
const EVENTS = [
  ...['u1', 'u2', 'u3', 'u4', 'u5'].map((user, i) => ({ event: 'signup', timestamp: at(2 + (i % 3)), identity: { users_id: user }, properties: { plan: i < 3 ? 'free' : 'pro' } })),
  ...['u1', 'u2', 'u3'].map((user) => ({ event: 'activate', timestamp: at(5), identity: { users_id: user }, properties: { plan: 'free' } })),
  { event: 'purchase', timestamp: at(6), identity: { users_id: 'u1' }, properties: { plan: 'team' } },
]
const LAYOUTS: Record<string, Layout> = {
  series: { x: 0, y: 0, w: 8, h: 4 },
  breakdown: { x: 8, y: 0, w: 4, h: 4 },
  funnel: { x: 0, y: 4, w: 6, h: 4 },
  text: { x: 6, y: 4, w: 6, h: 4 },
}
const MARKDOWN = [
  '# Growth notes',
  'Read **the docs** and *the guide*: [platform docs](https://example.com/docs?a=1&b=2).',
  '',
  '- first `item`',
  '- second',
  '',
  '<script>window.__injected = true</script>',
  '[click me](javascript:window.__clicked=true) <img src=x onerror="window.__injected=true">',
].join('\n')

/** Numbers as the page writes them (grouped digits), read back. */
const numberOf = (text: string | null) => Number(String(text).replace(/,/g, ''))
const PERCENT = new Intl.NumberFormat('en-US', { style: 'percent', maximumFractionDigits: 1 })

/** Each tile's place on the grid as drawn: measured from the boxes on the page, in grid cells. */
function drawnLayouts(page: Page): Promise<Record<string, Layout>> {
  return page.evaluate(() => {
    const grid = document.querySelector<HTMLElement>('[data-testid=dashboard-grid]')!
    const style = getComputedStyle(grid)
    const column = (grid.getBoundingClientRect().width + parseFloat(style.columnGap)) / 12
    const row = parseFloat(style.getPropertyValue('--row-height')) + parseFloat(style.rowGap)
    const origin = grid.getBoundingClientRect()
    return Object.fromEntries([...grid.querySelectorAll<HTMLElement>('[data-tile-id]')].map((tile) => {
      const box = tile.getBoundingClientRect()
      return [tile.dataset.tileId!, {
        x: Math.round((box.left - origin.left) / column), y: Math.round((box.top - origin.top) / row),
        w: Math.round((box.width + parseFloat(style.columnGap)) / column), h: Math.round((box.height + parseFloat(style.rowGap)) / row),
      }]
    }))
  })
}

/**
 * Drags from the centre of `selector` by whole grid cells, as a person would with a mouse; `during` runs with the
 * button still down.
 */
async function drag(page: Page, selector: string, columns: number, rows: number, during?: () => Promise<void>): Promise<void> {
  await page.locator(selector).scrollIntoViewIfNeeded()
  const box = (await page.locator(selector).boundingBox())!
  const step = await page.evaluate(() => {
    const grid = document.querySelector<HTMLElement>('[data-testid=dashboard-grid]')!
    const style = getComputedStyle(grid)
    return { column: (grid.getBoundingClientRect().width + parseFloat(style.columnGap)) / 12, row: parseFloat(style.getPropertyValue('--row-height')) + parseFloat(style.rowGap) }
  })
  const [x, y] = [box.x + box.width / 2, box.y + box.height / 2]
  await page.mouse.move(x, y)
  await page.mouse.down()
  await page.mouse.move(x + columns * step.column, y + rows * step.row, { steps: 12 })
  await during?.()
  await page.mouse.up()
}

async function openDashboard(console: ConsolePage, dashboardId: string, insightTiles: number): Promise<void> {
  const { page } = console
  await openArea(page, owner, owner.productId, 'analytics')
  await page.click(`[data-dashboard-id="${dashboardId}"]`)
  await page.waitForSelector('[data-testid=dashboard-grid]')
  await page.waitForFunction((count) => document.querySelectorAll('.tile-body[data-kind]').length === count, insightTiles)
}

/**
 * No horizontal overflow at a phone's, a laptop's and a wide screen's width, measured in the page: the document is no
 * wider than the window, and no element reaches past it (inside a chart's canvas box or a table's own scroll box
 * excepted: those clip). The shell's top bar is not this area's: at 390 px it still runs off the screen (the shell's
 * layout is changed apart), so while it does the document's width is checked through every other element.
 */
async function expectFits(page: Page, view: string): Promise<void> {
  for (const width of [390, 1280, 1920]) {
    await page.setViewportSize({ width, height: 900 })
    const sizes = await page.evaluate(() => {
      const window = document.documentElement.clientWidth
      const over = [...document.querySelectorAll<HTMLElement>('body *')]
        .filter((element) => !element.closest('.chart, .table-scroll') && element.getBoundingClientRect().right > window + 0.5)
        .map((element) => (element.closest('.topbar') ? 'topbar' : `${element.tagName.toLowerCase()}.${element.className}`))
      return { document: document.documentElement.scrollWidth, window, over: [...new Set(over)] }
    })
    expect({ view, width, over: sizes.over.filter((element) => element !== 'topbar') }).toEqual({ view, width, over: [] })
    if (!sizes.over.includes('topbar')) expect({ view, width, document: sizes.document <= sizes.window }).toEqual({ view, width, document: true })
  }
  await page.setViewportSize({ width: 1280, height: 860 })
}

describe('a dashboard', () => {
  let dashboard: { id: string; updated_at: string; tiles: { id: string; type: string; insight_id?: string; title: string | null; markdown?: string; layout: Layout }[] }
  let tileIds: Record<string, string>
  beforeAll(async () => {
    expect(await as('POST', '/tracking/events', { events: EVENTS })).toEqual({ accepted: EVENTS.length })
    const series = await as('POST', '/analytics/insights', { name: 'Events per day', kind: 'metric', query: { entity: 'events', metrics: ['count'], range: RANGE, bucket: 'day' } })
    const breakdown = await as('POST', '/analytics/insights', { name: 'Events by plan', kind: 'metric', query: { entity: 'events', metrics: ['count'], dimensions: ['properties.plan'], range: RANGE } })
    const funnel = await as('POST', '/analytics/insights', {
      name: 'Signup to purchase', kind: 'funnel',
      query: { steps: ['signup', 'activate', 'purchase'].map((event) => ({ entity: 'events', event })), identity: 'users_id', range: RANGE },
    })
    dashboard = await as('POST', '/analytics/dashboards', {
      slug: 'growth', name: 'Growth', tags: ['weekly'],
      tiles: [
        { type: 'insight', insight_id: series.id, title: null, layout: LAYOUTS.series },
        { type: 'insight', insight_id: breakdown.id, title: 'Plans', layout: LAYOUTS.breakdown },
        { type: 'insight', insight_id: funnel.id, layout: LAYOUTS.funnel },
        { type: 'text', markdown: MARKDOWN, title: 'Notes', layout: LAYOUTS.text },
      ],
    })
    tileIds = Object.fromEntries(['series', 'breakdown', 'funnel', 'text'].map((name, i) => [name, dashboard.tiles[i]!.id]))
  })

  test('is drawn on its stored grid, each insight with the numbers analytics_insight_run answers, the markdown inert', async () => {
    const console = await browser.open()
    const { page } = console
    await openDashboard(console, dashboard.id, 3)
    const tile = (name: string) => `[data-tile-id="${tileIds[name]}"]`
    const run = async (name: string) => (await as('POST', `/analytics/insights/${dashboard.tiles.find((t) => t.id === tileIds[name])!.insight_id}/run`, {})).result

    // Where each tile is drawn, measured in cells from the page, is where it is stored.
    const drawn = await drawnLayouts(page)
    for (const [name, layout] of Object.entries(LAYOUTS)) expect([name, drawn[tileIds[name]!]]).toEqual([name, layout])

    // Titles: the tile's own, else its insight's name.
    await page.waitForFunction((selector) => document.querySelector(`${selector} .tile-title`)?.textContent === 'Events per day', tile('series'))
    expect(await page.textContent(`${tile('breakdown')} .tile-title`)).toBe('Plans')
    await page.waitForFunction((selector) => document.querySelector(`${selector} .tile-title`)?.textContent === 'Signup to purchase', tile('funnel'))

    // The time series: a line chart on a canvas, and every bucket's count in its table equal to the API's.
    const series = await run('series')
    expect(await page.locator(`${tile('series')} [data-chart=lines] canvas`).count()).toBeGreaterThan(0)
    const seriesRows = await page.$$eval(`${tile('series')} .data-table tbody tr`, (rows) =>
      rows.map((row) => [(row as HTMLElement).dataset.key, ...[...row.querySelectorAll('td')].map((cell) => cell.textContent)]))
    expect(seriesRows.map(([bucket, day, count]) => [bucket, day, numberOf(count!)]))
      .toEqual(series.rows.map((row: any) => [row.bucket, row.bucket.slice(0, 10), row.count]))
    expect(series.rows.map((row: any) => row.count)).toEqual([0, 2, 2, 1, 3, 1, 0]) // the API's answer is the one meant
    expect(numberOf(await page.textContent(`${tile('series')} .series-total`))).toBe(series.rows.reduce((sum: number, row: any) => sum + row.count, 0))

    // The breakdown: bars, and each plan's count equal to the API's.
    const breakdown = await run('breakdown')
    expect(await page.locator(`${tile('breakdown')} [data-chart=bars] canvas`).count()).toBeGreaterThan(0)
    const plans = await page.$$eval(`${tile('breakdown')} .data-table tbody tr`, (rows) => rows.map((row) => [...row.querySelectorAll('td')].map((cell) => cell.textContent)))
    expect(plans.map(([plan, count]) => [plan, numberOf(count!)])).toEqual(breakdown.rows.map((row: any) => [row['properties.plan'], row.count]))
    expect(breakdown.rows.length).toBe(3)

    // The funnel: each step's count and conversion as the API answers them.
    const funnel = await run('funnel')
    const steps = await page.$$eval(`${tile('funnel')} [data-step]`, (items) => items.map((item) => [
      item.querySelector('.funnel-event')!.textContent, item.querySelector('.funnel-count')!.textContent,
      item.querySelector('.funnel-conversion')?.textContent ?? null, item.querySelector('.funnel-overall')?.textContent ?? null,
    ]))
    expect(steps.map(([event, count, previous, overall]) => [event, numberOf(count!), previous, overall])).toEqual(funnel.steps.map((step: any) => [
      step.event, step.count,
      step.conversionFromPrevious === null ? null : PERCENT.format(step.conversionFromPrevious),
      step.conversionFromFirst === null ? null : PERCENT.format(step.conversionFromFirst),
    ]))
    expect(funnel.steps.map((step: any) => step.count)).toEqual([5, 3, 1])

    // The text tile: markdown as elements; the script, the handler and the javascript: link stay text.
    const text = `${tile('text')} .tile-body`
    expect(await page.textContent(`${text} h4`)).toBe('Growth notes')
    expect(await page.textContent(`${text} strong`)).toBe('the docs')
    expect(await page.textContent(`${text} em`)).toBe('the guide')
    expect(await page.locator(`${text} li`).allTextContents()).toEqual(['first item', 'second'])
    expect(await page.textContent(`${text} li code`)).toBe('item')
    const links = await page.$$eval(`${text} a`, (anchors) => anchors.map((a) => [a.getAttribute('href'), a.getAttribute('rel'), a.textContent]))
    expect(links).toEqual([['https://example.com/docs?a=1&b=2', 'noopener noreferrer', 'platform docs']])
    const inert = await page.evaluate((selector) => {
      const body = document.querySelector(selector)!
      return {
        elements: body.querySelectorAll('script, img, iframe, [onerror], [href^="javascript"]').length,
        scripts: document.querySelectorAll('script').length, // the page's own module only
        injected: (window as any).__injected ?? null, clicked: (window as any).__clicked ?? null,
        text: body.textContent,
      }
    }, text)
    expect(inert).toMatchObject({ elements: 0, scripts: 1, injected: null, clicked: null })
    expect(inert.text).toContain('<script>window.__injected = true</script>')
    expect(inert.text).toContain('[click me](javascript:window.__clicked=true)')
    await page.click(`${text} >> text=click me`)
    expect(await page.evaluate(() => (window as any).__clicked ?? null)).toBeNull()

    await page.mouse.move(0, 0) // no tile hovered: its Remove stays hidden in the picture
    await screenshot(page, 'analytics-dashboard')
    expectNoProblems(console)
  })

  test('a tile dragged and another resized are saved with analytics_dashboard_update; a restore brings the old layout back', async () => {
    const console = await browser.open()
    const { page } = console
    await openDashboard(console, dashboard.id, 3)
    await page.click('[data-action=edit]')
    await page.waitForSelector('[data-testid=dashboard-grid].editing')
    const tile = (name: string) => `[data-tile-id="${tileIds[name]}"]`

    // Onto another tile is refused: the breakdown dragged over the time series stays where it was (the editor took
    // the drag: the tile is lifted while the button is down).
    await drag(page, `${tile('breakdown')} .tile-head`, -6, 0, async () => {
      expect(await page.getAttribute(tile('breakdown'), 'class')).toContain('dragging')
      expect(await page.getAttribute(tile('breakdown'), 'data-x')).toBe('8')
    })
    // A drag moves a tile while it is free and stops at its last free place: the text tile down a row, then up onto
    // the breakdown, ends where it started.
    await drag(page, `${tile('text')} .tile-head`, 0, 1, async () => {
      expect(await page.getAttribute(tile('text'), 'data-y')).toBe('5')
      const box = (await page.locator(`${tile('text')} .tile-head`).boundingBox())!
      await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2 - 5 * 88, { steps: 10 })
      expect(await page.getAttribute(tile('text'), 'data-y')).toBe('4')
    })
    expect((await drawnLayouts(page))[tileIds.text!]).toEqual(LAYOUTS.text)
    // The text tile moves under the funnel, and the funnel grows into the room it left.
    await drag(page, `${tile('text')} .tile-head`, -6, 4)
    await drag(page, `${tile('funnel')} .resize-handle`, 6, 0)
    const expected = { ...LAYOUTS, funnel: { x: 0, y: 4, w: 12, h: 4 }, text: { x: 0, y: 8, w: 6, h: 4 } }
    const drawn = await drawnLayouts(page)
    for (const [name, layout] of Object.entries(expected)) expect([name, drawn[tileIds[name]!]]).toEqual([name, layout])

    await page.click('[data-action=save]')
    await page.waitForSelector('[data-action=edit]')
    const saved = await as('GET', `/analytics/dashboards/${dashboard.id}`)
    // Every tile kept its id, kind, insight, title and markdown; only the layouts moved.
    expect(saved.tiles).toEqual(dashboard.tiles.map((stored) => {
      const name = Object.keys(tileIds).find((key) => tileIds[key] === stored.id)!
      return { ...stored, layout: expected[name as keyof typeof expected] }
    }))
    // The header says when: the save's own time, as the reader's clock writes it.
    expect(await page.textContent('[data-testid=dashboard-updated]')).toBe(await page.evaluate((iso) => new Date(iso).toLocaleString(), saved.updated_at))
    expect(saved.updated_at).not.toBe(dashboard.updated_at)

    // History: the save is version 2; restoring version 1 redraws the stored layout and the API answers it too.
    await page.waitForSelector('[data-testid=versions] tr[data-version="2"]')
    expect(await page.textContent('[data-testid=versions] tr[data-version="1"] td:nth-child(2)')).toBe('create')
    expect(await page.textContent('[data-testid=versions] tr[data-version="2"] td:nth-child(4)')).toBe(owner.email) // who saved, by name
    await page.click('[data-testid=versions] tr[data-version="1"] [data-action=restore]')
    // Asked in the page; no unsaved edits, so no warning. Confirming twice at once still writes one version.
    await page.waitForSelector('[data-testid=versions] tr[data-version="1"] [data-testid=confirm-restore]')
    expect(await page.locator('[data-testid=unsaved-warning]').count()).toBe(0)
    await page.evaluate(() => {
      const button = document.querySelector<HTMLButtonElement>('[data-testid=versions] tr[data-version="1"] [data-action=confirm-restore]')!
      button.click()
      button.click()
    })
    await page.waitForSelector('[data-testid=versions] tr[data-version="3"]')
    await page.waitForFunction((id) => document.querySelector<HTMLElement>(`[data-tile-id="${id}"]`)?.dataset.y === '4', tileIds.text)
    const restored = await drawnLayouts(page)
    for (const [name, layout] of Object.entries(LAYOUTS)) expect([name, restored[tileIds[name]!]]).toEqual([name, layout])
    expect((await as('GET', `/analytics/dashboards/${dashboard.id}`)).tiles).toEqual(dashboard.tiles)
    expect(await page.textContent('[data-testid=versions] tr[data-version="3"] td:nth-child(2)')).toBe('restore of version 1')
    await page.waitForFunction(() => document.querySelectorAll('.tile-body[data-kind]').length === 3)
    const versions = await as('GET', `/analytics/dashboards/${dashboard.id}/versions?limit=20`)
    expect(versions.versions.map((version: { version: number }) => version.version)).toEqual([3, 2, 1])
    expectNoProblems(console)
  })

  test('a save over a change made elsewhere, or of a dashboard deleted meanwhile, is refused and says why', async () => {
    const notes = await as('POST', '/analytics/dashboards', {
      slug: 'notes', name: 'Notes', tiles: [{ type: 'text', markdown: 'Hello', layout: { x: 0, y: 0, w: 4, h: 2 } }],
    })
    const console = await browser.open()
    const { page } = console
    await openDashboard(console, notes.id, 0)
    await page.click('[data-action=edit]')
    await as('PATCH', `/analytics/dashboards/${notes.id}`, { name: 'Notes (renamed elsewhere)' })
    // The keyboard edits as the pointer does: Shift+arrows resize, a cell at a time.
    await page.focus(`[data-tile-id="${notes.tiles[0].id}"] .tile-head`)
    await page.keyboard.press('Shift+ArrowRight')
    await page.keyboard.press('Shift+ArrowRight')
    expect(await page.getAttribute(`[data-tile-id="${notes.tiles[0].id}"]`, 'data-w')).toBe('6')
    await page.click('[data-action=save]')
    await page.waitForSelector('[data-testid=dashboard-error]:not(:empty)')
    expect(await page.textContent('[data-testid=dashboard-error]')).toMatch(/changed since it was drawn/)
    expect((await as('GET', `/analytics/dashboards/${notes.id}`)).tiles[0].layout).toEqual({ x: 0, y: 0, w: 4, h: 2 })
    // Redraw draws the dashboard as stored now, the edit dropped, without loading the page again.
    await page.click('[data-testid=dashboard-error] [data-action=redraw]')
    await page.waitForFunction(() => document.querySelector('[data-testid=dashboard-name]')?.textContent === 'Notes (renamed elsewhere)')
    expect(await page.getAttribute(`[data-tile-id="${notes.tiles[0].id}"]`, 'data-w')).toBe('4')
    expect(await page.textContent('[data-testid=dashboard-error]')).toBe('')
    await page.click('[data-action=edit]')
    await page.focus(`[data-tile-id="${notes.tiles[0].id}"] .tile-head`)
    await page.keyboard.press('Shift+ArrowRight')

    await as('DELETE', `/analytics/dashboards/${notes.id}`)
    await page.click('[data-action=save]')
    await page.waitForFunction(() => /Not saved: .*not found/i.test(document.querySelector('[data-testid=dashboard-error]')?.textContent ?? ''))
    expect(console.problems.filter((problem) => !/404/.test(problem))).toEqual([]) // the browser logs the refused fetch
  })
})

describe('stored layouts the editor would not make', () => {
  test('a tile stored far below the others is drawn a few rows under them, saying where it is stored', async () => {
    const far = Number.MAX_SAFE_INTEGER // the API takes any y up to this
    const stored = await as('POST', '/analytics/dashboards', {
      slug: 'far-tile', name: 'Far tile',
      tiles: [
        { type: 'text', markdown: 'Near', layout: { x: 0, y: 0, w: 4, h: 2 } },
        { type: 'text', markdown: 'Far', layout: { x: 0, y: far, w: 4, h: 2 } },
      ],
    })
    const console = await browser.open()
    const { page } = console
    await openDashboard(console, stored.id, 0)
    const [near, farTile] = stored.tiles.map((tile: { id: string }) => tile.id)
    const drawn = await drawnLayouts(page)
    expect(drawn[near]).toEqual({ x: 0, y: 0, w: 4, h: 2 })
    // Three empty rows drawn between them, not nine quadrillion; the tile says where it really is.
    expect(drawn[farTile]).toEqual({ x: 0, y: 5, w: 4, h: 2 })
    expect(await page.textContent(`[data-tile-id="${farTile}"] .stored-row`)).toBe(`stored at row ${new Intl.NumberFormat('en-US').format(far + 1)}`)
    expect(await page.textContent(`[data-tile-id="${near}"] .stored-row`)).toBe('')
    // The history is right under the grid, its Restore within reach.
    await page.waitForSelector('[data-testid=versions] tr[data-version="1"]')
    const gap = await page.evaluate(() => document.querySelector('[data-testid=versions]')!.getBoundingClientRect().top
      - document.querySelector('[data-testid=dashboard-grid]')!.getBoundingClientRect().bottom)
    expect(gap).toBeGreaterThanOrEqual(0)
    expect(gap).toBeLessThan(100)
    expectNoProblems(console)
  })
})

describe('stored overlapping, or past column 12', () => {
  test('is drawn where stored, clipped at the edge; the keyboard pulls overlapping tiles apart and the save keeps the rest as stored', async () => {
    const stored = await as('POST', '/analytics/dashboards', {
      slug: 'overlapping', name: 'Overlapping',
      tiles: [
        { type: 'text', markdown: 'A', title: 'A', layout: { x: 0, y: 0, w: 4, h: 2 } },
        { type: 'text', markdown: 'B', title: 'B', layout: { x: 2, y: 0, w: 4, h: 2 } },
        { type: 'text', markdown: 'C', title: 'C', layout: { x: 10, y: 3, w: 6, h: 1 } },
      ],
    })
    const [a, b, c] = stored.tiles.map((tile: { id: string }) => tile.id)
    const console = await browser.open()
    const { page } = console
    await openDashboard(console, stored.id, 0)
    const drawn = await drawnLayouts(page)
    expect([drawn[a], drawn[b], drawn[c]]).toEqual([{ x: 0, y: 0, w: 4, h: 2 }, { x: 2, y: 0, w: 4, h: 2 }, { x: 10, y: 3, w: 2, h: 1 }])

    await page.click('[data-action=edit]')
    await page.focus(`[data-tile-id="${b}"] .tile-head`)
    await page.keyboard.press('ArrowLeft') // more overlap: refused
    expect(await page.getAttribute(`[data-tile-id="${b}"]`, 'data-x')).toBe('2')
    await page.keyboard.press('ArrowRight') // less: taken
    expect(await page.getAttribute(`[data-tile-id="${b}"]`, 'data-x')).toBe('3')
    await page.keyboard.press('ArrowRight') // apart
    expect(await page.getAttribute(`[data-tile-id="${b}"]`, 'data-x')).toBe('4')
    await page.keyboard.press('ArrowLeft') // and, once apart, never onto it again
    expect(await page.getAttribute(`[data-tile-id="${b}"]`, 'data-x')).toBe('4')
    await page.click('[data-action=save]')
    await page.waitForSelector('[data-action=edit]')
    expect((await as('GET', `/analytics/dashboards/${stored.id}`)).tiles.map((tile: { layout: Layout }) => tile.layout))
      .toEqual([{ x: 0, y: 0, w: 4, h: 2 }, { x: 4, y: 0, w: 4, h: 2 }, { x: 10, y: 3, w: 6, h: 1 }])
    expectNoProblems(console)
  })
})

describe('saving, cancelling and restoring', () => {
  test('nothing moved writes nothing; Cancel puts tiles back; Older versions pages; Restore is asked, warns of edits, and waits for a save', async () => {
    const stored = await as('POST', '/analytics/dashboards', {
      slug: 'versions', name: 'Versions', tiles: [{ type: 'text', markdown: 'One', title: 'One', layout: { x: 0, y: 0, w: 4, h: 2 } }],
    })
    for (let i = 1; i <= 21; i++) await as('PATCH', `/analytics/dashboards/${stored.id}`, { name: `Versions ${i}` })
    const tile = `[data-tile-id="${stored.tiles[0].id}"]`
    const versionCount = async () => (await as('GET', `/analytics/dashboards/${stored.id}/versions?limit=50`)).versions.length
    const console = await browser.open()
    const { page } = console
    await openDashboard(console, stored.id, 0)

    // 22 versions: the newest 20, then the rest on asking.
    await page.waitForSelector('[data-testid=versions] tr[data-version="22"]')
    expect(await page.locator('[data-testid=versions] tbody tr').count()).toBe(20)
    await page.click('[data-testid=older-versions]')
    await page.waitForSelector('[data-testid=versions] tr[data-version="1"]')
    expect(await page.$$eval('[data-testid=versions] tbody tr', (rows) => rows.map((row) => Number((row as HTMLElement).dataset.version))))
      .toEqual(Array.from({ length: 22 }, (_, i) => 22 - i))
    expect(await page.locator('[data-testid=older-versions]').count()).toBe(0)

    // Save with nothing moved: no update, no version.
    await page.click('[data-action=edit]')
    await page.click('[data-action=save]')
    await page.waitForSelector('[data-action=edit]')
    expect(await versionCount()).toBe(22)

    // Cancel: the moved tile goes back, nothing is written.
    await page.click('[data-action=edit]')
    await page.focus(`${tile} .tile-head`)
    await page.keyboard.press('ArrowDown')
    expect(await page.getAttribute(tile, 'data-y')).toBe('1')
    await page.click('[data-action=cancel]')
    await page.waitForSelector('[data-action=edit]')
    expect(await page.getAttribute(tile, 'data-y')).toBe('0')
    expect(await versionCount()).toBe(22)

    // Restore with an edit pending: asked in the page, warned; Keep leaves everything as it was.
    await page.click('[data-action=edit]')
    await page.focus(`${tile} .tile-head`)
    await page.keyboard.press('ArrowDown')
    await page.click('[data-testid=versions] tr[data-version="21"] [data-action=restore]')
    await page.waitForSelector('[data-testid=versions] tr[data-version="21"] [data-testid=unsaved-warning]')
    await page.click('[data-testid=versions] tr[data-version="21"] [data-action=keep]')
    expect(await page.locator('[data-testid=confirm-restore]').count()).toBe(0)

    // While a save is in flight (its update held here), Cancel, Save and every Restore are disabled.
    let release = () => {}
    const held = new Promise<void>((resolve) => { release = resolve })
    await page.route(`**/analytics/dashboards/${stored.id}`, async (route) => {
      if (route.request().method() === 'PATCH') await held
      await route.continue()
    })
    await page.click('[data-action=save]')
    await page.waitForSelector('[data-action=cancel][disabled]')
    expect(await page.isDisabled('[data-action=save]')).toBe(true)
    expect(await page.$$eval('[data-testid=versions] [data-action=restore]', (buttons) => buttons.map((button) => (button as HTMLButtonElement).disabled)))
      .toEqual(Array.from({ length: 21 }, () => true))
    release()
    await page.waitForSelector('[data-testid=versions] tr[data-version="23"]')
    await page.waitForSelector('[data-action=edit]:not([disabled])')
    expect(await page.isDisabled('[data-testid=versions] tr[data-version="22"] [data-action=restore]')).toBe(false)
    expect(await versionCount()).toBe(23)
    expectNoProblems(console)
  })

  test('when two loads of the history overlap, the one started last is drawn', async () => {
    const stored = await as('POST', '/analytics/dashboards', {
      slug: 'overlapping-loads', name: 'Overlapping loads', tiles: [{ type: 'text', markdown: 'One', title: 'One', layout: { x: 0, y: 0, w: 4, h: 2 } }],
    })
    const console = await browser.open()
    const { page } = console
    // The answer to the page's first load of the history is held until the save's load has been drawn.
    let release = () => {}
    const held = new Promise<void>((resolve) => { release = resolve })
    let loads = 0
    await page.route(`**/analytics/dashboards/${stored.id}/versions*`, async (route) => {
      const response = await route.fetch() // answered now (version 1 only), handed to the page later
      if (++loads === 1) await held
      await route.fulfill({ response })
    })
    await openDashboard(console, stored.id, 0)
    await page.click('[data-action=edit]')
    await page.focus(`[data-tile-id="${stored.tiles[0].id}"] .tile-head`)
    await page.keyboard.press('ArrowDown')
    await page.click('[data-action=save]')
    await page.waitForSelector('[data-testid=versions] tr[data-version="2"]')
    release()
    // The held answer (version 1 only) arrives and is dropped.
    await page.waitForFunction(() => performance.getEntriesByType('resource').filter((entry) => entry.name.includes('/versions')).length === 2)
    await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))))
    expect(await page.$$eval('[data-testid=versions] tbody tr', (rows) => rows.map((row) => (row as HTMLElement).dataset.version))).toEqual(['2', '1'])
    expectNoProblems(console)
  })
})

describe('results too big for a tile', () => {
  let stored: { id: string; tiles: { id: string }[] }
  beforeAll(async () => {
    // Twelve countries, country i with i + 1 signups: more lines than a tile draws.
    const events = Array.from({ length: 12 }, (_, i) => Array.from({ length: i + 1 }, (_, n) => ({
      event: 'visit', timestamp: at(3), identity: { users_id: `c${i}-${n}` }, properties: { country: `c${i}` },
    }))).flat()
    expect(await as('POST', '/tracking/events', { events })).toEqual({ accepted: events.length })
    const series = await as('POST', '/analytics/insights', { name: 'By country', kind: 'metric', query: { entity: 'events', metrics: ['count'], dimensions: ['properties.country'], range: RANGE, bucket: 'day' } })
    const partial = await as('POST', '/analytics/insights', { name: 'Partial', kind: 'metric', query: { entity: 'events', metrics: ['count'], dimensions: ['properties.country'], range: RANGE, limit: 2 } })
    const funnel = await as('POST', '/analytics/insights', {
      name: 'Nobody buys', kind: 'funnel',
      query: { steps: ['visit', 'never-happens'].map((event) => ({ entity: 'events', event })), identity: 'users_id', range: RANGE },
    })
    stored = await as('POST', '/analytics/dashboards', {
      slug: 'big-results', name: 'Big results',
      tiles: [series, partial, funnel].map((insight, i) => ({ type: 'insight', insight_id: insight.id, layout: { x: 4 * i, y: 0, w: 4, h: 5 } })),
    })
  })

  test('a series split many ways draws the largest lines and says how many more; a partial result says so on the tile; a zero step is drawn zero', async () => {
    const console = await browser.open()
    const { page } = console
    await openDashboard(console, stored.id, 3)
    const [series, partial, funnel] = stored.tiles.map((tile) => `[data-tile-id="${tile.id}"]`)
    const run = (await as('POST', `/analytics/insights/${(stored.tiles[0] as any).insight_id}/run`, {})).result
    const totals = new Map<string, number>()
    for (const row of run.rows) totals.set(row['properties.country'] ?? '(none)', (totals.get(row['properties.country'] ?? '(none)') ?? 0) + row.count)
    expect(totals.size).toBeGreaterThan(8)
    const largest = [...totals].sort((a, b) => b[1] - a[1]).slice(0, 8)
    const legend = await page.$$eval(`${series} .legend li`, (items) => items.map((item) => [item.querySelector('.series-label')!.textContent, item.querySelector('.series-total')!.textContent]))
    expect(legend.map(([label, total]) => [label, numberOf(total ?? null)])).toEqual(largest)
    expect(await page.textContent(`${series} [data-testid=more-series]`)).toContain(`${totals.size - 8} more lines not drawn`)
    expect(await page.locator(`${series} .data-table thead th`).count()).toBe(1 + 8)

    expect(await page.isVisible(`${partial} [data-testid=truncated]`)).toBe(true)
    expect(await page.locator(`${series} [data-testid=truncated]`).count()).toBe(0)

    const widths = await page.$$eval(`${funnel} .funnel-bar`, (bars) => bars.map((bar) => (bar as HTMLElement).style.width))
    expect(widths).toEqual(['100%', '0%'])
    expectNoProblems(console)
  })

  test('a run refused 429 is run again; without the catalog, a line shows its latest value, never a sum of a type it does not know', async () => {
    const console = await browser.open()
    const { page } = console
    await page.route('**/analytics/catalog', (route) => route.fulfill({ status: 503, contentType: 'application/json', body: JSON.stringify({ error: 'unavailable', message: 'Catalog down' }) }))
    // The series' first run is refused 429 (as an org-wide bound answers, retryAfter in the body): it is run again.
    const seriesRuns: number[] = []
    await page.route(`**/analytics/insights/${(stored.tiles[0] as any).insight_id}/run`, (route) => {
      seriesRuns.push(seriesRuns.length + 1)
      return seriesRuns.length === 1
        ? route.fulfill({ status: 429, contentType: 'application/json', body: JSON.stringify({ error: 'too_many_queries', message: 'Busy', retryAfter: 0 }) })
        : route.continue()
    })
    await openDashboard(console, stored.id, 3)
    expect(seriesRuns).toEqual([1, 2])
    const series = `[data-tile-id="${stored.tiles[0]!.id}"]`
    const first = page.locator(`${series} .legend li`).first()
    expect(await first.locator('.muted').textContent()).toBe('latest ')
    const label = await first.locator('.series-label').textContent()
    const run = (await as('POST', `/analytics/insights/${(stored.tiles[0] as any).insight_id}/run`, {})).result
    const rows = run.rows.filter((row: any) => (row['properties.country'] ?? '(none)') === label)
    expect(numberOf(await first.locator('.series-total').textContent())).toBe(rows.at(-1).count)
    expect(console.problems.filter((problem) => !/503|429/.test(problem))).toEqual([]) // the browser logs the refused fetches
  })
})

describe('the catalog', () => {
  test('lists every entity the API returns, with its metrics, dimensions and identity kinds', async () => {
    const catalog = await as('GET', '/analytics/catalog')
    const console = await browser.open()
    const { page } = console
    await openArea(page, owner, owner.productId, 'analytics')
    await page.click('.tabs a[href$="/catalog"]')
    await page.waitForSelector('[data-testid=catalog]')
    const shown = await page.$$eval('[data-testid=catalog] [data-entity]', (cards) => cards.map((card) => ({
      entity: (card as HTMLElement).dataset.entity,
      metrics: [...card.querySelectorAll('table.metrics tbody tr')].map((row) => [row.children[0]!.textContent, row.children[1]!.textContent]),
      dimensions: [...card.querySelectorAll('table.dimensions tbody tr td:first-child')].map((cell) => cell.textContent),
      identityKinds: [...card.querySelectorAll('[data-identity]')].map((kind) => kind.textContent),
    })))
    expect(shown).toEqual(catalog.entities.map((entity: any) => ({
      entity: entity.entity,
      metrics: entity.metrics.map((metric: any) => [metric.name, metric.type]),
      dimensions: entity.dimensions.map((dimension: any) => dimension.name),
      identityKinds: entity.identityKinds,
    })))
    expect(shown.map((entity) => entity.entity)).toContain('events')
    await screenshot(page, 'analytics-catalog')

    // The index scrolls to an entity without touching the hash (the console's route): no `#entity-…` links.
    expect(await page.locator('a[href^="#entity-"]').count()).toBe(0)
    const hash = await page.evaluate(() => location.hash)
    const last = catalog.entities.at(-1).entity
    await page.click(`[data-entity-link="${last}"]`)
    await page.waitForFunction((entity) => {
      const box = document.querySelector(`[data-testid=catalog] [data-entity="${entity}"]`)!.getBoundingClientRect()
      return box.top >= 0 && box.top < innerHeight
    }, last)
    expect(await page.evaluate(() => location.hash)).toBe(hash)

    // The area's styles stay in the area: a .tag or button.small elsewhere on the page is not styled by them.
    const styles = await page.evaluate(() => {
      const outside = document.createElement('div')
      const tag = document.createElement('span')
      tag.className = 'tag'
      const button = document.createElement('button')
      button.className = 'small'
      outside.append(tag, button)
      document.body.append(outside)
      const inside = document.querySelector<HTMLElement>('[data-testid=catalog] .tag')!
      const result = {
        outsideTagRadius: getComputedStyle(tag).borderTopLeftRadius, outsideButtonPadding: getComputedStyle(button).paddingLeft,
        insideTagRadius: getComputedStyle(inside).borderTopLeftRadius,
      }
      outside.remove()
      return result
    })
    expect(styles.insideTagRadius).toBe('10px')
    expect(styles.outsideTagRadius).not.toBe('10px')
    expect(styles.outsideButtonPadding).not.toBe('10px')
    expectNoProblems(console)
  })
})

describe('insights and dashboards made in the page', () => {
  let maker: Owner
  const by = async (method: string, path: string, body?: unknown) =>
    ok(await call(method, path, { token: maker.token, productId: maker.productId, body }), `${method} ${path}`).body
  const TREND = {
    entity: 'events', metrics: ['count'], dimensions: ['properties.plan'], range: RANGE, bucket: 'day', timezone: 'UTC',
    filters: [{ field: 'event', op: 'equals', value: 'signup' }],
  }
  const FUNNEL = { steps: ['signup', 'activate', 'purchase'].map((event) => ({ entity: 'events', event })), identity: 'users_id', windowDays: 14, range: RANGE }
  beforeAll(async () => {
    maker = await newProduct('Made in the page')
    expect(await by('POST', '/tracking/events', { events: EVENTS })).toEqual({ accepted: EVENTS.length })
  })

  /** The preview's state once it has drawn `query`. */
  const previewDrew = (page: Page, query: unknown) =>
    page.waitForFunction((wanted) => {
      const preview = document.querySelector<HTMLElement>('[data-testid=preview]')
      return preview?.dataset.state === 'drawn' && preview.dataset.query === wanted
    }, JSON.stringify(query))

  /** A time series tile's table as {bucket: {line: count}}. */
  const seriesTable = (page: Page, selector: string) => page.$eval(`${selector} .data-table`, (table) => {
    const lines = [...table.querySelectorAll('thead th')].slice(1).map((cell) => cell.textContent!)
    return Object.fromEntries([...table.querySelectorAll('tbody tr')].map((row) => [(row as HTMLElement).dataset.key,
      Object.fromEntries([...row.querySelectorAll('td')].slice(1).map((cell, i) => [lines[i], Number(cell.textContent!.replace(/,/g, ''))]))]))
  })
  const expectedSeries = (result: { rows: Record<string, any>[] }) => {
    const table: Record<string, Record<string, number>> = {}
    for (const row of result.rows) (table[row.bucket] ??= {})[row['properties.plan']] = row.count
    return table
  }
  const funnelCounts = (page: Page, selector: string) =>
    page.$$eval(`${selector} [data-step] .funnel-count`, (counts) => counts.map((count) => Number(count.textContent!.replace(/,/g, ''))))

  test('a trend and a funnel built and saved in the page, put on a new dashboard, drawn with analytics_insight_run\'s numbers, over its date range, refreshed, a tile removed', async () => {
    const console = await browser.open()
    const { page } = console
    const dialogs: string[] = []
    page.on('dialog', (dialog) => { dialogs.push(dialog.message()); void dialog.dismiss() })
    await openArea(page, maker, maker.productId, 'analytics')
    await page.click('.tabs a[data-tab=insights]')
    await page.waitForSelector('[data-testid=no-insights]:not([hidden])')

    // A trend: signups per day by plan over the fixed week, previewed as the tile will draw it.
    await page.click('[data-action=new-insight]')
    await page.waitForSelector('[data-testid=query-form] [data-field=entity]')
    await page.fill('[data-field=name]', 'Signups by plan')
    await page.selectOption('[data-field=entity]', 'events')
    const metrics = await page.$$eval('[data-metric]', (boxes) => boxes.map((box) => (box as HTMLElement).dataset.metric!))
    for (const metric of metrics) await page.setChecked(`[data-metric="${metric}"]`, metric === 'count')
    await page.click('[data-action=add-dimension]')
    await page.fill('[data-field=dimension]', 'properties.plan')
    await page.click('[data-filters=query] [data-action=add-filter]')
    await page.fill('[data-filters=query] [data-field=filter-field]', 'event')
    await page.fill('[data-filters=query] [data-field=filter-value]', 'signup')
    await page.selectOption('[data-field=bucket]', 'day')
    await page.fill('[data-field=timezone]', 'UTC')
    await page.selectOption('[data-testid=query-form] [data-field=range]', 'custom')
    await page.fill('[data-testid=query-form] [data-field=range-from]', RANGE.from)
    await page.locator('[data-testid=query-form] [data-field=range-from]').blur()
    await page.fill('[data-testid=query-form] [data-field=range-to]', RANGE.to)
    await page.locator('[data-testid=query-form] [data-field=range-to]').blur()
    await previewDrew(page, TREND)
    const previewed = await by('POST', '/analytics/query', TREND)
    expect(await seriesTable(page, '[data-testid=preview]')).toEqual(expectedSeries(previewed))
    expect(await page.textContent('[data-testid=preview] .tile-title')).toBe('Signups by plan')
    await expectFits(page, 'trend builder')
    await page.evaluate(() => scrollTo(0, 0))
    await screenshot(page, 'analytics-insight-builder')
    await page.click('[data-action=save-insight]')
    await page.waitForSelector('[data-testid=builder-status][data-saved-id]')
    const trendId = await page.getAttribute('[data-testid=builder-status]', 'data-saved-id')
    expect(await by('GET', `/analytics/insights/${trendId}`)).toMatchObject({ name: 'Signups by plan', kind: 'metric', query: TREND })
    expect(await page.evaluate(() => location.hash)).toEndWith(`/analytics/insights/${trendId}`)

    // A funnel: signup, activate, purchase, joined on users_id.
    await page.click('.tabs a[data-tab=insights]')
    await page.click('[data-action=new-insight]')
    await page.click('[data-kind-choice=funnel]')
    await page.fill('[data-field=name]', 'Activation funnel')
    const steps = page.locator('[data-field=step-event]')
    await steps.nth(0).fill('signup')
    await steps.nth(1).fill('activate')
    await page.click('[data-action=add-step]')
    await steps.nth(2).fill('purchase')
    await page.selectOption('[data-field=identity]', 'users_id')
    await page.selectOption('[data-testid=query-form] [data-field=range]', 'custom')
    await page.fill('[data-testid=query-form] [data-field=range-from]', RANGE.from)
    await page.locator('[data-testid=query-form] [data-field=range-from]').blur()
    await page.fill('[data-testid=query-form] [data-field=range-to]', RANGE.to)
    await page.locator('[data-testid=query-form] [data-field=range-to]').blur()
    await previewDrew(page, FUNNEL)
    expect(await funnelCounts(page, '[data-testid=preview]')).toEqual([5, 3, 1])
    await expectFits(page, 'funnel builder')
    await page.click('[data-action=save-insight]')
    await page.waitForSelector('[data-testid=builder-status][data-saved-id]')
    const funnelId = await page.getAttribute('[data-testid=builder-status]', 'data-saved-id')
    expect(await by('GET', `/analytics/insights/${funnelId}`)).toMatchObject({ name: 'Activation funnel', kind: 'funnel', query: FUNNEL })

    // Both in the list, newest first.
    await page.click('.tabs a[data-tab=insights]')
    await page.waitForSelector(`[data-insight-id="${trendId}"]`)
    expect(await page.$$eval('[data-insight-id]', (rows) => rows.map((row) => (row as HTMLElement).dataset.insightId))).toEqual([funnelId!, trendId!])
    await expectFits(page, 'insights list')

    // A new dashboard, and both insights added to it as tiles.
    await page.click('.tabs a[data-tab=dashboards]')
    await page.fill('[data-field=dashboard-name]', 'Made here')
    expect(await page.inputValue('[data-field=dashboard-slug]')).toBe('made-here')
    await page.click('[data-action=create-dashboard]')
    await page.waitForSelector('[data-testid=dashboard-grid] .empty')
    for (const id of [trendId, funnelId]) {
      await page.click('[data-action=add-tile]')
      await page.selectOption('[data-field=tile-insight]', id!)
      await page.click('[data-action=confirm-add-tile]')
      await page.waitForSelector('[data-testid=tile-adder][hidden]', { state: 'attached' })
    }
    // And a text tile: its markdown drawn as elements, any HTML in it as text.
    await page.click('[data-action=add-tile]')
    await page.fill('[data-field=tile-title]', 'Notes')
    await page.fill('[data-field=tile-markdown]', 'Read **this** <b>first</b>')
    await page.click('[data-action=confirm-add-text]')
    await page.waitForSelector('[data-testid=tile-adder][hidden]', { state: 'attached' })
    await page.waitForFunction(() => document.querySelectorAll('.tile-body[data-kind]').length === 2)
    const dashboardId = (await by('GET', '/analytics/dashboards/made-here')).id
    const stored = await by('GET', `/analytics/dashboards/${dashboardId}`)
    expect(stored.tiles.map((tile: any) => [tile.type, tile.insight_id ?? tile.markdown, tile.title, tile.layout])).toEqual([
      ['insight', trendId, null, { x: 0, y: 0, w: 6, h: 4 }], ['insight', funnelId, null, { x: 0, y: 4, w: 6, h: 4 }],
      ['text', 'Read **this** <b>first</b>', 'Notes', { x: 0, y: 8, w: 6, h: 4 }],
    ])
    const text = `[data-tile-id="${stored.tiles[2].id}"]`
    expect([await page.textContent(`${text} .tile-title`), await page.textContent(`${text} .tile-body strong`), await page.textContent(`${text} .tile-body`)])
      .toEqual(['Notes', 'this', 'Read this <b>first</b>'])
    expect(await page.locator(`${text} .tile-body b`).count()).toBe(0)
    const tileOf = (insightId: string) => `[data-tile-id="${stored.tiles.find((tile: any) => tile.insight_id === insightId).id}"]`
    const runOf = async (insightId: string, body: unknown = {}) => (await by('POST', `/analytics/insights/${insightId}/run`, body)).result
    expect(await seriesTable(page, tileOf(trendId!))).toEqual(expectedSeries(await runOf(trendId!)))
    expect(await funnelCounts(page, tileOf(funnelId!))).toEqual((await runOf(funnelId!)).steps.map((step: any) => step.count))
    expect(await funnelCounts(page, tileOf(funnelId!))).toEqual([5, 3, 1])

    // The dashboard's date range: every tile runs over it, with the numbers the API answers for that range.
    const later = { from: '2026-11-03T00:00:00Z', to: RANGE.to }
    await page.selectOption('[data-testid=dashboard-toolbar] [data-field=range]', 'custom')
    await page.fill('[data-testid=dashboard-toolbar] [data-field=range-from]', later.from)
    await page.locator('[data-testid=dashboard-toolbar] [data-field=range-from]').blur()
    await page.fill('[data-testid=dashboard-toolbar] [data-field=range-to]', later.to)
    await page.locator('[data-testid=dashboard-toolbar] [data-field=range-to]').blur()
    await page.waitForFunction((range) => [...document.querySelectorAll<HTMLElement>('.tile-insight .tile-body')].every((body) => body.dataset.range === range && body.dataset.kind), JSON.stringify(later))
    expect(await seriesTable(page, tileOf(trendId!))).toEqual(expectedSeries(await runOf(trendId!, { range: later })))
    expect(Object.keys(await seriesTable(page, tileOf(trendId!)))).toHaveLength(5) // Nov 3 to 7
    expect(await funnelCounts(page, tileOf(funnelId!))).toEqual([3, 2, 0])
    expect((await runOf(funnelId!, { range: later })).steps.map((step: any) => step.count)).toEqual([3, 2, 0])

    // Back to each insight's own range; a purchase captured since is counted only after Refresh (the funnel's kept result).
    await page.selectOption('[data-testid=dashboard-toolbar] [data-field=range]', 'own')
    await page.waitForFunction(() => [...document.querySelectorAll<HTMLElement>('.tile-insight .tile-body')].every((body) => body.dataset.range === 'own' && body.dataset.kind))
    expect(await funnelCounts(page, tileOf(funnelId!))).toEqual([5, 3, 1])
    await by('POST', '/tracking/events', { events: [{ event: 'purchase', timestamp: at(6, 13), identity: { users_id: 'u2' }, properties: { plan: 'team' } }] })
    await page.click('[data-action=refresh]')
    await page.waitForFunction((selector) => document.querySelector(`${selector} .tile-body[data-kind] [data-step="3"] .funnel-count`)?.textContent === '2', tileOf(funnelId!))
    expect(await funnelCounts(page, tileOf(funnelId!))).toEqual((await runOf(funnelId!)).steps.map((step: any) => step.count))
    await expectFits(page, 'dashboard')

    // Removing a tile asks in the tile; Keep keeps it, Remove saves the dashboard without it. Its insight stays.
    await page.hover(tileOf(funnelId!))
    await page.click(`${tileOf(funnelId!)} [data-action=remove-tile]`)
    await page.click(`${tileOf(funnelId!)} [data-action=keep]`)
    expect(await page.locator(`${tileOf(funnelId!)} [data-action=remove-tile]`).count()).toBe(1)
    await page.hover(tileOf(funnelId!))
    await page.click(`${tileOf(funnelId!)} [data-action=remove-tile]`)
    await page.click(`${tileOf(funnelId!)} [data-action=confirm-remove]`)
    await page.waitForFunction((selector) => !document.querySelector(selector), tileOf(funnelId!))
    expect((await by('GET', `/analytics/dashboards/${dashboardId}`)).tiles.map((tile: any) => tile.insight_id ?? tile.type)).toEqual([trendId, 'text'])
    await page.waitForFunction(() => document.querySelector('[data-testid=versions] tbody tr')?.getAttribute('data-version') === '5')
    expect(dialogs).toEqual([]) // every confirmation was asked in the page
    expectNoProblems(console)
  })
})

describe('the insights list and the builder\'s refusals', () => {
  let lister: Owner
  const by = async (method: string, path: string, body?: unknown) =>
    ok(await call(method, path, { token: lister.token, productId: lister.productId, body }), `${method} ${path}`).body
  const QUERY = { entity: 'events', metrics: ['count'], range: RANGE }
  beforeAll(async () => {
    lister = await newProduct('Insights list')
    expect(await by('POST', '/tracking/events', { events: EVENTS })).toEqual({ accepted: EVENTS.length })
  })

  test('pages 20 at a time; an insight opens in the builder with its query and saves changes; delete is asked in the row and refused while a dashboard uses it', async () => {
    const made: string[] = []
    for (let i = 1; i <= 21; i++) made.push((await by('POST', '/analytics/insights', { name: `Insight ${i}`, kind: 'metric', query: { ...QUERY, limit: 50 + i } })).id)
    const used = made.at(-1)!
    const tag = 'a-very-long-tag-that-has-no-spaces-and-would-widen-any-table-it-is-put-in-0123456789'.slice(0, 40)
    await by('POST', '/analytics/dashboards', { slug: 'uses-one', name: 'Uses one', tags: [tag], tiles: [{ type: 'insight', insight_id: used, layout: { x: 0, y: 0, w: 6, h: 4 } }] })
    const console = await browser.open()
    const { page } = console
    await openArea(page, lister, lister.productId, 'analytics')
    await expectFits(page, 'dashboards list')
    await page.click('.tabs a[data-tab=insights]')
    await page.waitForSelector('[data-action=more-insights]')
    const listed = () => page.$$eval('[data-insight-id]', (rows) => rows.map((row) => (row as HTMLElement).dataset.insightId))
    expect(await listed()).toEqual(made.slice(1).reverse())
    await page.click('[data-action=more-insights]')
    await page.waitForFunction(() => document.querySelectorAll('[data-insight-id]').length === 21 && !document.querySelector('[data-action=more-insights]'))
    expect(await listed()).toEqual([...made].reverse())

    // Deleting the one a dashboard uses is refused, and the page says which dashboard; Keep leaves a row alone.
    const row = (id: string) => `[data-insight-id="${id}"]`
    await page.click(`${row(used)} [data-action=delete-insight]`)
    await page.click(`${row(used)} [data-action=confirm-delete]`)
    await page.waitForFunction(() => /not deleted: .*uses-one/.test(document.querySelector('[data-testid=insights-error]')?.textContent ?? ''))
    expect(await page.locator(row(used)).count()).toBe(1)
    await page.click(`${row(made[0]!)} [data-action=delete-insight]`)
    await page.click(`${row(made[0]!)} [data-action=keep]`)
    expect(await page.locator(`${row(made[0]!)} [data-action=delete-insight]`).count()).toBe(1)
    await page.click(`${row(made[0]!)} [data-action=delete-insight]`)
    await page.click(`${row(made[0]!)} [data-action=confirm-delete]`)
    await page.waitForFunction((selector) => !document.querySelector(selector), row(made[0]!))
    expect((await call('GET', `/analytics/insights/${made[0]}`, { token: lister.token, productId: lister.productId })).status).toBe(404)

    // Opened in the builder: its query in the form, drawn in the preview; a change saved keeps what the form does not show (limit).
    await page.click(`${row(made[1]!)} [data-action=edit-insight]`)
    await page.waitForFunction(() => document.querySelector<HTMLElement>('[data-testid=preview]')?.dataset.state === 'drawn')
    expect(JSON.parse((await page.getAttribute('[data-testid=preview]', 'data-query'))!)).toEqual({ ...QUERY, limit: 52 })
    expect(await page.inputValue('[data-field=name]')).toBe('Insight 2')
    expect(await page.inputValue('[data-testid=query-form] [data-field=range]')).toBe('custom')
    expect(await page.locator('[data-kind-choice]').count()).toBe(0) // a saved insight's kind cannot change
    await page.fill('[data-field=name]', 'Insight 2, per week')
    await page.selectOption('[data-field=bucket]', 'week')
    await page.click('[data-action=save-insight]')
    await page.waitForFunction(() => /Saved "Insight 2, per week"/.test(document.querySelector('[data-testid=builder-status]')?.textContent ?? ''))
    expect(await by('GET', `/analytics/insights/${made[1]}`)).toMatchObject({ name: 'Insight 2, per week', query: { ...QUERY, limit: 52, bucket: 'week' } })

    // What the API refuses is said with the field it names: in the preview, and on save, which writes nothing.
    await page.click('[data-action=add-dimension]')
    await page.fill('[data-field=dimension]', 'colour')
    await page.waitForFunction(() => /\/body\/dimensions\/0/.test(document.querySelector('[data-testid=preview-error]')?.textContent ?? ''))
    await page.click('[data-action=save-insight]')
    await page.waitForFunction(() => /Not saved: .*\/body\/query\/dimensions\/0/.test(document.querySelector('[data-testid=builder-status]')?.textContent ?? ''))
    await page.fill('[data-field=dimension]', '')
    await page.fill('[data-field=name]', '')
    await page.click('[data-action=save-insight]')
    await page.waitForFunction(() => /Not saved: .*\/body\/name/.test(document.querySelector('[data-testid=builder-status]')?.textContent ?? ''))
    expect((await by('GET', `/analytics/insights/${made[1]}`)).name).toBe('Insight 2, per week')

    // A dashboard deleted from the list, asked in its row; its insight stays.
    await page.click('.tabs a[data-tab=dashboards]')
    await page.click('[data-testid=dashboards] [data-action=delete-dashboard]')
    await page.click('[data-testid=dashboards] [data-action=confirm-delete]')
    await page.waitForFunction(() => !document.querySelector('[data-dashboard-id]'))
    expect((await by('GET', '/analytics/dashboards')).dashboards).toEqual([])
    expect((await by('GET', `/analytics/insights/${used}`)).id).toBe(used)
    expect(console.problems.filter((problem) => !/409|400/.test(problem))).toEqual([]) // the browser logs the refused fetches
  })
})
