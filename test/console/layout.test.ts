// The console holds at every size: each view that exists, filled with long values (a long product and dashboard name,
// long tags, long email addresses and subjects, numbers past 10 000), drawn at 390, 1280 and 1920 px, with nothing
// wider than the window or than the box it sits in (measured in the page: test/console/browser.ts overflowsOf).
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Page } from 'playwright-core'
import { call, eventually, freePort, newProduct, ok, startProcess, type Worker } from '../helpers'
import { startGateway, type GatewayProcess } from '../gateway/ws-helpers'
import { expectNoProblems, overflowsOf, screenshot, signIn, useBrowser, WIDTHS } from './browser'

type Owner = Awaited<ReturnType<typeof newProduct>>

let apiWorker: Worker
let publicWorker: Worker
let gateway: GatewayProcess
let owner: Owner
let dashboardId: string
let emailId: string
let domainId: string

const LONG_TAG = 'retention-and-activation-experiments-q4' // the API's longest tag is 40 characters

const CHANNEL = 'notifications_for_enterprise_customers:account-7f3c9a2e-5b1d-4e8f-9c6a-2d4b8e1f0a3c'
const LONG_ADDRESS = 'first.middle.lastname+newsletter-campaign-2026@customer-subdomain.example-enterprise.com'
// A fixed week, so the buckets do not depend on when the test runs.
const RANGE = { from: '2026-11-01T00:00:00Z', to: '2026-11-08T00:00:00Z' }
/** Events on 2 November: enough that the y axis needs a label of five digits and more. */
const BIG_DAY = 12_000

const as = async (method: string, path: string, body?: unknown) =>
  ok(await call(method, path, { token: owner.token, productId: owner.productId, body }), `${method} ${path}`).body

