// The console's live Realtime views in a real Chromium against real api, public, gateway and archiver processes: the
// product's active channels and connections as real WebSocket clients come and go (counts as the API answers them), the inspector opened
// from a row, the archive read a page at a time within a time range, and every Realtime view inside the window at
// 390, 1280 and 1920 px with a channel name as long as a name may be.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import type { Page } from 'playwright-core'
import { holdChannels, releaseChannels } from '../../shared/realtime/occupancy'
import { RealtimeClient } from '../../shared/realtime-client/client'
import { call, eventually, freePort, newProduct, ok, startProcess, type Worker } from '../helpers'
import { startGateway, type GatewayProcess } from '../gateway/ws-helpers'
import { archivedCount, startArchiver, until, type ArchiverProcess } from '../realtime/archive-helpers'
import { createKey, manage, pub } from '../realtime/public-helpers'
import { expectNoProblems, openArea, overflowsOf, screenshot, useBrowser, WIDTHS } from './browser'

let gateway: GatewayProcess
let apiWorker: Worker
let publicWorker: Worker
let archiver: ArchiverProcess
beforeAll(async () => {
  // The page connects to the gateway the api names (GATEWAY_URL), and its CSP allows only that origin.
  const port = await freePort()
  const env = { GATEWAY_URL: `ws://127.0.0.1:${port}/connection/websocket` }
  ;[gateway, apiWorker, publicWorker] = await Promise.all([startGateway({}, port), startProcess('api', env), startProcess('public', env)])
  archiver = startArchiver()
}, 30_000)
afterAll(async () => {
  archiver?.proc.kill('SIGTERM')
  await archiver?.proc.exited
  await Promise.all([apiWorker?.stop(), publicWorker?.stop(), gateway?.stop()])
})
const browser = useBrowser(() => apiWorker.url)

type Owner = Awaited<ReturnType<typeof newProduct>>
const CHAT = { name: 'chat', presence: true, history: { ttlSeconds: 300, size: 100 }, archive: { retentionDays: 7 } }
/** As long as a channel name may be (128 characters), with no place a browser would break it by itself. */
const longChannel = () => `chat:${randomUUID().replaceAll('-', '')}${'x'.repeat(128 - 37)}`

async function realtimeOwner(name: string): Promise<Owner & { key: string }> {
  const owner = await newProduct(name)
  await manage(owner, 'POST', '/realtime/namespaces', CHAT)
  return { ...owner, key: (await createKey(owner)).key }
}

/** An end user's client, connected with a token from the public issue route, as a product's browser would be. */
async function endUser(owner: Owner & { key: string }, subject: string, channel: string): Promise<RealtimeClient> {
  const issued = await pub(publicWorker, 'POST', `/${owner.productId}/realtime/tokens/issue`, {
    key: owner.key, body: { subject, channels: [{ name: channel, ops: ['subscribe', 'presence'] }] },
  })
  expect(issued.status).toBe(200)
  const client = new RealtimeClient({ url: gateway.wsUrl, getToken: async () => issued.body.token })
  client.connect()
  await eventually(() => client.connected, 5000, `${subject} connected`)
  return client
}

/** Alice and Bob subscribed to the channel, Alice on its roster. */
async function aliceAndBob(owner: Owner & { key: string }, channel: string) {
  const [alice, bob] = await Promise.all(['alice', 'bob'].map(async (subject) => {
    const client = await endUser(owner, subject, channel)
    return { client, subscription: client.subscribe(channel) }
  }))
  await eventually(() => alice!.subscription.active && bob!.subscription.active, 5000, 'both subscribed')
  await alice!.client.presence(channel).enter({ name: 'Alice' })
  return { alice: alice!, bob: bob! }
}

/** The channel's row as the page shows it now, or null while it has none. */
async function row(page: Page, channel: string) {
  return page.evaluate((name) => {
    const tr = [...document.querySelectorAll('[data-testid=channels] tbody tr')].find((r) => r.getAttribute('data-channel') === name)
    return tr ? [...tr.querySelectorAll('td')].slice(0, 4).map((td) => td.textContent) : null
  }, channel)
}

