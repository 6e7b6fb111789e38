// The console's Realtime area in a real Chromium against real api, public and gateway processes: namespaces and keys
// as the API has them, a key's secret shown once, and the live channel inspector (publications over HTTP arriving,
// presence joins and leaves of another real client, history, a publish from the page reaching a subscriber).
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { PUBLIC_SCOPES } from '../../shared/realtime/public-keys'
import { RealtimeClient, type Publication } from '../../shared/realtime-client/client'
import { PRETTY_MAX_DEPTH, SHOWN_PAYLOAD_CHARS } from '../../services/api/console/app/views/realtime/format'
import { KEY_SCOPES } from '../../services/api/console/app/views/realtime/keys'
import { call, eventually, freePort, newProduct, ok, startProcess, type Worker } from '../helpers'
import { startGateway, type GatewayProcess } from '../gateway/ws-helpers'
import { createKey, manage, pub } from '../realtime/public-helpers'
import { expectNoProblems, openArea, screenshot, useBrowser } from './browser'
import { watchRefusals } from './refusals'

let gateway: GatewayProcess
let apiWorker: Worker
let publicWorker: Worker
beforeAll(async () => {
  // The page connects to the gateway the api names (GATEWAY_URL), and its CSP allows only that origin.
  const port = await freePort()
  const env = { GATEWAY_URL: `ws://127.0.0.1:${port}/connection/websocket` }
  ;[gateway, apiWorker, publicWorker] = await Promise.all([startGateway({}, port), startProcess('api', env), startProcess('public', env)])
  expect(gateway.wsUrl).toBe(env.GATEWAY_URL)
}, 30_000)
afterAll(async () => {
  await Promise.all([apiWorker?.stop(), publicWorker?.stop(), gateway?.stop()])
})
const browser = useBrowser(() => apiWorker.url)

type Owner = Awaited<ReturnType<typeof newProduct>>

async function realtimeOwner(name: string, namespaces: Record<string, unknown>[] = []): Promise<Owner> {
  const owner = await newProduct(name)
  for (const namespace of namespaces) await manage(owner, 'POST', '/realtime/namespaces', namespace)
  return owner
}

/** Every namespace as the API lists it, by name. */
async function apiNamespaces(owner: Owner) {
  const listed = ok(await call('GET', '/realtime/namespaces', { token: owner.token, productId: owner.productId }), 'namespaces')
  return (listed.body.namespaces as { name: string; presence: boolean; clientEvents: boolean; history: unknown; archive: unknown }[])
}

