// GET {public_url}/openapi.json: it describes exactly the routes the public app serves, Redocly lints it clean, it is
// cacheable by its hash, and each area's example is accepted by the document's schema and by the route itself.
import { beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Compile } from 'typebox/compile'
import { config } from '../../shared/config'
import { buildPublicApp } from '../../services/public/app'
import { UNDESCRIBED } from '../../services/public/catalog'
import { call, newProduct, ok } from '../helpers'
import { realtimeProduct, uniqueIp } from '../realtime/public-helpers'

const app = buildPublicApp()
/** The served document, as JSON read back. */
let doc: any
let etag: string

beforeAll(async () => {
  const response = await app.handle(new Request('http://public.test/openapi.json'))
  expect(response.status).toBe(200)
  etag = response.headers.get('etag')!
  doc = await response.json()
})

/** `METHOD /path` of each described operation, `{name}` for parameters. */
const described = () =>
  Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`))

describe('the public OpenAPI document', () => {
  test('describes every route the public app serves and no other (probes, preflights and the document itself aside)', () => {
    const served = app.routes.map((r) => `${r.method} ${r.path.replace(/:(\w+)/g, '{$1}')}`)
    const undescribed = new Set<string>(UNDESCRIBED)
    expect(served.filter((route) => !undescribed.has(route)).sort()).toEqual(described().sort())
    // The list of routes left out names only routes that exist: a stale entry would hide a new route at its place.
    for (const route of UNDESCRIBED) expect(served).toContain(route)
  })

  test('is OpenAPI 3.1 that Redocly lints with no error and no warning', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'openapi-'))
    const file = join(dir, 'public.json')
    writeFileSync(file, JSON.stringify(doc))
    const lint = Bun.spawn(['node_modules/.bin/redocly', 'lint', '--format=stylish', '--config', 'redocly.yaml', file], {
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' }, stdout: 'pipe', stderr: 'pipe',
    })
    const output = (await new Response(lint.stdout).text()) + (await new Response(lint.stderr).text())
    expect(await lint.exited, output).toBe(0)
    expect(output).not.toMatch(/\b(error|warning)\b\s/)
    expect(doc.openapi).toBe('3.1.0')
  })

  test('serves the public URL, the key schemes as the routes read them, and the error body on every documented error', () => {
    expect(doc.servers).toEqual([{ url: config.publicUrl }])
    expect(doc.components.securitySchemes.productKey).toMatchObject({ type: 'apiKey', in: 'header', name: 'X-Api-Key' })
    expect(doc.components.securitySchemes.captureKey).toMatchObject({ type: 'apiKey', in: 'query', name: 'key' })
    expect(doc.paths['/{productId}/capture'].post.security).toEqual([{ captureKey: [] }])
    expect(doc.paths['/{productId}/mail/emails'].post.security).toEqual([{ sendingKey: [] }])
    const publish = doc.paths['/{productId}/realtime/messages'].post
    expect(publish.parameters.map((p: { name: string }) => p.name)).toContain('Idempotency-Key')
    expect(publish.responses['429'].content['application/json'].schema.properties.error.enum).toContain('quota_exceeded')
    for (const op of Object.values(doc.paths).flatMap((ops) => Object.values(ops as object))) {
      const statuses = Object.keys(op.responses)
      expect(statuses).toContain('200')
      for (const status of ['400', '401', '404', '429']) {
        expect(op.responses[status].content['application/json'].schema.allOf).toEqual([{ $ref: '#/components/schemas/Error' }])
      }
    }
  })

  test('carries a hash of its content as info.version and ETag; a revalidation answers 304', async () => {
    expect(doc.info.version).toMatch(/^[0-9a-f]{16}$/)
    expect(etag).toBe(`"${doc.info.version}"`)
    const again = await app.handle(new Request('http://public.test/openapi.json', { headers: { 'if-none-match': etag } }))
    expect(again.status).toBe(304)
  })
})

describe("each area's example", () => {
  /** The example of an operation, checked against the document's own request schema (not the route's object). */
  function documentedExample(path: string, method: string): unknown {
    const media = doc.paths[path][method].requestBody.content['application/json']
    expect(Compile(media.schema).Check(media.example)).toBe(true)
    return media.example
  }

  let realtime: Awaited<ReturnType<typeof realtimeProduct>>
  beforeAll(async () => {
    realtime = await realtimeProduct()
  })

  const send = (path: string, method: string, headers: Record<string, string>, body: unknown) =>
    app.handle(new Request(`http://public.test${path}`, {
      method, body: JSON.stringify(body), headers: { 'content-type': 'application/json', 'x-forwarded-for': uniqueIp(), ...headers },
    }))

  test('Realtime: the publish example is accepted by the document and published by the route', async () => {
    const example = documentedExample('/{productId}/realtime/messages', 'post')
    const response = await send(`/${realtime.productId}/realtime/messages`, 'POST', { 'x-api-key': realtime.key }, example)
    expect(response.status).toBe(200)
    expect(await response.json()).toMatchObject({ channel: 'chat:room-1', offset: 1 })
  })

  test('Mail: the template example is accepted by the document and created by the route', async () => {
    const owner = await newProduct('OpenAPI mail')
    const { key } = ok(await call('POST', '/mail/api-keys', { token: owner.token, productId: owner.productId, body: { name: 'k', scope: 'full_access' } }), 'mail key').body
    const example = documentedExample('/{productId}/mail/templates', 'post')
    const response = await send(`/${owner.productId}/mail/templates`, 'POST', { 'x-api-key': key }, example)
    expect(response.status).toBe(200)
    expect(await response.json()).toMatchObject({ object: 'template', name: 'welcome', variables: ['name'] })
  })

  test('Capture: the batch example is accepted by the document and stored by the route', async () => {
    const owner = await newProduct('OpenAPI capture')
    const { key } = ok(await call('POST', '/tracking/capture-keys', { token: owner.token, productId: owner.productId, body: { name: 'site' } }), 'capture key').body
    const example = documentedExample('/{productId}/capture', 'post')
    const response = await send(`/${owner.productId}/capture?key=${key}`, 'POST', {}, example)
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ accepted: 1 })
  })
})
