// The server SDK (shared/sdk) against a real public worker and archiver: every public route through its client, the
// answers typed `{ data, error }`, bad input as a typed error naming the field, another product's email as not_found,
// a publish whose first answer is lost publishing once, and the archive's pages through the async iterator.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { elysiaPath, publicRoutes } from '../../services/public/catalog'
import { Platform, type PlatformOptions } from '../../shared/sdk/src/index'
import { startProcess, type Worker } from '../helpers'
import { archivedCount, startArchiver, until, type ArchiverProcess } from '../realtime/archive-helpers'
import { manage, realtimeProduct, type RealtimeProduct } from '../realtime/public-helpers'

let worker: Worker
let archiver: ArchiverProcess
let product: RealtimeProduct
let other: RealtimeProduct
let from: string
let keys: { realtimeKey: string; mailKey: string; fullMailKey: string; captureKey: string }
/** Every request the SDK made in this file, as `METHOD /path`, to check that each public route was reached. */
const reached: string[] = []
const recording: typeof fetch = Object.assign((input: RequestInfo | URL, init?: RequestInit) => {
  reached.push(`${init?.method ?? 'GET'} ${new URL(String(input)).pathname}`)
  return fetch(input, init)
}, { preconnect: fetch.preconnect })

/** A client of `product` with the given keys, its requests recorded. */
const client = (options: Partial<PlatformOptions> = {}) => new Platform({ baseUrl: worker.url, productId: product.productId, fetch: recording, ...options })

async function mailKeys(owner: RealtimeProduct) {
  const domain = await manage(owner, 'POST', '/mail/domains', { name: `s${randomUUID().slice(0, 8)}.example.com` })
  expect(domain.status).toBe('verified') // MAIL_DEV_VERIFY, set by the test preload
  const sending = await manage(owner, 'POST', '/mail/api-keys', { name: 'sending', scope: 'sending_access' })
  const full = await manage(owner, 'POST', '/mail/api-keys', { name: 'full', scope: 'full_access' })
  return { from: `App <app@${domain.name}>`, mailKey: sending.key as string, fullMailKey: full.key as string }
}

beforeAll(async () => {
  ;[worker, product, other] = await Promise.all([
    startProcess('public'),
    realtimeProduct([
      { name: 'chat', presence: true, history: { ttlSeconds: 300, size: 100 } },
      { name: 'arch', history: { ttlSeconds: 300, size: 100 }, archive: { retentionDays: 30 } },
    ]),
    realtimeProduct(),
  ])
  archiver = startArchiver()
  const mail = await mailKeys(product)
  const capture = await manage(product, 'POST', '/tracking/capture-keys', { name: 'server' })
  from = mail.from
  keys = { realtimeKey: product.key, mailKey: mail.mailKey, fullMailKey: mail.fullMailKey, captureKey: capture.key }
}, 60_000)

afterAll(async () => {
  archiver?.proc.kill('SIGTERM')
  await Promise.all([archiver?.proc.exited, worker?.stop()])
})

