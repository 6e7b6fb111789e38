// The console's Realtime area in a real Chromium against real api, public and gateway processes: namespaces and keys
// as the API has them, a key's secret shown once, and the live channel inspector (publications over HTTP arriving,
// presence joins and leaves of another real client, history, a publish from the page reaching a subscriber).
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { RealtimeClient, type Publication } from '../../shared/realtime-client/client'
import { call, newProduct, ok, startProcess, type Worker } from '../helpers'
import { startGateway, type GatewayProcess } from '../gateway/ws-helpers'
import { createKey, manage, pub } from '../realtime/public-helpers'
import { expectNoProblems, openArea, screenshot, useBrowser } from './browser'

let gateway: GatewayProcess
let apiWorker: Worker
let publicWorker: Worker
beforeAll(async () => {
  gateway = await startGateway()
  // The page connects to the gateway the api names (GATEWAY_URL), and its CSP allows only that origin.
  const env = { GATEWAY_URL: gateway.wsUrl }
  ;[apiWorker, publicWorker] = await Promise.all([startProcess('api', env), startProcess('public', env)])
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
    // Chromium logs the refused create's 4xx response as a console error: that one line is expected, nothing else.
    expect(console.problems).toEqual([expect.stringMatching(/status of 4\d\d/)])
    console.problems.splice(0)

    // Delete (confirmed in the dialog).
    page.once('dialog', (dialog) => void dialog.accept())
    await page.locator('[data-testid=namespaces] tbody tr', { has: page.locator('code:text-is("events")') }).locator('button:text-is("Delete")').click()
    await page.waitForSelector('[data-testid=namespaces] code.namespace-name:text-is("events")', { state: 'detached' })
    expect((await apiNamespaces(owner)).map((n) => n.name)).toEqual(['chat', 'live'])
    expectNoProblems(console)
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

    page.once('dialog', (dialog) => void dialog.accept())
    await page.click('[data-testid=keys] button:text-is("Revoke")')
    await page.waitForSelector('[data-testid=keys-empty]')
    const after = ok(await call('GET', `/governance/api/v1/products/${owner.productId}/public-keys`, { token: owner.token, productId: owner.productId }), 'keys')
    expect(after.body.keys).toEqual([])
    expectNoProblems(console)
  })
})
