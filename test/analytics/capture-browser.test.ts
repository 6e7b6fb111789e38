// The browser capture library (shared/capture-client) in a real Chromium: a page on a loopback origin captures through a
// real public worker, and the events land in PostgreSQL, including the flush by sendBeacon when the page is left, and
// the refusal of an origin the key does not list.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { join } from 'node:path'
import { chromium, type Browser, type Page } from 'playwright-core'
import { sql } from '../../shared/db/client'
import { call, eventually, newProduct, ok, startProcess, type Worker } from '../helpers'
import { ARGS, CHROMIUM } from '../console/browser'

let browser: Browser
let publicWorker: Worker
let pages: ReturnType<typeof Bun.serve>
let owner: Awaited<ReturnType<typeof newProduct>>
let key: string
/** The origin the key lists, and another one served by the same server (localhost is not 127.0.0.1 to a browser). */
let allowedOrigin: string
let otherOrigin: string

const PAGE = `<!doctype html><meta charset="utf-8"><title>capture test</title>
<script type="module">
  import { createCapture } from '/capture.js'
  const q = new URLSearchParams(location.search)
  // Large batch and long interval: the test decides when a flush happens (or that the page's leaving does).
  window.analytics = createCapture({ baseUrl: q.get('base'), productId: q.get('product'), key: q.get('key'), flushAt: 1000, flushIntervalMs: 600000 })
  window.ready = true
</script>`

beforeAll(async () => {
  const built = await Bun.build({ entrypoints: [join(import.meta.dir, '../../shared/capture-client/client.ts')], target: 'browser', format: 'esm' })
  if (!built.success) throw new Error(built.logs.map(String).join('; '))
  const bundle = await built.outputs[0]!.text()
  pages = Bun.serve({
    hostname: '127.0.0.1', port: 0,
    fetch: (request) => new URL(request.url).pathname === '/capture.js'
      ? new Response(bundle, { headers: { 'content-type': 'text/javascript' } })
      : new Response(PAGE, { headers: { 'content-type': 'text/html' } }),
  })
  allowedOrigin = `http://127.0.0.1:${pages.port}`
  otherOrigin = `http://localhost:${pages.port}`
  ;[publicWorker, owner, browser] = await Promise.all([
    startProcess('public'), newProduct('Capture browser test'),
    chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true }),
  ])
  key = ok(await call('POST', '/tracking/capture-keys', { token: owner.token, productId: owner.productId, body: { name: 'site', allowedOrigins: [allowedOrigin] } }), 'create key').body.key
})
afterAll(async () => {
  await browser?.close()
  await publicWorker?.stop()
  pages?.stop(true)
})

async function openPage(origin = allowedOrigin): Promise<Page> {
  const context = await browser.newContext()
  const page = await context.newPage()
  const query = new URLSearchParams({ base: publicWorker.url, product: owner.productId, key })
  await page.goto(`${origin}/?${query}`)
  await page.waitForFunction(() => (window as any).ready === true)
  return page
}

const rows = async (name: string) => [...await sql<{ event: string; anonymous_id: string; users_id: string | null; properties: any }[]>`
  select event, anonymous_id, users_id, properties from tracked_events where product_id = ${owner.productId} and event = ${name} order by id`]

describe('capture from a page', () => {
  test('events land in tracked_events with the anonymous id the page keeps, and identify adds users_id', async () => {
    const page = await openPage()
    const name = `page-${randomUUID()}`
    const accepted = await page.evaluate(async (name) => {
      const analytics = (window as any).analytics
      analytics.capture(name, { n: 1 })
      analytics.capture(name, { n: 2 })
      analytics.identify('user-42')
      analytics.capture(name, { n: 3 })
      return await analytics.flush()
    }, name)
    expect(accepted).toBe(true)
    const anonymousId = await page.evaluate(() => localStorage.getItem('platform_capture_anonymous_id'))
    expect(anonymousId).toBeTruthy()
    expect(await rows(name)).toEqual([
      { event: name, anonymous_id: anonymousId!, users_id: null, properties: { n: 1 } },
      { event: name, anonymous_id: anonymousId!, users_id: null, properties: { n: 2 } },
      { event: name, anonymous_id: anonymousId!, users_id: 'user-42', properties: { n: 3 } },
    ])
    // The anonymous id outlives the page: a reload keeps it.
    await page.reload()
    await page.waitForFunction(() => (window as any).ready === true)
    expect(await page.evaluate(() => (window as any).analytics.anonymousId)).toBe(anonymousId)
    await page.context().close()
  })

  test('leaving the page flushes the queue with sendBeacon', async () => {
    const page = await openPage()
    const name = `hide-${randomUUID()}`
    const queued = await page.evaluate((name) => {
      const analytics = (window as any).analytics
      for (let i = 0; i < 5; i++) analytics.capture(name, { i })
      return analytics.queued
    }, name)
    expect(queued).toBe(5)
    expect(await rows(name)).toEqual([]) // nothing sent yet
    await page.goto('about:blank')
    await eventually(async () => (await rows(name)).length === 5, 10_000, 'the beacon stored the 5 events')
    await page.context().close()
  })

  test('closing the page flushes the queue too', async () => {
    const page = await openPage()
    const name = `close-${randomUUID()}`
    await page.evaluate((name) => (window as any).analytics.capture(name), name)
    await page.close({ runBeforeUnload: true })
    await eventually(async () => (await rows(name)).length === 1, 10_000, 'the beacon stored the event')
  })

  test('a preflighted request (JSON content type) from the listed origin is accepted', async () => {
    const page = await openPage()
    const name = `json-${randomUUID()}`
    const status = await page.evaluate(async ({ url, name }) => {
      const response = await fetch(url, {
        method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ events: [{ event: name, identity: { anonymous_id: 'a' } }] }),
      })
      return response.status
    }, { url: `${publicWorker.url}/${owner.productId}/capture?key=${key}`, name })
    expect(status).toBe(200)
    expect((await rows(name)).length).toBe(1)
    await page.context().close()
  })

  test('a page on an origin the key does not list is refused, and nothing is stored', async () => {
    const page = await openPage(otherOrigin)
    const name = `refused-${randomUUID()}`
    const outcome = await page.evaluate(async ({ url, name }) => {
      const analytics = (window as any).analytics
      analytics.capture(name)
      const flushed = await analytics.flush()
      // The page cannot read the refusal (no CORS headers): fetch rejects, with or without a preflight.
      const plain = await fetch(url, { method: 'POST', body: '{}' }).then(() => 'read', () => 'rejected')
      const preflighted = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }).then(() => 'read', () => 'rejected')
      return { flushed, queued: analytics.queued, plain, preflighted }
    }, { url: `${publicWorker.url}/${owner.productId}/capture?key=${key}`, name })
    expect(outcome).toEqual({ flushed: false, queued: 1, plain: 'rejected', preflighted: 'rejected' })
    // The server refused it too (403), not only the browser's reading of the answer.
    await page.goto('about:blank') // the queued event goes out by beacon, and is refused again
    await Bun.sleep(500)
    expect(await rows(name)).toEqual([])
    await page.context().close()
  })
})