describe('Realtime through the SDK', () => {
  test('issues a token: the gateway URL, the expiry and the channels as narrowed', async () => {
    const { data, error } = await client({ realtimeKey: keys.realtimeKey }).realtime.tokens.issue({
      subject: 'user-42', channels: [{ name: 'chat:room-1', ops: ['subscribe', 'history'] }], ttlSeconds: 600,
    })
    expect(error).toBeNull()
    expect(data).toEqual({
      token: expect.any(String), gatewayUrl: expect.any(String), expiresAt: expect.any(String), subject: 'ext:user-42',
      channels: [{ name: 'chat:room-1', ops: ['subscribe', 'history'] }], dropped: [],
    })
  })

  test('publishes and broadcasts; the channel, its history (recovered) and its empty presence read back', async () => {
    const platform = client({ realtimeKey: keys.realtimeKey })
    const [a, b] = [`chat:${randomUUID()}`, `chat:${randomUUID()}`]
    const published = await platform.realtime.messages.publish({ channel: a, data: { text: 'one' } })
    expect(published).toEqual({ data: { id: expect.any(String), channel: a, offset: 1, epoch: expect.any(String) }, error: null })
    const broadcast = await platform.realtime.messages.broadcast({ channels: [a, b], data: { text: 'two' } })
    expect(broadcast.error).toBeNull()
    expect(broadcast.data!.results.map((r) => [r.channel, r.status, r.offset])).toEqual([[a, 200, 2], [b, 200, 1]])

    const history = await platform.realtime.channels.history(a, { last_n: 10 })
    expect(history.error).toBeNull()
    expect(history.data!.recovered).toBe(true)
    expect(history.data!.entries.map((entry) => entry.data)).toEqual([{ text: 'one' }, { text: 'two' }])
    const after = await platform.realtime.channels.history(a, { offset: 1, epoch: published.data!.epoch! })
    expect(after.data!.entries.map((entry) => entry.data)).toEqual([{ text: 'two' }])
    const stale = await platform.realtime.channels.history(a, { offset: 1, epoch: 'another-epoch' })
    expect(stale.data!.recovered).toBe(false)

    const status = await platform.realtime.channels.get(a)
    expect(status).toEqual({ data: { channel: a, namespace: 'chat', presence: { members: 0, connections: 0 }, history: { offset: 2, epoch: published.data!.epoch! } }, error: null })
    expect(await platform.realtime.channels.presence(a)).toEqual({ data: { channel: a, members: [] }, error: null })
  })

  test('a publish whose first answer is lost is retried with the same Idempotency-Key and publishes once', async () => {
    const channel = `chat:${randomUUID()}`
    const sent: (string | null)[] = []
    // The first attempt reaches the worker and publishes; its answer is lost on the way back.
    const lossy: typeof fetch = Object.assign(async (input: RequestInfo | URL, init?: RequestInit) => {
      sent.push(new Headers(init?.headers).get('idempotency-key'))
      const response = await recording(input, init)
      if (sent.length === 1) throw new TypeError('connection reset')
      return response
    }, { preconnect: fetch.preconnect })
    const { data, error } = await client({ realtimeKey: keys.realtimeKey, fetch: lossy }).realtime.messages.publish({ channel, data: 'once' })
    expect(error).toBeNull()
    expect(data).toMatchObject({ channel, offset: 1 })
    expect(sent).toHaveLength(2)
    expect(sent[0]).toBe(sent[1]!)
    const history = await client({ realtimeKey: keys.realtimeKey }).realtime.channels.history(channel, { last_n: 10 })
    expect(history.data!.entries.map((entry) => [entry.id, entry.data])).toEqual([[data!.id, 'once']])
  })

  test('bad input is a typed error naming the field, never retried; a missing key is said before any request', async () => {
    const platform = client({ realtimeKey: keys.realtimeKey })
    const before = reached.length
    const { data, error } = await platform.realtime.messages.publish({ channel: 'no-namespace', data: 1 })
    expect(data).toBeNull()
    expect(error).toMatchObject({ code: 'validation_failed', statusCode: 400, retryable: false, fields: [{ path: '/body/channel', message: expect.any(String) }] })
    expect(error!.requestId).toEqual(expect.any(String))
    expect(reached.length - before).toBe(1)

    const history = await platform.realtime.channels.history(`chat:${randomUUID()}`, { last_n: 0 })
    expect(history.error).toMatchObject({ code: 'validation_failed', statusCode: 400, fields: [{ path: '/query/last_n' }] })

    const unregistered = await platform.realtime.channels.history(`nope:${randomUUID()}`, { last_n: 1 })
    expect(unregistered.error).toMatchObject({ code: 'namespace_not_registered', statusCode: 404, retryable: false })

    const keyless = await client().realtime.messages.publish({ channel: 'chat:a', data: 1 })
    expect(keyless.error).toMatchObject({ code: 'missing_api_key', statusCode: null, retryable: false, message: expect.stringContaining('realtimeKey') })
    const wrongKey = await client({ realtimeKey: 'rtk_nothing' }).realtime.channels.get('chat:a')
    expect(wrongKey.error).toMatchObject({ code: 'invalid_api_key', statusCode: 401, retryable: false })
  })

  test("the archive's pages, oldest first, through the async iterator", async () => {
    const platform = client({ realtimeKey: keys.realtimeKey })
    const channel = `arch:${randomUUID()}`
    for (let i = 1; i <= 5; i++) expect((await platform.realtime.messages.publish({ channel, data: i })).error).toBeNull()
    await until('5 archived', async () => (await archivedCount(product.productId, channel)) === 5)
    const pages: unknown[][] = []
    for await (const { data, error } of platform.realtime.channels.archivePages(channel, { order: 'oldest', limit: 2 })) {
      expect(error).toBeNull()
      pages.push(data!.entries.map((entry) => entry.data))
    }
    expect(pages).toEqual([[1, 2], [3, 4], [5]])

    // An error ends the iteration, as its last item.
    const items = []
    for await (const item of platform.realtime.channels.archivePages(channel, { limit: 0 })) items.push(item)
    expect(items).toEqual([{ data: null, error: expect.objectContaining({ code: 'validation_failed', fields: [expect.objectContaining({ path: '/query/limit' })] }) }])
  })
})

