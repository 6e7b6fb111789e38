// The browser Realtime client as a user gets it: shared/realtime-client built, packed, installed from the tarball into a
// scratch project, type-checked and bundled there for the browser, and run in a real Chromium page that takes its
// token from a backend (the SDK, issuing through a real public worker) and receives what is published on a real gateway.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { chromium, type Browser } from 'playwright-core'
import { Platform } from '../../shared/sdk/src/index'
import { ARGS, CHROMIUM } from '../console/browser'
import { startGateway, type GatewayProcess } from '../gateway/ws-helpers'
import { startProcess, type Worker } from '../helpers'
import { realtimeProduct, type RealtimeProduct } from '../realtime/public-helpers'
import { type Installed, packAndInstall, ROOT, run, TSC } from './pack'

/** The page's code, as a user writes it against the installed package. */
const PAGE = `
import { RealtimeClient, type Publication } from '@platform/realtime-client'

const page = window as unknown as { received: unknown[]; subscribed: boolean; failed?: string }
page.received = []
page.subscribed = false
const channel = decodeURIComponent(location.hash.slice(1))
const tokenFromBackend = async (): Promise<{ token: string; gatewayUrl: string }> => (await fetch('/token?channel=' + encodeURIComponent(channel))).json()

const { gatewayUrl } = await tokenFromBackend()
const client = new RealtimeClient({ url: gatewayUrl, getToken: async () => (await tokenFromBackend()).token })
client.subscribe<{ text: string }>(channel, {
  publication: (message: Publication<{ text: string }>) => void page.received.push(message.data),
  subscribed: () => void (page.subscribed = true),
  unsubscribed: (reason) => void (page.failed = reason),
})
client.connect()
// @ts-expect-error: a channel name is a string
client.subscribe(42)
`

/** Only the backoff function: a bundler must leave the client class out. */
const BACKOFF_ONLY = `
import { backoffDelay } from '@platform/realtime-client'
console.log(backoffDelay(1, 500, 20_000))
`

let installed: Installed
let gateway: GatewayProcess
let worker: Worker
let product: RealtimeProduct
let backend: ReturnType<typeof Bun.serve>
let browser: Browser
let bundle: string

beforeAll(async () => {
  const started = (async () => {
    gateway = await startGateway()
    ;[worker, product] = await Promise.all([startProcess('public', { GATEWAY_URL: gateway.wsUrl }), realtimeProduct()])
  })()
  const launched = chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true })
  installed = await packAndInstall(join(ROOT, 'shared', 'realtime-client'))
  writeFileSync(join(installed.dir, 'page.ts'), PAGE)
  writeFileSync(join(installed.dir, 'backoff-only.ts'), BACKOFF_ONLY)
  const [readmeSample] = [...readFileSync(join(ROOT, 'shared', 'realtime-client', 'README.md'), 'utf8').matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!)
  writeFileSync(join(installed.dir, 'readme.ts'), `declare function reloadHistory(): void\n${readmeSample}\nexport {}\n`)
  writeFileSync(join(installed.dir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: { strict: true, noEmit: true, module: 'esnext', moduleResolution: 'bundler', target: 'ES2022', lib: ['ES2022', 'DOM'], types: [] },
    files: ['page.ts', 'backoff-only.ts', 'readme.ts'],
  }))
  const built = await Bun.build({ entrypoints: [join(installed.dir, 'page.ts')], target: 'browser', format: 'esm' })
  expect(built.success).toBe(true)
  bundle = await built.outputs[0]!.text()
  await started
  browser = await launched

  // The product's backend: serves the page and issues tokens with the server SDK and its rtk_ key.
  const platform = new Platform({ baseUrl: worker.url, productId: product.productId, realtimeKey: product.key })
  backend = Bun.serve({
    port: 0,
    async fetch(request) {
      const url = new URL(request.url)
      if (url.pathname === '/') return new Response('<!doctype html><script type="module" src="/page.js"></script>', { headers: { 'content-type': 'text/html' } })
      if (url.pathname === '/page.js') return new Response(bundle, { headers: { 'content-type': 'text/javascript' } })
      const { data, error } = await platform.realtime.tokens.issue({ subject: 'page-user', channels: [{ name: url.searchParams.get('channel')!, ops: ['subscribe'] }] })
      return error ? Response.json(error, { status: 502 }) : Response.json(data)
    },
  })
}, 90_000)

afterAll(async () => {
  await browser?.close()
  backend?.stop(true)
  await Promise.all([worker?.stop(), gateway?.stop()])
  if (installed) rmSync(installed.dir, { recursive: true, force: true })
})

test('the tarball holds index.js, index.d.ts, the README and nothing else; the page code and the README\'s sample type-check against it', async () => {
  expect(installed.files).toEqual(['README.md', 'dist/index.d.ts', 'dist/index.js', 'package.json'])
  await run([TSC, '-p', installed.dir], installed.dir)
})

test('a page bundled from the installed package connects to a real gateway and receives a publication', async () => {
  const channel = `chat:${randomUUID()}`
  const page = await (await browser.newContext()).newPage()
  const problems: string[] = []
  page.on('pageerror', (error) => problems.push(error.message))
  await page.goto(`http://127.0.0.1:${backend.port}/#${encodeURIComponent(channel)}`)
  await page.waitForFunction(() => (window as any).subscribed === true || (window as any).failed !== undefined)
  expect(await page.evaluate(() => (window as any).failed)).toBeUndefined()

  const platform = new Platform({ baseUrl: worker.url, productId: product.productId, realtimeKey: product.key })
  expect((await platform.realtime.messages.publish({ channel, data: { text: 'to the page' } })).error).toBeNull()
  await page.waitForFunction(() => (window as any).received.length > 0)
  expect(await page.evaluate(() => (window as any).received)).toEqual([{ text: 'to the page' }])
  expect(problems).toEqual([])
})

test('tree-shaking: a bundle that imports only backoffDelay leaves the client out', async () => {
  const shaken = await Bun.build({ entrypoints: [join(installed.dir, 'backoff-only.ts')], target: 'browser', format: 'esm' })
  const code = await shaken.outputs[0]!.text()
  expect(code).toContain('backoffDelay')
  // 'client disconnect' is the client's close reason, inside RealtimeClient: in the page's bundle, not in this one.
  expect(bundle).toContain('client disconnect')
  expect(code).not.toContain('client disconnect')
  expect(code.length).toBeLessThan(bundle.length / 4)
})
