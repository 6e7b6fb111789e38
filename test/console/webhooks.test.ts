// The webhooks pages of both areas in a real Chromium against real processes: an api, a webhooks process delivering on
// a short retry schedule, and a receiver on loopback that answers 500 to the first request of a path and 200 after.
// What the page shows is read from it and compared with what the API answers; each view is measured at three widths.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Page } from 'playwright-core'
import { sql } from '../../shared/db/client'
import { call, newProduct, ok, startProcess, type Worker } from '../helpers'
import { type Receiver, startReceiver, verified } from '../webhooks/receiver'
import { expectNoOverflow, expectNoProblems, openArea, useBrowser } from './browser'

type Owner = Awaited<ReturnType<typeof newProduct>>

let apiWorker: Worker
let webhooks: Worker
let receiver: Receiver
beforeAll(async () => {
  receiver = startReceiver()
  ;[apiWorker, webhooks] = await Promise.all([
    startProcess('api'),
    startProcess('webhooks', { WEBHOOK_POLL_MS: '50', WEBHOOK_RETRY_SCHEDULE: '200ms,200ms' }),
  ])
}, 30_000)
afterAll(async () => {
  await Promise.all([apiWorker?.stop(), webhooks?.stop()])
  receiver?.stop()
})
const browser = useBrowser(() => apiWorker.url)

const as = (owner: Owner, method: string, path: string, body?: unknown) => call(method, path, { token: owner.token, productId: owner.productId, body })

/** The first request to `path` fails with 500, every later one succeeds: a delivery that failed once. */
function failsOnce(path: string): string {
  receiver.on(path, (_request, nth) => (nth === 1 ? new Response('down for a moment', { status: 500 }) : new Response('ok')))
  return receiver.url(path)
}

/**
 * Nothing on the page reaches past the window or past the box it sits in at 390, 1280 and 1920 px (expectNoOverflow),
 * and `view` scrolls nothing sideways.
 */
async function expectFluid(page: Page, view: string): Promise<void> {
  for (const width of [390, 1280, 1920]) {
    await page.setViewportSize({ width, height: 860 })
    await expectNoOverflow(page, `${view} at ${width} px`)
    expect({ view, width, viewFits: await page.$eval(view, (element) => element.scrollWidth <= element.clientWidth) })
      .toEqual({ view, width, viewFits: true })
  }
  await page.setViewportSize({ width: 1280, height: 860 })
}

/** Clicks a confirming button twice, as a person confirms in the page (no window.confirm). */
async function confirm(page: Page, selector: string): Promise<void> {
  await page.click(selector)
  await page.waitForSelector(`${selector}[data-armed]`)
  await page.click(selector)
}