/** Waits (up to 10 s: the page refreshes every 2 s) until the channel's row shows these subscribers (and presence). */
async function rowShows(page: Page, channel: string, subscribers: string, presence?: string) {
  await page.waitForFunction(({ name, subscribers, presence }) => [...document.querySelectorAll('[data-testid=channels] tbody tr')]
    .some((r) => r.getAttribute('data-channel') === name && r.querySelector('.subscribers')?.textContent === subscribers
      && (presence === undefined || r.querySelector('.presence')?.textContent === presence)), { name: channel, subscribers, presence }, { timeout: 10_000 })
}

/** The channel as realtime_channels_list answers it. */
async function listed(owner: Owner, channel: string) {
  const page = ok(await call('GET', `/realtime/channels?prefix=${encodeURIComponent(channel)}`, { token: owner.token, productId: owner.productId }), 'list')
  return page.body.channels as { channel: string; namespace: string; subscribers: number; presence: { members: number; connections: number } | null }[]
}

/** Every overflow `overflowsOf` finds at each of the three widths, named by view and width (empty when all fit). */
async function tooWide(page: Page, what: string): Promise<string[]> {
  const wide: string[] = []
  for (const width of WIDTHS) {
    await page.setViewportSize({ width, height: 860 })
    wide.push(...(await overflowsOf(page)).map((problem) => `${what} at ${width} px: ${problem}`))
  }
  await page.setViewportSize({ width: 1280, height: 860 })
  return wide
}