/** A platform call on the api process, as the owner: mail domains are created on it (the one that would check DNS). */
async function platform(method: string, path: string, body?: unknown): Promise<any> {
  const response = await fetch(apiWorker.url + path, {
    method, headers: { authorization: `Bearer ${owner.token}`, 'x-product-id': owner.productId, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const answer = await response.json()
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${JSON.stringify(answer)}`)
  return answer
}

beforeAll(async () => {
  // The inspector connects to the gateway the api names (GATEWAY_URL), the one other origin its CSP allows.
  const port = await freePort()
  const env = { GATEWAY_URL: `ws://127.0.0.1:${port}/connection/websocket` }
  ;[gateway, apiWorker, publicWorker] = await Promise.all([
    startGateway({}, port), startProcess('api', env), startProcess('public', { ...env, MAIL_SEND_RATE_PER_SECOND: '1000' }),
  ])
  owner = await newProduct('A product with a rather long name that has to fit the header of a phone')
  for (let sent = 0; sent < BIG_DAY; sent += 1000) {
    const events = Array.from({ length: 1000 }, (_, i) => ({ event: 'pageview', timestamp: '2026-11-02T12:00:00Z', identity: { users_id: `u${(sent + i) % 50}` }, properties: { plan: i % 3 ? 'free' : 'team' } }))
    await as('POST', '/tracking/events', { events })
  }
  await as('POST', '/tracking/events', { events: [{ event: 'signup', timestamp: '2026-11-03T12:00:00Z', identity: { users_id: 'u1' }, properties: { plan: 'free' } }] })
  const series = await as('POST', '/analytics/insights', { name: 'Page views per day, every plan, across all of the product\'s sites', kind: 'metric', query: { entity: 'events', metrics: ['count'], range: RANGE, bucket: 'day' } })
  const breakdown = await as('POST', '/analytics/insights', { name: 'Events by plan', kind: 'metric', query: { entity: 'events', metrics: ['count'], dimensions: ['properties.plan'], range: RANGE } })
  const total = await as('POST', '/analytics/insights', { name: 'All events', kind: 'metric', query: { entity: 'events', metrics: ['count', 'identities'], range: RANGE } })
  const funnel = await as('POST', '/analytics/insights', { name: 'Page view to signup', kind: 'funnel', query: { steps: ['pageview', 'signup'].map((event) => ({ entity: 'events', event })), identity: 'users_id', range: RANGE } })
  const dashboard = await as('POST', '/analytics/dashboards', {
    name: 'Growth of the enterprise plans across every region, reviewed weekly by the whole team',
    slug: 'growth-of-the-enterprise-plans-across-every-region-weekly',
    tags: [LONG_TAG, 'growth', 'weekly'],
    tiles: [
      { type: 'insight', insight_id: series.id, layout: { x: 0, y: 0, w: 8, h: 4 } },
      { type: 'insight', insight_id: breakdown.id, layout: { x: 8, y: 0, w: 4, h: 4 } },
      { type: 'insight', insight_id: total.id, layout: { x: 0, y: 4, w: 4, h: 2 } },
      { type: 'insight', insight_id: funnel.id, layout: { x: 4, y: 4, w: 4, h: 3 } },
      { type: 'text', markdown: `Notes: see https://example.com/a/very/long/path/that/goes/on/and/on/${'x'.repeat(80)} for the method.`, title: 'Notes', layout: { x: 8, y: 4, w: 4, h: 3 } },
    ],
  })
  dashboardId = dashboard.id
  await as('POST', '/analytics/dashboards', { name: 'Second', slug: 'second', tags: ['a', LONG_TAG.toUpperCase()], tiles: [] })
  await as('POST', '/realtime/namespaces', { name: 'notifications_for_enterprise_customers', presence: true, history: { ttlSeconds: 86_400, size: 10_000 }, archive: { retentionDays: 1_000 } })
  ok(await call('POST', `/governance/api/v1/products/${owner.productId}/public-keys`, { token: owner.token, productId: owner.productId, body: { name: 'The production backend of the enterprise region eu-central' } }), 'public key')
  const domain = await platform('POST', '/mail/domains', { name: `mail-${crypto.randomUUID().slice(0, 8)}.customer-subdomain.example-enterprise.com` })
  domainId = domain.id
  const { key } = await platform('POST', '/mail/api-keys', { name: 'Transactional mail of the enterprise region eu-central', scope: 'full_access' })
  const sent = await fetch(`${publicWorker.url}/${owner.productId}/mail/emails`, {
    method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json' },
    body: JSON.stringify({
      from: `Notifications of the enterprise team <notifications@${domain.name}>`, to: [LONG_ADDRESS, `another.${LONG_ADDRESS}`], cc: LONG_ADDRESS,
      subject: `Your monthly statement is ready: ${'z'.repeat(120)}`, text: `Hello,\n${'a'.repeat(300)}`, tags: [{ name: 'campaign', value: 'november_statement_for_enterprise_customers' }],
    }),
  })
  emailId = (await sent.json() as { id: string }).id
}, 60_000)
afterAll(async () => {
  await Promise.all([apiWorker?.stop(), publicWorker?.stop(), gateway?.stop()])
})
const browser = useBrowser(() => apiWorker.url)

/** Every view of the console, the address that opens it, and what shows once it is drawn. */
const views = (): [string, string, (page: Page) => Promise<unknown>][] => {
  const p = `#/p/${owner.productId}`
  return [
    ['products', '#/products', (page) => page.waitForSelector('[data-testid=products]')],
    ['dashboards', `${p}/analytics`, (page) => page.waitForSelector('[data-testid=dashboards]')],
    ['a dashboard', `${p}/analytics/dashboards/${dashboardId}`, (page) => page.waitForFunction(() =>
      document.querySelectorAll('[data-tile-id]').length === 5 && !document.querySelector('[data-tile-id] .loading')
      && document.querySelectorAll('[data-tile-id] canvas').length >= 2 && document.querySelector('[data-testid=versions] table'))],
    ['the catalog', `${p}/analytics/catalog`, (page) => page.waitForSelector('[data-testid=catalog]')],
    ['realtime namespaces', `${p}/realtime/namespaces`, (page) => page.waitForSelector('[data-testid=namespaces]')],
    ['realtime keys', `${p}/realtime/keys`, (page) => page.waitForSelector('[data-testid=keys]')],
    ['the channel inspector', `${p}/realtime/inspector/${encodeURIComponent(CHANNEL)}`, async (page) => {
      await page.waitForSelector('[data-testid=inspector-state][data-state=subscribed]')
      // A publication with a long unbroken value, shown live in the feed.
      await as('POST', '/realtime/messages', { channel: CHANNEL, data: { note: 'a long value', token: 'k'.repeat(300), url: `https://example.com/${'segment/'.repeat(30)}` } })
      await page.waitForSelector('[data-testid=publication]')
    }],
    ['mail domains', `${p}/mail/domains`, (page) => page.waitForSelector('[data-testid=domains] table')],
    ['a mail domain', `${p}/mail/domains/${domainId}`, (page) => page.waitForSelector('[data-testid=domain] table')],
    ['mail keys', `${p}/mail/keys`, (page) => page.waitForSelector('[data-testid=keys] table')],
    ['the email log', `${p}/mail/emails`, (page) => page.waitForSelector('[data-testid=emails] table')],
    ['an email', `${p}/mail/emails/${emailId}`, (page) => page.waitForSelector('[data-testid=email]')],
  ]
}

/**
 * Charts whose canvas has ink in its first two columns of pixels: the y axis's labels are drawn right-aligned against
 * the plot, so a label wider than the axis runs off the canvas's left edge ("2,500" shown for "12,500").
 */
function cutLabels(page: Page): Promise<string[]> {
  return page.evaluate(() => [...document.querySelectorAll<HTMLCanvasElement>('[data-chart] canvas')].flatMap((canvas) => {
    const pixels = canvas.getContext('2d')!.getImageData(0, 0, 2, canvas.height).data
    const inked = pixels.some((value, i) => i % 4 === 3 && value > 0)
    return inked ? [`${canvas.closest('[data-tile-id]')?.querySelector('.tile-title')?.textContent}: labels cut at the left edge`] : []
  }))
}

describe('at every width', () => {
  for (const width of WIDTHS) {
    test(`${width} px: sign-in and every view fit the window, nothing wider than the box it is in`, async () => {
      const console = await browser.open()
      const { page } = console
      await page.setViewportSize({ width, height: 900 })
      await page.waitForSelector('[data-testid=signin]')
      const found: Record<string, string[]> = { 'sign-in': await overflowsOf(page) }
      await signIn(page, owner.email, owner.password)
      for (const [name, hash, drawn] of views()) {
        await page.evaluate((to) => { location.hash = to }, hash)
        await drawn(page)
        found[name] = await overflowsOf(page)
        if (name === 'a dashboard') found['chart axes'] = await cutLabels(page)
        if (name === 'a dashboard' && width === 390) await screenshot(page, 'console-phone')
      }
      expect(found).toEqual(Object.fromEntries(Object.keys(found).map((name) => [name, []])))
      expectNoProblems(console)
    })
  }
})

describe('the small things', () => {
  test("after Save layout the dashboard's header says when it was updated: the update's own time", async () => {
    const stored = await as('POST', '/analytics/dashboards', {
      slug: 'updated-header', name: 'Updated header', tiles: [{ type: 'text', markdown: 'Hello', layout: { x: 0, y: 0, w: 4, h: 2 } }],
    })
    const console = await browser.open()
    const { page } = console
    await signIn(page, owner.email, owner.password)
    await page.evaluate((to) => { location.hash = to }, `#/p/${owner.productId}/analytics/dashboards/${stored.id}`)
    await page.waitForSelector('[data-testid=dashboard-meta] .updated')
    const shown = (iso: string) => page.evaluate((at) => `updated ${new Date(at).toLocaleString()}`, iso)
    expect(await page.textContent('[data-testid=dashboard-meta] .updated')).toBe(await shown(stored.updated_at))
    // The header shows seconds: the save must land in a later second than the creation for the change to be seen.
    await eventually(() => Math.floor(Date.now() / 1000) > Math.floor(Date.parse(stored.updated_at) / 1000), 2_000, 'the next second')
    await page.click('[data-action=edit]')
    await page.focus(`[data-tile-id="${stored.tiles[0].id}"] .tile-head`)
    await page.keyboard.press('Shift+ArrowRight')
    const saved = page.waitForResponse((response) => response.request().method() === 'PATCH' && response.url().endsWith(`/analytics/dashboards/${stored.id}`))
    await page.click('[data-action=save]')
    const updated = await (await saved).json() as { updated_at: string }
    expect(updated.updated_at).not.toBe(stored.updated_at)
    await page.waitForSelector('[data-action=edit]')
    expect(await page.textContent('[data-testid=dashboard-meta] .updated')).toBe(await shown(updated.updated_at))
    expect(await shown(updated.updated_at)).not.toBe(await shown(stored.updated_at))
    expectNoProblems(console)
  })

  test('at 390 px a long email address wraps between its parts, never inside one', async () => {
    const console = await browser.open()
    const { page } = console
    await page.setViewportSize({ width: 390, height: 900 })
    await signIn(page, owner.email, owner.password)
    /** Each run of text between two break opportunities, with how many lines it is drawn on. */
    const pieces = (selector: string) => page.evaluate((within) => {
      const element = document.querySelector(within)!
      const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT)
      const found: { text: string; lines: number }[] = []
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        const range = document.createRange()
        range.selectNodeContents(node)
        found.push({ text: node.textContent!, lines: new Set([...range.getClientRects()].map((rect) => Math.round(rect.top))).size })
      }
      return found
    }, selector)
    for (const [hash, selector] of [
      [`#/p/${owner.productId}/mail/emails`, '[data-testid=emails] td[data-label=To]'],
      [`#/p/${owner.productId}/mail/emails/${emailId}`, '[data-testid=email] .facts dd:nth-of-type(2)'],
    ] as const) {
      await page.evaluate((to) => { location.hash = to }, hash)
      await page.waitForSelector(selector)
      const found = await pieces(selector)
      expect(found.map((piece) => piece.text).join('')).toContain(LONG_ADDRESS)
      // The address is longer than the column, so it does wrap; but each piece stays on one line.
      expect(found.length).toBeGreaterThan(5)
      expect(found.filter((piece) => piece.lines !== 1)).toEqual([])
    }
    const lines = await page.evaluate(() => {
      const cell = document.querySelector('[data-testid=email] .facts dd:nth-of-type(2)')!
      return Math.round(cell.getBoundingClientRect().height / parseFloat(getComputedStyle(cell).lineHeight))
    })
    expect(lines).toBeGreaterThan(1)
    expectNoProblems(console)
  })

  test('a value cut with an ellipsis keeps the whole of it in its title: the product name, a tile title', async () => {
    const console = await browser.open()
    const { page } = console
    await page.setViewportSize({ width: 390, height: 900 })
    await signIn(page, owner.email, owner.password)
    await page.evaluate((to) => { location.hash = to }, `#/p/${owner.productId}/analytics/dashboards/${dashboardId}`)
    const series = 'Page views per day, every plan, across all of the product\'s sites'
    await page.waitForSelector(`.tile-title[title="${series}"]`)
    const cut = await page.evaluate(() => [...document.querySelectorAll<HTMLElement>('.product-name, .tile-title')]
      .filter((element) => element.scrollWidth > element.clientWidth).map((element) => element.title))
    expect(cut).toContain('A product with a rather long name that has to fit the header of a phone')
    expect(cut).toContain(series)
    expectNoProblems(console)
  })

  test("a namespace's policy is written with grouped digits", async () => {
    const console = await browser.open()
    const { page } = console
    await signIn(page, owner.email, owner.password)
    await page.evaluate((to) => { location.hash = to }, `#/p/${owner.productId}/realtime/namespaces`)
    const row = page.locator('[data-testid=namespaces] tbody tr', { hasText: 'notifications_for_enterprise_customers' })
    await row.waitFor()
    expect(await row.locator('td[data-label=History]').textContent()).toBe('86,400 s, 10,000 entries')
    expect(await row.locator('td[data-label=Archive]').textContent()).toBe('1,000 days')
    expectNoProblems(console)
  })

  test('a domain verified without a DNS check says when it was verified, not that it was never checked', async () => {
    const console = await browser.open()
    const { page } = console
    await signIn(page, owner.email, owner.password)
    await page.evaluate((to) => { location.hash = to }, `#/p/${owner.productId}/mail/domains/${domainId}`)
    await page.waitForSelector('[data-testid=domain-checks]')
    const domain = await platform('GET', `/mail/domains/${domainId}`)
    expect({ checkedAt: domain.checkedAt, verified: domain.verifiedAt !== null }).toEqual({ checkedAt: null, verified: true })
    const verified = await page.evaluate((at) => new Date(at).toLocaleString(), domain.verifiedAt)
    expect(await page.textContent('[data-testid=domain-checks]')).toBe(`Every record was found: this domain sends. Verified ${verified}.`)
    expectNoProblems(console)
  })
})
