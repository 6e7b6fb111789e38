// Proof that GET {public_url}/openapi.json is true: types generated from the served document with openapi-typescript,
// calls made through openapi-fetch with those types against a real `public` worker, tsc checking the calls against the
// types (a wrong path, body, query or field must not compile), and each answer what the route really says.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import openapiTS, { astToString } from 'openapi-typescript'
import { startProcess, type Worker } from '../helpers'
import { manage, realtimeProduct, type RealtimeProduct } from '../realtime/public-helpers'

/**
 * The client code a user would write against the generated `paths`, type-checked by tsc in beforeAll and then imported
 * to drive the worker. Request shapes come from the generated types only (no hand-written interface), so a document
 * that drifts from the route fails here: at compile time for a shape, at run time for an answer.
 */
const USAGE = `
import createClient, { type Client } from 'openapi-fetch'
import type { paths } from './schema'

type PublicClient = Client<paths>
type HistoryQuery = NonNullable<paths['/{productId}/realtime/channels/{channel}/history']['get']['parameters']['query']>
type Email = paths['/{productId}/mail/emails']['post']['requestBody']['content']['application/json']

export const connect = (baseUrl: string, key: string): PublicClient => createClient<paths>({ baseUrl, headers: { 'X-Api-Key': key } })

export const issueToken = (client: PublicClient, productId: string, subject: string, channel: string) =>
  client.POST('/{productId}/realtime/tokens/issue', {
    params: { path: { productId } },
    body: { subject, channels: [{ name: channel, ops: ['subscribe', 'history'] }], ttlSeconds: 600 },
  })

export const publish = (client: PublicClient, productId: string, channel: string, data: unknown, idempotencyKey: string) =>
  client.POST('/{productId}/realtime/messages', {
    params: { path: { productId }, header: { 'Idempotency-Key': idempotencyKey } },
    body: { channel, data },
  })

export const history = (client: PublicClient, productId: string, channel: string, query: HistoryQuery) =>
  client.GET('/{productId}/realtime/channels/{channel}/history', { params: { path: { productId, channel }, query } })

export const sendEmail = (client: PublicClient, productId: string, email: Email) =>
  client.POST('/{productId}/mail/emails', { params: { path: { productId } }, body: email })

export const readEmail = (client: PublicClient, productId: string, id: string) =>
  client.GET('/{productId}/mail/emails/{id}', { params: { path: { productId, id } } })

/** Never called: it compiles only while the generated types carry the answers' fields and refuse wrong calls. */
export async function typedReads(client: PublicClient, productId: string): Promise<unknown[]> {
  const token = await issueToken(client, productId, 'user-1', 'chat:a')
  const published = await publish(client, productId, 'chat:a', 1, 'k')
  const read = await history(client, productId, 'chat:a', { offset: 0, epoch: 'e' })
  const sent = await sendEmail(client, productId, { from: 'a@b.c', to: ['d@e.f'], subject: 'Hi', text: 'Hi' })
  const email = await readEmail(client, productId, 'id')
  if (!token.data || !published.data || !read.data || !sent.data || !email.data) {
    const failed = token.error ?? published.error ?? read.error ?? sent.error ?? email.error
    const why: [string, string, string | undefined] = [failed?.error ?? '', failed?.message ?? '', failed?.fields?.[0]?.path]
    return why
  }
  const recovered: boolean = read.data.recovered
  const offset: number | undefined = read.data.entries[0]?.offset
  const fields: (string | number | undefined)[] = [token.data.token, token.data.gatewayUrl, token.data.expiresAt, published.data.id,
    published.data.offset, published.data.epoch, sent.data.id, email.data.subject, email.data.last_event, offset]
  // @ts-expect-error: a token answer has no such field
  fields.push(token.data.secret)
  // @ts-expect-error: a publish needs data
  await client.POST('/{productId}/realtime/messages', { params: { path: { productId } }, body: { channel: 'chat:a' } })
  // @ts-expect-error: last_n is a number
  await history(client, productId, 'chat:a', { last_n: 'ten' })
  // @ts-expect-error: no such route
  await client.GET('/{productId}/realtime/channels', { params: { path: { productId } } })
  // @ts-expect-error: an email needs a sender
  await sendEmail(client, productId, { to: 'd@e.f', subject: 'Hi', text: 'Hi' })
  return [recovered, ...fields]
}
`

/** The generated client's functions, as the test calls them (the module itself is type-checked by tsc). */
interface Usage {
  connect(baseUrl: string, key: string): unknown
  issueToken(client: unknown, productId: string, subject: string, channel: string): Promise<Answer>
  publish(client: unknown, productId: string, channel: string, data: unknown, idempotencyKey: string): Promise<Answer>
  history(client: unknown, productId: string, channel: string, query: Record<string, unknown>): Promise<Answer>
  sendEmail(client: unknown, productId: string, email: Record<string, unknown>): Promise<Answer>
  readEmail(client: unknown, productId: string, id: string): Promise<Answer>
}
/** What openapi-fetch answers: `data` on a 2xx, `error` (the parsed error body) otherwise, and the raw response. */
interface Answer {
  data?: any
  error?: any
  response: Response
}

/** Inside the worktree, so the generated module resolves openapi-fetch and bun-types from its node_modules. */
const dir = join(import.meta.dir, '..', '..', '.data', `generated-client-${randomUUID()}`)
let worker: Worker
let product: RealtimeProduct
let usage: Usage
let realtime: unknown
let mail: { sending: unknown; full: unknown; from: string }