describe('live channels', () => {
  test('a channel real clients subscribe to is listed with the counts the API gives, and their connections with it', async () => {
    const owner = await realtimeOwner('Live channels')
    const channel = longChannel()
    const console = await browser.open()
    const { page } = console
    await openArea(page, owner, owner.productId, 'realtime')
    await page.click('.tabs a:text-is("Live channels")')
    await page.waitForSelector('[data-testid=channels-empty]')

    const { alice, bob } = await aliceAndBob(owner, channel)
    try {
      // The page refreshes by itself: the row appears with both subscribers and Alice on the roster, as the API has them.
      await rowShows(page, channel, '2', '1 member · 1 connection')
      expect(await listed(owner, channel)).toEqual([{ channel, namespace: 'chat', subscribers: 2, presence: { members: 1, connections: 1 } }])
      expect(await row(page, channel)).toEqual([channel, 'chat', '2', '1 member · 1 connection'])
      // Their connections, as the gateway reports them while the page asks: each subject with its one subscription.
      for (const subject of ['ext:alice', 'ext:bob']) {
        const connection = page.locator(`[data-testid=connections] tr[data-subject="${subject}"]`)
        await connection.waitFor({ timeout: 10_000 })
        expect(await connection.locator('.subscriptions').textContent()).toBe('1')
        expect(await connection.locator('.channel-name').allTextContents()).toEqual([channel])
      }

      expect(await tooWide(page, 'live channels')).toEqual([])
      await screenshot(page, 'realtime-channels')
    } finally {
      alice.client.disconnect()
      bob.client.disconnect()
    }
    expectNoProblems(console)
  })

  // Apart from the test above: each waits on the page's own refresh rounds (every 2 s), and together they came near
  // the runner's 20 s per test on a loaded host.
  test('as clients leave, the channel\'s count falls, then it and their connections leave the lists', async () => {
    const owner = await realtimeOwner('Live channels leaving')
    const channel = longChannel()
    const { alice, bob } = await aliceAndBob(owner, channel)
    const console = await browser.open()
    const { page } = console
    try {
      await openArea(page, owner, owner.productId, 'realtime')
      await page.click('.tabs a:text-is("Live channels")')
      await rowShows(page, channel, '2')
      await page.waitForSelector('[data-testid=connections] tr[data-subject="ext:bob"]', { timeout: 10_000 })

      // Bob unsubscribes: the count falls to one, his connection stays listed; both disconnect: the channel and the
      // connections leave the list.
      bob.subscription.unsubscribe()
      await rowShows(page, channel, '1')
      expect((await listed(owner, channel)).map((c) => c.subscribers)).toEqual([1])
      await page.waitForSelector('[data-testid=connections] tr[data-subject="ext:bob"] .subscriptions:text-is("0")', { timeout: 10_000 })
      alice.client.disconnect()
      bob.client.disconnect()
      await page.waitForSelector('[data-testid=channels-empty]', { timeout: 10_000 })
      expect(await listed(owner, channel)).toEqual([])
      await page.waitForSelector('[data-testid=connections-empty]', { timeout: 10_000 })
    } finally {
      alice.client.disconnect()
      bob.client.disconnect()
    }
    expectNoProblems(console)
  })

  test('a row opens the inspector on its channel; the filter narrows the list; counts are formatted; pages of 50 go back and forth', async () => {
    const owner = await realtimeOwner('Live channels inspect')
    const channels = ['chat:alpha', 'chat:beta']
    const clients = await Promise.all(channels.map((channel, i) => endUser(owner, `user${i}`, channel)))
    const subscriptions = clients.map((client, i) => client.subscribe(channels[i]!))
    await eventually(() => subscriptions.every((s) => s.active), 5000, 'subscribed')
    const console = await browser.open()
    const { page } = console
    await openArea(page, owner, owner.productId, 'realtime')
    await page.click('.tabs a:text-is("Live channels")')
    await page.waitForSelector('[data-testid=channels] tr[data-channel="chat:beta"]')
    expect(await page.locator('[data-testid=channels] tbody tr').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-channel')))).toEqual(channels)

    await page.fill('[data-testid=channels-filter] input[name=prefix]', 'chat:b')
    await page.click('[data-testid=channels-filter] button[type=submit]')
    await page.waitForSelector('[data-testid=channels] tr[data-channel="chat:alpha"]', { state: 'detached' })
    expect(await page.locator('[data-testid=channels] tbody tr').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-channel')))).toEqual(['chat:beta'])

    await page.click('[data-testid=channels] tr[data-channel="chat:beta"] a:text-is("Inspect")')
    await page.waitForSelector('[data-testid=inspector-state][data-state=subscribed]')
    expect(await page.getAttribute('.inspector-grid', 'data-channel')).toBe('chat:beta')
    // The inspector's own subscription is a subscriber like any other.
    await eventually(async () => (await listed(owner, 'chat:beta'))[0]?.subscribers === 2, 10_000, 'the inspector counted')
    for (const client of clients) client.disconnect()

    // A busy channel on another gateway (played here through the data plane): its count is written as a reader reads it.
    const busy = { productId: owner.productId, channel: 'chat:busy', subscriptions: 12_345 }
    await holdChannels('gw-busy', [busy], 30_000)
    await page.click('.tabs a:text-is("Live channels")')
    await page.waitForSelector('[data-testid=channels] tr[data-channel="chat:busy"] .subscribers:text-is("12,345")')
    await releaseChannels('gw-busy', [busy])

    // More than a page (50): Next shows the rest, Previous the first page again, each as the API pages them.
    const many = Array.from({ length: 53 }, (_, i) => ({ productId: owner.productId, channel: `chat:many-${String(i).padStart(2, '0')}`, subscriptions: 1 }))
    await holdChannels('gw-many', many, 30_000)
    const shownNames = () => page.locator('[data-testid=channels] tbody tr').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-channel')))
    // Once the inspector's own subscription (chat:beta) has gone with it, the first page is the 50 first of these.
    await page.waitForFunction(() => {
      const rows = document.querySelectorAll('[data-testid=channels] tbody tr')
      return rows.length === 50 && rows[0]!.getAttribute('data-channel') === 'chat:many-00'
    }, undefined, { timeout: 10_000 })
    expect(await shownNames()).toEqual(many.slice(0, 50).map((c) => c.channel))
    await page.click('[data-testid=channels-next]')
    await page.waitForSelector('[data-testid=channels] tr[data-channel="chat:many-52"]')
    expect(await shownNames()).toEqual(many.slice(50).map((c) => c.channel))
    expect(await page.isVisible('[data-testid=channels-next]')).toBe(false)
    await page.click('[data-testid=channels-previous]')
    await page.waitForSelector('[data-testid=channels] tr[data-channel="chat:many-00"]')
    await releaseChannels('gw-many', many)
    expectNoProblems(console)
  })
})

describe('the archive viewer', () => {
  test('pages of an archived channel as the API answers them; a range before everything is empty', async () => {
    const owner = await realtimeOwner('Archive viewer')
    const channel = longChannel()
    for (let n = 1; n <= 5; n++) {
      ok(await pub(publicWorker, 'POST', `/${owner.productId}/realtime/messages`, { key: owner.key, body: { channel, data: { n, text: `message ${n}` } } }), `publish ${n}`)
    }
    await until('five entries archived', async () => (await archivedCount(owner.productId, channel)) === 5)
    const console = await browser.open()
    const { page } = console
    await openArea(page, owner, owner.productId, 'realtime')
    await page.click('.tabs a:text-is("Archive")')
    await page.fill('[data-testid=archive-form] input[name=channel]', channel)
    await page.fill('[data-testid=archive-form] input[name=limit]', '2')
    await page.selectOption('[data-testid=archive-form] select[name=order]', 'oldest')
    await page.click('[data-testid=archive-form] button[type=submit]')

    const shown = () => page.locator('[data-testid=archive-entry]').evaluateAll((items) =>
      items.map((item) => [Number(item.getAttribute('data-offset')), JSON.parse(item.querySelector('pre.data')!.textContent!).n]))
    const pages: unknown[] = []
    for (let n = 1; n <= 3; n++) {
      await page.waitForSelector(`[data-testid=archive-status]:text-is("Page ${n} · ${n < 3 ? 2 : 1} ${n < 3 ? 'entries' : 'entry'}")`)
      pages.push(await shown())
      if (n < 3) await page.click('[data-testid=archive-next]')
    }
    expect(await page.isVisible('[data-testid=archive-next]')).toBe(false) // the last page
    // As the API pages it.
    const api: unknown[] = []
    let cursor: string | null = null
    do {
      const query: string = `?order=oldest&limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`
      const answer = ok(await call('GET', `/realtime/channels/${encodeURIComponent(channel)}/archive${query}`, { token: owner.token, productId: owner.productId }), 'archive')
      api.push(answer.body.entries.map((entry: { offset: number; data: { n: number } }) => [entry.offset, entry.data.n]))
      cursor = answer.body.next
    } while (cursor)
    expect(pages).toEqual(api)
    expect(pages.flat()).toEqual([[1, 1], [2, 2], [3, 3], [4, 4], [5, 5]])

    expect(await tooWide(page, 'archive')).toEqual([])
    await page.click('[data-testid=archive-first]')
    await page.waitForSelector('[data-testid=archive-status]:text-is("Page 1 · 2 entries")')
    await screenshot(page, 'realtime-archive')

    // A range that ends before anything was published: nothing.
    await page.fill('[data-testid=archive-form] input[name=to]', '2001-01-01T00:00:00')
    await page.click('[data-testid=archive-form] button[type=submit]')
    await page.waitForSelector('[data-testid=archive-empty]')
    expectNoProblems(console)
  })
})

describe('every Realtime view at three widths', () => {
  test('no view is wider than a 390, 1280 or 1920 px window, a long channel name included', async () => {
    const owner = await realtimeOwner('Realtime widths')
    const channel = longChannel()
    const client = await endUser(owner, 'carol', channel)
    const subscription = client.subscribe(channel)
    await eventually(() => subscription.active, 5000, 'subscribed')
    const console = await browser.open()
    const { page } = console
    await openArea(page, owner, owner.productId, 'realtime')
    const views: [string, string][] = [
      ['namespaces', '[data-testid=namespaces]'],
      ['channels', `[data-testid=channels] tr[data-channel="${channel}"]`],
      ['keys', '[data-testid=keys]'],
      [`inspector/${encodeURIComponent(channel)}`, '[data-testid=inspector-state][data-state=subscribed]'],
      [`archive/${encodeURIComponent(channel)}`, '[data-testid=archive-empty]'],
    ]
    const wide: string[] = []
    for (const [view, ready] of views) {
      await page.evaluate((hash) => { location.hash = hash }, `#/p/${owner.productId}/realtime/${view}`)
      await page.waitForSelector(ready)
      wide.push(...await tooWide(page, view.split('/')[0]!))
    }
    expect(wide).toEqual([])
    client.disconnect()
    expectNoProblems(console)
  })
})