describe('namespaces and keys', () => {
  test('the namespaces listed match the API; one created and one edited through the page are what the API then has', async () => {
    const owner = await realtimeOwner('Realtime console', [
      { name: 'chat', presence: true, history: { ttlSeconds: 300, size: 100 } },
      { name: 'live' },
    ])
    const console = await browser.open()
    const { page } = console
    const refusals = watchRefusals(page)
    await openArea(page, owner, owner.productId, 'realtime')
    await page.waitForSelector('[data-testid=namespaces]')
    const rows = async () => (await page.locator('[data-testid=namespaces] tbody tr').evaluateAll((trs) =>
      trs.map((tr) => [...tr.querySelectorAll('td')].slice(0, 5).map((td) => td.textContent))))
    const shown = (n: { name: string; presence: boolean; clientEvents: boolean; history: any; archive: any }) => [
      n.name, n.presence ? 'on' : 'off', n.clientEvents ? 'on' : 'off',
      n.history ? `${n.history.ttlSeconds} s, ${n.history.size} entries` : 'off', n.archive ? `${n.archive.retentionDays} days` : 'off',
    ]
    expect(await rows()).toEqual((await apiNamespaces(owner)).map(shown))

    await page.click('[data-testid=namespace-new]')
    await page.fill('[data-testid=namespace-form] input[name=name]', 'events')
    await page.check('[data-testid=namespace-form] input[name=clientEvents]')
    await page.check('[data-testid=namespace-form] input[name=history]')
    await page.fill('[data-testid=namespace-form] input[name=historyTtlSeconds]', '600')
    await page.fill('[data-testid=namespace-form] input[name=historySize]', '50')
    await page.check('[data-testid=namespace-form] input[name=archive]')
    await page.fill('[data-testid=namespace-form] input[name=archiveDays]', '7')
    await page.click('[data-testid=namespace-form] button[type=submit]')
    await page.waitForSelector('[data-testid=namespaces] code.namespace-name:text-is("events")')
    const created = (await apiNamespaces(owner)).find((n) => n.name === 'events')
    expect(created).toMatchObject({ presence: false, clientEvents: true, history: { ttlSeconds: 600, size: 50 }, archive: { retentionDays: 7 } })
    expect(await rows()).toEqual((await apiNamespaces(owner)).map(shown))

    // Edit: presence on for live; the rest of its policy unchanged.
    await page.locator('[data-testid=namespaces] tbody tr', { has: page.locator('code:text-is("live")') }).locator('button:text-is("Edit")').click()
    expect(await page.isDisabled('[data-testid=namespace-form] input[name=name]')).toBe(true)
    await page.check('[data-testid=namespace-form] input[name=presence]')
    await page.click('[data-testid=namespace-form] button[type=submit]')
    await page.waitForSelector('[data-testid=namespace-form]', { state: 'detached' })
    expect((await apiNamespaces(owner)).find((n) => n.name === 'live')).toMatchObject({ presence: true, clientEvents: false, history: null, archive: null })
    expect(await rows()).toEqual((await apiNamespaces(owner)).map(shown))

    // A bad name is the API's 4xx, shown in the form, and nothing is created.
    await page.click('[data-testid=namespace-new]')
    await page.fill('[data-testid=namespace-form] input[name=name]', 'Not a name!')
    await page.click('[data-testid=namespace-form] button[type=submit]')
    await page.waitForSelector('[data-testid=namespace-form] .error:not(:empty)')
    expect(await page.textContent('[data-testid=namespace-form] .error')).toContain('name')
    await page.click('[data-testid=namespace-form] button:text-is("Cancel")')
    await screenshot(page, 'realtime-namespaces')
    // The refused create is the only request refused, and the page's only problems are the browser's notes of it.
    refusals.expectOnly(console, [{ method: 'POST', status: 400, path: '/realtime/namespaces' }])

    // Delete, confirmed in the page (a second click on the armed button; a dialog would be a problem, browser.ts).
    const row = page.locator('[data-testid=namespaces] tbody tr', { has: page.locator('code:text-is("events")') })
    await row.locator('button:text-is("Delete")').click()
    await row.locator('button:text-is("Confirm delete")').click()
    await page.waitForSelector('[data-testid=namespaces] code.namespace-name:text-is("events")', { state: 'detached' })
    expect((await apiNamespaces(owner)).map((n) => n.name)).toEqual(['chat', 'live'])
    refusals.expectOnly(console, [{ method: 'POST', status: 400, path: '/realtime/namespaces' }]) // nothing since
  })

  test("the key form offers exactly the platform's scopes", () => {
    expect(KEY_SCOPES).toEqual(PUBLIC_SCOPES)
  })

  test('a key created shows its secret once; the list shows only its prefix; a revoked key leaves the list', async () => {
    const owner = await realtimeOwner('Realtime keys')
    const console = await browser.open()
    const { page } = console
    await openArea(page, owner, owner.productId, 'realtime')
    await page.click('.tabs a:text-is("API keys")')
    await page.waitForSelector('[data-testid=keys-empty]')
    await page.fill('[data-testid=key-form] input[name=name]', 'backend')
    await page.uncheck('[data-testid=key-form] input[value="channels:read"]')
    await page.click('[data-testid=key-form] button[type=submit]')
    await page.waitForSelector('[data-testid=new-key-secret]')
    const secret = (await page.textContent('[data-testid=new-key-secret]'))!
    expect(secret).toMatch(/^rtk_/)
    expect(await page.textContent('[data-testid=new-key]')).toMatch(/only time/)
    await page.waitForSelector('[data-testid=keys]')

    // The secret works on the public routes, with the scope chosen in the page.
    const listed = ok(await call('GET', `/governance/api/v1/products/${owner.productId}/public-keys`, { token: owner.token, productId: owner.productId }), 'keys')
    expect(listed.body.keys).toHaveLength(1)
    const key = listed.body.keys[0]
    expect(key.scope).toEqual(['tokens:issue', 'messages:publish', 'history:read', 'presence:read'])
    expect(secret.startsWith(key.prefix)).toBe(true)
    const base = `/${owner.productId}/realtime`
    expect((await pub(publicWorker, 'GET', `${base}/channels/chat:x`, { key: secret })).status).toBe(403) // channels:read left out

    // The list shows the prefix only; once dismissed (or after any reload of the view) the secret is nowhere.
    expect(await page.textContent('[data-testid=keys] .key-prefix')).toBe(`${key.prefix}…`)
    await page.click('[data-testid=new-key] button:text-is("Done")')
    await page.click('.tabs a:text-is("Namespaces")')
    await page.click('.tabs a:text-is("API keys")')
    await page.waitForSelector('[data-testid=keys]')
    expect(await page.textContent('body')).not.toContain(secret)
    expect(await page.textContent('body')).toContain(key.prefix)
    await screenshot(page, 'realtime-keys')

    await page.click('[data-testid=keys] button:text-is("Revoke")')
    await page.click('[data-testid=keys] button:text-is("Confirm revoke")')
    await page.waitForSelector('[data-testid=keys-empty]')
    const after = ok(await call('GET', `/governance/api/v1/products/${owner.productId}/public-keys`, { token: owner.token, productId: owner.productId }), 'keys')
    expect(after.body.keys).toEqual([])
    expectNoProblems(console)
  })
})