describe('Mail through the SDK', () => {
  test('sends an email; the full key lists it and reads it back; another product reads it as not_found', async () => {
    const sent = await client({ mailKey: keys.mailKey }).mail.emails.send({ from, to: 'someone@example.org', subject: 'Welcome', html: '<p>Hi</p>' })
    expect(sent).toEqual({ data: { id: expect.any(String) }, error: null })
    const full = client({ mailKey: keys.fullMailKey }).mail
    const read = await full.emails.get(sent.data!.id)
    expect(read.error).toBeNull()
    expect(read.data).toMatchObject({ object: 'email', id: sent.data!.id, from, to: ['someone@example.org'], subject: 'Welcome' })
    const list = await full.emails.list({ limit: '1' })
    expect(list.error).toBeNull()
    expect(list.data).toMatchObject({ object: 'list', data: [{ id: sent.data!.id }] })

    const theirs = await mailKeys(other)
    const elsewhere = await new Platform({ baseUrl: worker.url, productId: other.productId, mailKey: theirs.fullMailKey }).mail.emails.get(sent.data!.id)
    expect(elsewhere.error).toMatchObject({ code: 'not_found', statusCode: 404 })

    const unsent = await client({ mailKey: keys.mailKey }).mail.emails.send({ from, to: 'someone@example.org', subject: 'Two\nlines', text: 'Hi' })
    expect(unsent.error).toMatchObject({ code: 'validation_failed', statusCode: 400, fields: [{ path: '/body/subject' }] })
  })

  test('domains: create, list, get, verify, remove; a sending key is refused', async () => {
    const mail = client({ mailKey: keys.fullMailKey }).mail
    const name = `d${randomUUID().slice(0, 8)}.example.com`
    const created = await mail.domains.create({ name })
    expect(created.error).toBeNull()
    const id = created.data!.id
    expect((await mail.domains.list()).data!.data.map((domain) => domain.name)).toContain(name)
    expect((await mail.domains.get(id)).data).toMatchObject({ id, name })
    expect((await mail.domains.verify(id)).data).toMatchObject({ id, name })
    expect(await mail.domains.remove(id)).toEqual({ data: { object: 'domain', id, deleted: true }, error: null })
    expect((await mail.domains.get(id)).error).toMatchObject({ code: 'not_found', statusCode: 404 })
    const refused = await client({ mailKey: keys.mailKey }).mail.domains.list()
    expect(refused.error).toMatchObject({ code: 'restricted_api_key', retryable: false })
  })

  test('templates: create, list, get, update, send with, remove', async () => {
    const mail = client({ mailKey: keys.fullMailKey }).mail
    const created = await mail.templates.create({ name: `t-${randomUUID().slice(0, 8)}`, subject: 'Hi {{name}}', html: '<p>Hello {{name}}</p>' })
    expect(created.error).toBeNull()
    const id = created.data!.id
    expect((await mail.templates.list({ limit: 100 })).data!.data.map((template) => template.id)).toContain(id)
    expect((await mail.templates.get(id)).data).toMatchObject({ id, subject: 'Hi {{name}}' })
    expect((await mail.templates.update(id, { subject: 'Welcome {{name}}' })).data).toMatchObject({ id, subject: 'Welcome {{name}}' })
    const sent = await client({ mailKey: keys.mailKey }).mail.emails.send({ from, to: 'ada@example.org', template: { id, variables: { name: 'Ada' } } })
    expect(sent.error).toBeNull()
    expect((await mail.emails.get(sent.data!.id)).data).toMatchObject({ subject: 'Welcome Ada', html: '<p>Hello Ada</p>' })
    expect(await mail.templates.remove(id)).toEqual({ data: { object: 'template', id, deleted: true }, error: null })
  })
})

describe('Analytics capture through the SDK', () => {
  test('captures a batch with the capture key; a bad event names its field', async () => {
    const analytics = client({ captureKey: keys.captureKey }).analytics
    const accepted = await analytics.capture({ events: [{ event: 'signed_up', identity: { anonymous_id: 'a-1' }, properties: { plan: 'pro' } }] })
    expect(accepted).toEqual({ data: { accepted: 1 }, error: null })
    const refused = await analytics.capture({ events: [{ event: '', identity: { anonymous_id: 'a-1' } }] })
    expect(refused.error).toMatchObject({ code: 'validation_failed', statusCode: 400, fields: [expect.objectContaining({ path: expect.stringMatching(/^\/body\/events\/0/) })] })
  })
})

test('every public route was reached through the SDK in this file', () => {
  const patterns = publicRoutes.map((route) => ({
    id: route.id,
    match: new RegExp(`^${route.method} ${elysiaPath(route).replace(/:\w+/g, '[^/]+')}$`),
  }))
  const unreached = patterns.filter(({ match }) => !reached.some((request) => match.test(request))).map(({ id }) => id)
  expect(unreached).toEqual([])
})
