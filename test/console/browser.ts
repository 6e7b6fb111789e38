// A real Chromium (Debian's package, /usr/bin/chromium, installed by scripts/test) driven by playwright-core, for the
// console's tests: one browser per test file, a fresh context (no shared storage) per test.
import { afterAll, afterEach, beforeAll, expect } from 'bun:test'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core'

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
// Without the background-networking flags Chromium keeps trying hosts this machine cannot reach (docs/setup.md).
export const ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage']

// The README's pictures (docs/screenshots) are rewritten only when asked (UPDATE_SCREENSHOTS=1 scripts/test test/console),
// so a plain run leaves git clean; otherwise they go to .data/screenshots to be looked at.
export const SCREENSHOTS = join(import.meta.dir, '../..', process.env.UPDATE_SCREENSHOTS === '1' ? 'docs/screenshots' : '.data/screenshots')

export interface ConsolePage {
  page: Page
  /** Every console error, page error, Content-Security-Policy report and dialog the page raised so far. */
  problems: string[]
}

/** Launches Chromium before the file's tests and closes it after; `open()` gives a fresh page on the console. */
export function useBrowser(apiUrl: () => string) {
  let browser: Browser
  const contexts: BrowserContext[] = []
  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true })
  })
  // Each test's pages go with it: a page left open keeps its timers (the live channels poll every 2 s, pending webhook
  // deliveries every second, charts redraw), and a file's worth of them loaded the machine enough to fail later tests.
  afterEach(async () => {
    await Promise.all(contexts.splice(0).map((context) => context.close().catch(() => {})))
  })
  afterAll(async () => {
    await browser?.close()
  })
  return {
    async open(hash = ''): Promise<ConsolePage> {
      const context = await browser.newContext({ viewport: { width: 1280, height: 860 } })
      contexts.push(context)
      const page = await context.newPage()
      const problems: string[] = []
      page.on('pageerror', (error) => problems.push(`pageerror: ${error.message}`))
      page.on('console', (message) => { if (message.type() === 'error') problems.push(`console: ${message.text()}`) })
      // The console confirms in the page: a confirm(), alert() or prompt() dialog is a problem (dismissed, so nothing acts).
      page.on('dialog', (dialog) => {
        problems.push(`dialog: ${dialog.type()} ${dialog.message()}`)
        void dialog.dismiss()
      })
      await page.goto(`${apiUrl()}/console${hash}`)
      return { page, problems }
    },
  }
}

/** One step's bound, well within the runner's 20 s per test: a step that never happens fails with the page's state. */
const STEP_MS = 8000

/** Signs in through the form, as a person would, and waits for the product list. */
export async function signIn(page: Page, email: string, password: string): Promise<void> {
  await page.fill('[data-testid=signin] input[name=email]', email, { timeout: STEP_MS })
  await page.fill('[data-testid=signin] input[name=password]', password, { timeout: STEP_MS })
  await page.click('[data-testid=signin] button[type=submit]', { timeout: STEP_MS })
  await page.waitForSelector('[data-testid=products]', { timeout: STEP_MS })
}

/** Signs in and opens one product's area. */
export async function openArea(page: Page, user: { email: string; password: string }, productId: string, area: string): Promise<void> {
  try {
    await signIn(page, user.email, user.password)
    await page.click(`[data-product-id="${productId}"]`, { timeout: STEP_MS })
    if (area !== 'analytics') await page.click(`.topbar nav a[href$="/${area}"]`, { timeout: STEP_MS })
    await page.waitForSelector(`.content[data-area="${area}"]`, { timeout: STEP_MS })
  } catch (error) {
    throw new Error(`opening the ${area} area: ${(error as Error).message.split('\n')[0]}; the page ${await pageState(page)}`, { cause: error })
  }
}

/** Where the page is and what it shows, for a failure's message. */
async function pageState(page: Page): Promise<string> {
  const read = page.evaluate(() => ({ hash: location.hash, text: (document.body.textContent ?? '').slice(0, 400) }))
  const state = await Promise.race([read, Bun.sleep(2000).then(() => ({ hash: '?', text: 'the page answered nothing in 2 s' }))])
    .catch((error) => ({ hash: '?', text: String(error) }))
  return `is at ${JSON.stringify(state.hash)} showing ${JSON.stringify(state.text)}`
}

/** The README's picture of a view, written by the test that checks the view (docs/console.md, "Screenshots"). */
export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOTS, { recursive: true })
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`) })
}

export function expectNoProblems(console: ConsolePage): void {
  expect(console.problems).toEqual([])
}

/** The three widths every view is checked at: a phone, a laptop, a wide screen. */
export const WIDTHS = [390, 1280, 1920] as const

/**
 * Where the page is wider than its window, measured in the page: the document itself (`scrollWidth` over
 * `clientWidth`), and every element whose box reaches past the one it sits in, or whose content spills past its own
 * box, unless a container between them scrolls or clips it on purpose (`overflow-x` other than `visible`: a `<pre>`,
 * a wide table's scroller). Each as `tag.class "text…": how far`.
 */
export function overflowsOf(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const found: string[] = []
    const name = (element: Element) => {
      const text = (element.textContent ?? '').trim().replace(/\s+/g, ' ').slice(0, 40)
      return `${element.tagName.toLowerCase()}${element.classList.length ? `.${[...element.classList].join('.')}` : ''} "${text}"`
    }
    const root = document.documentElement
    if (root.scrollWidth > root.clientWidth) found.push(`the page: ${root.scrollWidth} px wide in a ${root.clientWidth} px window`)
    for (const element of document.body.querySelectorAll<HTMLElement>('*')) {
      const style = getComputedStyle(element)
      if (style.display === 'none' || style.visibility === 'hidden' || element.closest('svg')) continue
      const box = element.getBoundingClientRect()
      if (box.width === 0 && box.height === 0) continue
      // Its content spilling out of its own box (a long word in a cell), where nothing scrolls it.
      if (style.overflowX === 'visible' && style.display !== 'inline' && element.scrollWidth > element.clientWidth + 1
        && !element.firstElementChild) {
        found.push(`${name(element)}: content ${element.scrollWidth} px in ${element.clientWidth} px`)
      }
      // Its box reaching past the nearest box it sits in, with nothing between that scrolls or clips.
      const parent = element.parentElement
      if (!parent || style.position === 'fixed') continue
      const outer = parent.getBoundingClientRect()
      if (getComputedStyle(parent).overflowX !== 'visible') continue
      const past = Math.max(box.right - outer.right, outer.left - box.left)
      if (past > 1 && outer.width > 0) found.push(`${name(element)}: ${Math.round(past)} px past ${name(parent)}`)
    }
    return found
  })
}

/** Fails with every overflow `overflowsOf` finds: shared by the console's tests to check a view at any width. */
export async function expectNoOverflow(page: Page, where = ''): Promise<void> {
  expect({ where, overflows: await overflowsOf(page) }).toEqual({ where, overflows: [] })
}
