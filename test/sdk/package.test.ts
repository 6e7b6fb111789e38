// The SDK as a user gets it: built (shared/sdk/build.ts), packed with npm pack, installed from the tarball into a
// scratch project in a temp dir (no registry: it has no dependencies), type-checked there with moduleResolution
// nodenext, and run there by Node and by Bun against a real public worker.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { startProcess, type Worker } from '../helpers'
import { realtimeProduct, type RealtimeProduct } from '../realtime/public-helpers'
import { SECRET_PREFIX, signedHeaders } from '../../shared/webhooks/signature'
import { type Installed, packAndInstall, ROOT, run, TSC } from './pack'

/** What a user's script does with the installed package: publish, read back, and one bad call. */
const APP = `
import { Platform } from '@platform/sdk'
const [baseUrl, productId, realtimeKey] = process.argv.slice(2)
const platform = new Platform({ baseUrl, productId, realtimeKey })
const channel = 'chat:' + crypto.randomUUID()
const published = await platform.realtime.messages.publish({ channel, data: { runtime: typeof Bun === 'undefined' ? 'node' : 'bun' } })
const history = await platform.realtime.channels.history(channel, { last_n: 10 })
const bad = await platform.realtime.messages.publish({ channel: 'no-namespace', data: 1 })
const webhook = JSON.parse(process.env.WEBHOOK)
const verified = await platform.webhooks.verify({ payload: webhook.payload, headers: webhook.headers, secret: webhook.secret })
const forged = await platform.webhooks.verify({ payload: webhook.payload + ' ', headers: webhook.headers, secret: webhook.secret })
console.log(JSON.stringify({ channel, published, history, bad, verified, forged: forged.error?.code }))
`

/** Typed use of the installed package; it must compile, and each @ts-expect-error line must be an error. */
const USAGE = `
import { Platform, type PlatformError, type Result, type TokenIssueResult } from '@platform/sdk'
const platform = new Platform({ baseUrl: 'https://public.example', productId: 'p', realtimeKey: 'rtk_x' })
export async function use(): Promise<string> {
  const issued: Result<TokenIssueResult> = await platform.realtime.tokens.issue({ subject: 'u', channels: [{ name: 'chat:a', ops: ['subscribe'] }] })
  const { data, error } = await platform.realtime.channels.history('chat:a', { last_n: 5 })
  if (error) {
    const why: PlatformError = error
    return why.code + (why.fields?.[0]?.path ?? '') + String(why.retryable)
  }
  const recovered: boolean = data.recovered
  // @ts-expect-error: last_n is a number
  await platform.realtime.channels.history('chat:a', { last_n: 'ten' })
  // @ts-expect-error: a publish needs data
  await platform.realtime.messages.publish({ channel: 'chat:a' })
  // @ts-expect-error: an email needs a sender
  await platform.mail.emails.send({ to: 'a@b.example', subject: 'Hi', text: 'Hi' })
  return String(recovered) + (issued.data?.token ?? '')
}
`

/** The README's code blocks (set-up, first calls, webhooks) as a module: they must type-check against the package. */
function readmeModule(readme: string): string {
  const blocks = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1]!)
  expect(blocks).toHaveLength(3)
  return [
    'declare const process: { env: Record<string, string | undefined> }',
    blocks[0],
    'export async function firstCalls() {', blocks[1], '}',
    'export async function receive(request: Request) {', blocks[2], '  return Response.json(event)', '}',
  ].join('\n')
}

/** A delivery signed as the platform signs them, for the scripts to verify with WebCrypto. */
const secret = SECRET_PREFIX + randomBytes(32).toString('base64')
const webhookPayload = JSON.stringify({ type: 'email.delivered', timestamp: new Date().toISOString(), data: { emailId: 'e1' } })
const WEBHOOK = JSON.stringify({ payload: webhookPayload, secret, headers: signedHeaders([secret], 'msg_1', Math.floor(Date.now() / 1000), webhookPayload) })

let installed: Installed
let worker: Worker
let product: RealtimeProduct

beforeAll(async () => {
  const started = Promise.all([startProcess('public'), realtimeProduct()])
  installed = await packAndInstall(join(ROOT, 'shared', 'sdk'))
  writeFileSync(join(installed.dir, 'app.mjs'), APP)
  writeFileSync(join(installed.dir, 'usage.ts'), USAGE)
  writeFileSync(join(installed.dir, 'readme.ts'), readmeModule(readFileSync(join(ROOT, 'shared', 'sdk', 'README.md'), 'utf8')))
  writeFileSync(join(installed.dir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: { strict: true, noEmit: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'ES2022', lib: ['ES2022', 'DOM'], types: [] },
    files: ['usage.ts', 'readme.ts'],
  }))
  ;[worker, product] = await started
}, 90_000)

afterAll(async () => {
  await worker?.stop()
  if (installed) rmSync(installed.dir, { recursive: true, force: true })
})

test('the tarball holds the built ESM, its declarations, the README and nothing else; the code uses no Node built-in', () => {
  const files = installed.files
  expect(files).toContain('dist/index.js')
  expect(files).toContain('dist/index.d.ts')
  expect(files.filter((file) => !file.startsWith('dist/'))).toEqual(['README.md', 'package.json'])
  expect(files.filter((file) => file.startsWith('dist/') && !/\.(js|d\.ts)$/.test(file))).toEqual([])
  const code = readFileSync(join(installed.dir, 'node_modules', '@platform', 'sdk', 'dist', 'index.js'), 'utf8')
  expect(code).not.toMatch(/\bfrom\s*["'](node:|[a-z])|\brequire\(|\bimport\(/)
})

test('a TypeScript project and the README\'s samples type-check against the installed package; wrong calls do not compile', async () => {
  await run([TSC, '-p', installed.dir], installed.dir)
})

for (const runtime of ['node', 'bun'] as const) {
  test(`${runtime} runs the installed package against a real public worker: publish, history, a typed 400; verifies a webhook`, async () => {
    const out = JSON.parse(await run([runtime, 'app.mjs', worker.url, product.productId, product.key], installed.dir, { WEBHOOK }))
    expect(out.published).toEqual({ data: { id: expect.any(String), channel: out.channel, offset: 1, epoch: expect.any(String) }, error: null })
    expect(out.history.data).toMatchObject({ recovered: true, entries: [{ id: out.published.data.id, data: { runtime } }] })
    expect(out.verified).toEqual({ data: JSON.parse(webhookPayload), error: null })
    expect(out.forged).toBe('webhook_signature_invalid')
    expect(out.bad).toEqual({
      data: null,
      error: expect.objectContaining({ code: 'validation_failed', statusCode: 400, retryable: false, fields: [expect.objectContaining({ path: '/body/channel' })] }),
    })
  })
}