describe('mail webhooks', () => {
  test('an endpoint added in the page shows its secret once and is listed as the API lists it; a test event that failed once shows both attempts, and is replayed from the page', async () => {
    const owner = await newProduct('Webhooks console')
    const path = `/hook/${'long-segment-'.repeat(20)}${crypto.randomUUID()}`
    const url = failsOnce(path)
    const console = await browser.open()
    const { page } = console
    await openArea(page, owner, owner.productId, 'mail')
    await page.click('.tabs a[href$="/mail/webhooks"]')
    await page.fill('[data-testid=webhook-create] input[name=url]', url)
    await page.fill('[data-testid=webhook-create] input[name=description]', 'orders backend')
    await page.click('[data-testid=webhook-create] button[type=submit]')
    const secret = await page.textContent('[data-testid=new-secret-value]')
    expect(secret).toMatch(/^whsec_/)
    const [listed] = ok(await as(owner, 'GET', '/mail/webhooks'), 'list').body.data
    expect(listed).toMatchObject({ url, description: 'orders backend', eventKinds: ['*'], enabled: true })
    expect(secret!.startsWith(listed.secretPrefix)).toBe(true)
    const row = `[data-endpoint-id="${listed.id}"]`
    expect(await page.textContent(`${row} .wh-url`)).toBe(url)
    expect(await page.textContent(`${row} [data-state]`)).toBe('enabled')
    await expectFluid(page, '.webhooks-view')

    await page.click(`${row} .wh-url`)
    await page.waitForSelector('[data-testid=endpoint]')
    await page.click('[data-testid=send-test]')
    // The page reads the deliveries again while one is pending: it settles on its own.
    await page.waitForSelector('[data-testid=deliveries] tr[data-delivery-id] [data-state=succeeded]')
    const [delivery] = ok(await as(owner, 'GET', `/mail/webhooks/${listed.id}/deliveries`), 'deliveries').body.data
    expect(delivery).toMatchObject({ eventKind: 'webhook.test', state: 'succeeded', attemptCount: 2, lastAttempt: { statusCode: 200 } })
    expect(await page.textContent(`tr[data-delivery-id="${delivery.id}"] [data-testid=attempt-count]`)).toBe('2')
    // Both requests arrived signed with the secret the page showed.
    const received = receiver.received(path)
    expect(received.map((request) => verified(secret!, request).type)).toEqual(['webhook.test', 'webhook.test'])
    await expectFluid(page, '.webhooks-view')

    await page.click(`[data-delivery-link="${delivery.id}"]`)
    await page.waitForSelector(`[data-testid=delivery][data-delivery-id="${delivery.id}"] [data-testid=attempts]`)
    const detail = ok(await as(owner, 'GET', `/mail/webhooks/${listed.id}/deliveries/${delivery.id}`), 'delivery').body
    const attemptsShown = await page.$$eval('[data-testid=attempts] tbody tr', (rows) => rows.map((row) => ({
      status: row.querySelector('[data-testid=status-code]')?.textContent ?? null,
      response: row.querySelectorAll('td')[4]!.textContent,
    })))
    expect(attemptsShown).toEqual(detail.attempts.map((a: any) => ({ status: String(a.statusCode), response: a.responseExcerpt })))
    expect(attemptsShown.map((a) => a.status)).toEqual(['500', '200'])
    expect(await page.textContent('[data-testid=message-id]')).toBe(detail.messageId)
    await expectFluid(page, '.webhooks-view')

    await page.click('[data-testid=replay]')
    await page.waitForSelector('[data-testid=replay-of]')
    const replayId = await page.getAttribute('[data-testid=delivery]', 'data-delivery-id')
    expect(replayId).not.toBe(delivery.id)
    expect(await page.textContent('[data-testid=replay-of]')).toBe(delivery.id)
    await page.waitForSelector('[data-testid=delivery] .wh-head [data-state=succeeded]')
    const replayed = ok(await as(owner, 'GET', `/mail/webhooks/${listed.id}/deliveries/${replayId}`), 'replay').body
    expect(replayed).toMatchObject({ replayOf: delivery.id, messageId: delivery.messageId, state: 'succeeded', attemptCount: 1 })
    expect(receiver.received(path).map((request) => request.headers['webhook-id'])).toEqual([delivery.messageId, delivery.messageId, delivery.messageId])
    expectNoProblems(console)
  }, 60_000)

  test('rotating the secret and deleting the endpoint each ask for a confirmation in the page; the new secret is shown once', async () => {
    const owner = await newProduct('Webhooks rotate')
    const created = ok(await as(owner, 'POST', '/mail/webhooks', { url: receiver.url('/rotate'), eventKinds: ['email.bounced'] }), 'create').body
    const console = await browser.open()
    const { page } = console
    await openArea(page, owner, owner.productId, 'mail')
    await page.click('.tabs a[href$="/mail/webhooks"]')
    await page.click(`[data-endpoint-id="${created.id}"] .wh-url`)
    await page.waitForSelector('[data-testid=endpoint]')
    expect(await page.textContent('[data-testid=secret-prefix]')).toBe(`${created.secretPrefix}…`)

    await page.click('[data-testid=rotate]')
    expect(await page.textContent('[data-testid=rotate]')).toBe('Confirm rotate secret')
    // Nothing happened on the first click: the secret is the one it was.
    expect(ok(await as(owner, 'GET', `/mail/webhooks/${created.id}`), 'get').body.secretPrefix).toBe(created.secretPrefix)
    await page.click('[data-testid=rotate]')
    const secret = await page.textContent('[data-testid=new-secret-value]')
    const rotated = ok(await as(owner, 'GET', `/mail/webhooks/${created.id}`), 'after rotation').body
    expect(rotated.secretPrefix).not.toBe(created.secretPrefix)
    expect(secret!.startsWith(rotated.secretPrefix)).toBe(true)
    await page.waitForFunction((prefix) => document.querySelector('[data-testid=secret-prefix]')?.textContent === `${prefix}…`, rotated.secretPrefix)
    expect(rotated.previousSecretExpiresAt).not.toBeNull()

    await confirm(page, '[data-testid=delete]')
    await page.waitForSelector('[data-testid=webhooks] .empty')
    expect((await as(owner, 'GET', `/mail/webhooks/${created.id}`)).status).toBe(404)
    expectNoProblems(console)
  })
})