describe('the channel inspector', () => {
  const CHAT = { name: 'chat', presence: true, history: { ttlSeconds: 300, size: 100 } }
  const room = () => `chat:room-${randomUUID().slice(0, 8)}`

  /** A client of the product in this process, as an end user's browser would be: a token from the public issue route. */
  async function endUser(owner: Owner, key: string, subject: string, channel: string) {
    const issued = await pub(publicWorker, 'POST', `/${owner.productId}/realtime/tokens/issue`, {
      key, body: { subject, channels: [{ name: channel, ops: ['subscribe', 'presence'] }] },
    })
    expect(issued.status).toBe(200)
    const client = new RealtimeClient({ url: gateway.wsUrl, getToken: async () => issued.body.token })
    client.connect()
    await eventually(() => client.connected, 5000, `${subject} connected`)
    return client
  }

  /** Opens the inspector on `channel` the way a person does, and waits until it watches through the gateway. */
  async function inspect(owner: Owner, channel: string) {
    const console = await browser.open()
    const { page } = console
    const sockets: { url: string; closed: Promise<void> }[] = []
    page.on('websocket', (socket) => sockets.push({ url: socket.url(), closed: new Promise((resolve) => socket.on('close', () => resolve())) }))
    await openArea(page, owner, owner.productId, 'realtime')
    await page.click('.tabs a:text-is("Channel inspector")')
    await page.fill('[data-testid=inspector-form] input[name=channel]', channel)
    await page.click('[data-testid=inspector-form] button[type=submit]')
    await page.waitForSelector('[data-testid=inspector-state][data-state=subscribed]')
    return { console, page, sockets }
  }

  test('publications sent over HTTP arrive in the page; presence joins and leaves of another client show; history reads what came before', async () => {
    const owner = await realtimeOwner('Realtime inspector', [CHAT])
    const { key } = await createKey(owner)
    const channel = room()
    const send = (data: unknown) => pub(publicWorker, 'POST', `/${owner.productId}/realtime/messages`, { key, body: { channel, data } })
    const earlier = [{ text: 'before the page', n: 1 }, { text: 'also before', n: 2 }]
    for (const data of earlier) expect((await send(data)).status).toBe(200)

    const { console, page, sockets } = await inspect(owner, channel)
    // The page watches through the test's gateway, the one origin its CSP lets it reach.
    expect(sockets.map((socket) => socket.url)).toEqual([gateway.wsUrl])
    expect(await page.textContent('[data-testid=inspector-state]')).toContain('ext:console:')

    // Live: each publication appears with its offset and its data pretty-printed, newest first.
    const live = [{ text: 'hello from HTTP', n: 3, tags: ['a', 'b'] }, { text: 'second live', n: 4, nested: { ok: true } }]
    const offsets: number[] = []
    for (const data of live) {
      const sent = await send(data)
      expect(sent.status).toBe(200)
      offsets.push(sent.body.offset)
      // The "within a second" is what a reader sees; the test only bounds it generously, from the send.
      const item = page.locator(`[data-testid=publication][data-offset="${sent.body.offset}"]`)
      await item.waitFor({ timeout: 5000 })
      expect(await item.locator('pre.data').textContent()).toBe(JSON.stringify(data, null, 2))
    }
    expect(await page.locator('[data-testid=publication]').evaluateAll((items) => items.map((item) => Number(item.getAttribute('data-offset')))))
      .toEqual([...offsets].reverse())

    // Presence: another real client enters and leaves; the page sees both and keeps the roster.
    const alice = await endUser(owner, key, 'alice', channel)
    await alice.presence(channel).enter({ name: 'Alice' })
    await page.waitForSelector('[data-testid=presence-events] li[data-kind=join][data-identity="ext:alice"]')
    await page.waitForSelector('[data-testid=presence-members] li[data-identity="ext:alice"]')
    expect(await page.textContent('[data-testid=presence-members] li[data-identity="ext:alice"] pre')).toBe('{"name":"Alice"}')
    await screenshot(page, 'realtime-inspector')
    await alice.presence(channel).leave()
    await page.waitForSelector('[data-testid=presence-events] li[data-kind=leave][data-identity="ext:alice"]')
    await page.waitForSelector('[data-testid=presence-members] li[data-identity="ext:alice"]', { state: 'detached' })
    alice.disconnect()

    // History: what was published before the page opened, as the API answers it, newest first.
    await page.click('[data-testid=history-read]')
    await page.waitForSelector('[data-testid=history-entry]')
    const history = ok(await call('GET', `/realtime/channels/${encodeURIComponent(channel)}/history?last_n=20`, { token: owner.token, productId: owner.productId }), 'history')
    const shown = await page.locator('[data-testid=history-entry]').evaluateAll((items) =>
      items.map((item) => [Number(item.getAttribute('data-offset')), item.querySelector('pre')!.textContent]))
    expect(shown).toEqual(history.body.entries.map((entry: { offset: number; data: unknown }) => [entry.offset, JSON.stringify(entry.data, null, 2)]).reverse())
    expect(shown.map(([, text]) => JSON.parse(String(text)))).toEqual([...[...live].reverse(), ...[...earlier].reverse()] as unknown[])
    expectNoProblems(console)
  })

  test('a message published from the page reaches a subscriber; leaving the view disconnects the page', async () => {
    const owner = await realtimeOwner('Realtime publish', [CHAT])
    const { key } = await createKey(owner)
    const channel = room()
    const subscriber = await endUser(owner, key, 'bob', channel)
    const received: Publication[] = []
    const subscription = subscriber.subscribe(channel, { publication: (publication) => received.push(publication) })
    const { console, page, sockets } = await inspect(owner, channel)
    await eventually(() => subscription.active, 5000, 'bob subscribed')

    const data = { text: 'from the console', at: randomUUID() }
    await page.fill('[data-testid=publish-form] textarea', JSON.stringify(data))
    await page.click('[data-testid=publish-form] button[type=submit]')
    await page.waitForSelector('[data-testid=publish-result].ok')
    await eventually(() => received.length > 0, 5000, 'the page\'s publication reached bob')
    expect(received.map((publication) => publication.data)).toEqual([data])
    expect(await page.textContent('[data-testid=publish-result]')).toBe(`Published at offset ${received[0]!.offset}.`)
    // The page's own subscription shows it too.
    await page.waitForSelector(`[data-testid=publication][data-offset="${received[0]!.offset}"]`)

    // Not JSON: refused in the page, nothing sent.
    await page.fill('[data-testid=publish-form] textarea', '{not json')
    await page.click('[data-testid=publish-form] button[type=submit]')
    await page.waitForSelector('[data-testid=publish-result].error')
    expect(await page.textContent('[data-testid=publish-result]')).toMatch(/^Not JSON/)

    // Leaving the inspector (the view's cleanup) closes its gateway connection.
    expect(sockets).toHaveLength(1)
    await page.click('.tabs a:text-is("Namespaces")')
    let closed = false
    void sockets[0]!.closed.then(() => { closed = true })
    await eventually(() => closed, 10_000, 'the page closed its gateway connection after leaving the inspector')
    subscriber.disconnect()
    expect(received).toHaveLength(1)
    expectNoProblems(console)
  })

  test('a namespace without presence or history: the page says so, and live publications still arrive', async () => {
    const owner = await realtimeOwner('Realtime plain', [{ name: 'live' }])
    const { key } = await createKey(owner)
    const channel = `live:feed-${randomUUID().slice(0, 8)}`
    const { console, page } = await inspect(owner, channel)
    await page.waitForSelector('.side p:text-is("Presence is off for this namespace.")')
    const data = { price: 101.5, symbol: 'ACME', note: '<img src=x onerror="document.title=1">' }
    const sent = await pub(publicWorker, 'POST', `/${owner.productId}/realtime/messages`, { key, body: { channel, data } })
    expect(sent.status).toBe(200)
    expect(sent.body.offset).toBeUndefined()
    const item = page.locator('[data-testid=publication]')
    await item.waitFor()
    expect(await item.locator('.offset').textContent()).toBe('no history')
    expect(await item.locator('pre.data').textContent()).toBe(JSON.stringify(data, null, 2))
    expect(await page.locator('[data-testid=publications] img').count()).toBe(0) // a payload is text, never markup
    await page.click('[data-testid=history-read]')
    await page.waitForSelector('[data-testid=history-empty]')
    expectNoProblems(console)
  })

  test('a hostile payload (very large, deeply nested) is shown bounded, with a note, and the page goes on', async () => {
    const owner = await realtimeOwner('Realtime hostile', [CHAT])
    const { key } = await createKey(owner)
    const channel = room()
    const { console, page } = await inspect(owner, channel)
    const send = async (data: unknown) => {
      const sent = await pub(publicWorker, 'POST', `/${owner.productId}/realtime/messages`, { key, body: { channel, data } })
      expect(sent.status).toBe(200)
      return sent.body.offset as number
    }
    /** One publication as the page shows it (waited for): its text and its note. */
    const shown = async (offset: number) => {
      const item = page.locator(`[data-testid=publication][data-offset="${offset}"]`)
      await item.waitFor()
      return { text: await item.locator('pre.data').textContent(), note: await item.locator('[data-testid=payload-note]').textContent({ timeout: 1000 }).catch(() => null) }
    }

    // Far larger than the page shows (under the 256 KB inline cap): its first SHOWN_PAYLOAD_CHARS, compact, and a note.
    const large = { blob: 'x'.repeat(200_000), more: Array.from({ length: 500 }, (_, i) => ({ i })) }
    const compactLarge = JSON.stringify(large)
    const largeShown = await shown(await send(large))
    expect(largeShown.text).toBe(`${compactLarge.slice(0, SHOWN_PAYLOAD_CHARS)}…`)
    expect(largeShown.note).toContain(`Showing the first ${SHOWN_PAYLOAD_CHARS / 1024} KB of ${Math.ceil(compactLarge.length / 1024)} KB.`)

    // Nested as deep as a request body may be (MAX_JSON_DEPTH, 64, with the body's own level): shown compact, since
    // indentation would grow with depth × lines (deeper payloads, which the API refuses, in test/unit/console-payload-text).
    const depth = 60
    const deep = JSON.parse(`${'['.repeat(depth)}"bottom"${']'.repeat(depth)}`)
    const deepShown = await shown(await send(deep))
    expect(deepShown.text).toBe(JSON.stringify(deep))
    expect(deepShown.note).toBe(`Nested ${depth} levels deep: shown compact.`)
    expect(depth).toBeGreaterThan(PRETTY_MAX_DEPTH)

    // The page goes on: a plain publication after them is shown whole, pretty-printed, with no note.
    const plain = { text: 'still here', n: 1 }
    expect(await shown(await send(plain))).toEqual({ text: JSON.stringify(plain, null, 2), note: null })

    // History shows the same entries the same bounded way.
    await page.fill('input[name=last_n]', '3')
    await page.click('[data-testid=history-read]')
    await page.waitForFunction(() => document.querySelectorAll('[data-testid=history-entry]').length === 3)
    const history = await page.locator('[data-testid=history-entry]').evaluateAll((items) => items.map((item) => ({
      text: item.querySelector('pre.data')!.textContent as string | null, note: item.querySelector('[data-testid=payload-note]')?.textContent ?? null,
    })))
    expect(history).toEqual([
      { text: JSON.stringify(plain, null, 2), note: null },
      { text: deepShown.text, note: deepShown.note },
      { text: largeShown.text, note: largeShown.note },
    ])
    expectNoProblems(console)
  })

  test('a channel of an unregistered namespace shows the API refusal and opens no connection', async () => {
    const owner = await realtimeOwner('Realtime refused', [CHAT])
    const console = await browser.open()
    const { page } = console
    const sockets: string[] = []
    page.on('websocket', (socket) => sockets.push(socket.url()))
    const refusals = watchRefusals(page)
    await openArea(page, owner, owner.productId, 'realtime')
    await page.click('.tabs a:text-is("Channel inspector")')
    await page.fill('[data-testid=inspector-form] input[name=channel]', 'nowhere:room')
    await page.click('[data-testid=inspector-form] button[type=submit]')
    await page.waitForSelector('[data-testid=inspector-state][data-state=failed]')
    expect(await page.textContent('[data-testid=inspector-state]')).toMatch(/namespace/i)
    expect(sockets).toEqual([])
    // The token issue is the one request refused; the page's only problems are the browser's notes of it.
    refusals.expectOnly(console, [{ method: 'POST', status: 422, path: '/realtime/tokens' }])
  })
})