beforeAll(async () => {
  worker = await startProcess('public')
  const response = await fetch(`${worker.url}/openapi.json`)
  expect(response.status).toBe(200)
  const schema = astToString(await openapiTS(await response.text()))
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, 'schema.ts'), schema)
  writeFileSync(join(dir, 'usage.ts'), USAGE)
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ extends: '../../tsconfig.json', include: ['*.ts'] }))
  const tsc = Bun.spawn(['node_modules/.bin/tsc', '--noEmit', '-p', dir], { cwd: join(import.meta.dir, '..', '..'), stdout: 'pipe', stderr: 'pipe' })
  const output = (await new Response(tsc.stdout).text()) + (await new Response(tsc.stderr).text())
  expect(await tsc.exited, `tsc on the generated client:\n${output}`).toBe(0)
  usage = await import(join(dir, 'usage.ts'))

  product = await realtimeProduct()
  realtime = usage.connect(worker.url, product.key)
  const domain = await manage(product, 'POST', '/mail/domains', { name: `g${randomUUID().slice(0, 8)}.example.com` })
  expect(domain.status).toBe('verified') // MAIL_DEV_VERIFY, set by the test preload
  const sending = await manage(product, 'POST', '/mail/api-keys', { name: 'sending', scope: 'sending_access' })
  const full = await manage(product, 'POST', '/mail/api-keys', { name: 'full', scope: 'full_access' })
  mail = { sending: usage.connect(worker.url, sending.key), full: usage.connect(worker.url, full.key), from: `App <app@${domain.name}>` }
}, 60_000)

afterAll(async () => {
  await worker?.stop()
  rmSync(dir, { recursive: true, force: true })
})

describe('a client generated from the served document', () => {
  test('issues a token: the answer carries the token, the gateway, the expiry and the channels as narrowed', async () => {
    const { data, error, response } = await usage.issueToken(realtime, product.productId, 'user-42', 'chat:room-1')
    expect({ status: response.status, error }).toEqual({ status: 200, error: undefined })
    expect(data).toEqual({
      token: expect.any(String), gatewayUrl: expect.any(String), expiresAt: expect.any(String), subject: 'ext:user-42',
      channels: [{ name: 'chat:room-1', ops: ['subscribe', 'history'] }], dropped: [],
    })
    const ttl = Date.parse(data.expiresAt) - Date.now()
    expect(ttl).toBeGreaterThan(590_000)
    expect(ttl).toBeLessThanOrEqual(600_000)
  })

  test('publishes with an Idempotency-Key; the repeat is replayed, and history holds the message once, recovered', async () => {
    const channel = `chat:${randomUUID()}`
    const key = randomUUID()
    const first = await usage.publish(realtime, product.productId, channel, { text: 'hello' }, key)
    expect({ status: first.response.status, error: first.error }).toEqual({ status: 200, error: undefined })
    expect(first.data).toEqual({ id: expect.any(String), channel, offset: 1, epoch: expect.any(String) })
    expect(first.response.headers.get('idempotent-replayed')).toBeNull()

    const again = await usage.publish(realtime, product.productId, channel, { text: 'hello' }, key)
    expect(again.response.status).toBe(200)
    expect(again.data).toEqual(first.data)
    expect(again.response.headers.get('idempotent-replayed')).toBe('true')

    const window = await usage.history(realtime, product.productId, channel, { last_n: 10 })
    expect(window.response.status).toBe(200)
    const entry = { id: first.data.id, offset: 1, epoch: first.data.epoch, publishedAt: expect.any(String), data: { text: 'hello' } }
    expect(window.data).toEqual({ channel, offset: 1, epoch: first.data.epoch, recovered: true, entries: [entry] })

    const resumed = await usage.history(realtime, product.productId, channel, { offset: 0, epoch: first.data.epoch })
    expect(resumed.data).toEqual({ channel, offset: 1, epoch: first.data.epoch, recovered: true, entries: [entry] })
    // A cursor from another epoch cannot be resumed: recovered false, so the caller resyncs from a window.
    const stale = await usage.history(realtime, product.productId, channel, { offset: 0, epoch: 'another-epoch' })
    expect(stale.response.status).toBe(200)
    expect(stale.data).toMatchObject({ channel, recovered: false })
  })

  test('sends an email from the verified domain; the full key reads back what was sent', async () => {
    const sent = await usage.sendEmail(mail.sending, product.productId, {
      from: mail.from, to: 'someone@example.org', subject: 'Welcome', html: '<p>Hi</p>',
    })
    expect({ status: sent.response.status, error: sent.error }).toEqual({ status: 200, error: undefined })
    expect(sent.data).toEqual({ id: expect.any(String) })
    const read = await usage.readEmail(mail.full, product.productId, sent.data.id)
    expect(read.response.status).toBe(200)
    expect(read.data).toMatchObject({
      object: 'email', id: sent.data.id, from: mail.from, to: ['someone@example.org'], subject: 'Welcome', html: '<p>Hi</p>',
    })
  })

  test('bad input answers the typed error body: a 400 naming the field', async () => {
    const bad = await usage.publish(realtime, product.productId, 'no-namespace', 1, randomUUID())
    expect({ status: bad.response.status, data: bad.data }).toEqual({ status: 400, data: undefined })
    expect(bad.error).toMatchObject({ error: 'validation_failed', message: expect.any(String), fields: [{ path: '/body/channel', message: expect.any(String) }] })

    const unsent = await usage.sendEmail(mail.sending, product.productId, { from: mail.from, to: 'someone@example.org', subject: 'Two\nlines', text: 'Hi' })
    expect(unsent.response.status).toBe(400)
    expect(unsent.error).toMatchObject({ error: 'validation_failed', fields: [{ path: '/body/subject' }] })
  })
})