describe('realtime webhooks', () => {
  test('the same pages in the Realtime area: an endpoint disabled by the platform shows why; the form changes its kinds and enables it', async () => {
    const owner = await newProduct('Realtime webhooks console')
    const created = ok(await as(owner, 'POST', '/realtime/webhooks', {
      url: receiver.url('/realtime'), eventKinds: ['channel.occupied', 'channel.vacated'],
    }), 'create').body
    // What the webhooks process records when an endpoint has failed for too long (services/webhooks/).
    const reason = 'Every attempt failed for 5 days: the last answered 503'
    await sql`update webhook_endpoints set enabled = false, disabled_reason = ${reason} where id = ${created.id}`
    const console = await browser.open()
    const { page } = console
    await openArea(page, owner, owner.productId, 'realtime')
    await page.click('.tabs a[href$="/realtime/webhooks"]')
    const row = `[data-endpoint-id="${created.id}"]`
    await page.waitForSelector(row)
    expect(await page.textContent(`${row} [data-state]`)).toBe('disabled')
    expect(await page.textContent(`${row} [data-testid=disabled-reason]`)).toBe(reason)
    expect(await page.textContent(`${row} .wh-kind-list`)).toBe('channel.occupied, channel.vacated')
    await expectFluid(page, '.webhooks-view')

    await page.click(`${row} .wh-url`)
    await page.waitForSelector('[data-testid=webhook-edit]')
    await page.uncheck('[data-testid=webhook-edit] input[value="channel.vacated"]')
    await page.check('[data-testid=webhook-edit] input[value="message.published"]')
    await page.check('[data-testid=webhook-edit] input[name=enabled]')
    await page.click('[data-testid=webhook-edit] button[type=submit]')
    await page.waitForSelector('[data-testid=endpoint] .wh-head [data-state=enabled]')
    const updated = ok(await as(owner, 'GET', `/realtime/webhooks/${created.id}`), 'get').body
    expect(updated).toMatchObject({ enabled: true, disabledReason: null, eventKinds: ['channel.occupied', 'message.published'] })
    await expectFluid(page, '.webhooks-view')

    // The test event goes through the same delivery path in this area.
    await page.click('[data-testid=send-test]')
    await page.waitForSelector('[data-testid=deliveries] [data-state=succeeded]')
    expect(ok(await as(owner, 'GET', `/realtime/webhooks/${created.id}/deliveries`), 'deliveries').body.deliveries[0])
      .toMatchObject({ eventKind: 'webhook.test', state: 'succeeded' })
    expectNoProblems(console)
  }, 60_000)
})
