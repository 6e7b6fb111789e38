// Webhook endpoint management on the platform API and MCP, per area (/realtime/webhooks, /mail/webhooks): the secret
// shown once, rotation with an overlap, validation naming the field, and endpoints invisible across products and areas.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { randomBytes } from 'node:crypto'
import { sql } from '../../shared/db/client'
import { aadOf, rewrapSecrets } from '../../shared/db/seal-secrets'
import { keyring, requireSecretKey, seal } from '../../shared/secrets'
import { endpointSecrets } from '../../shared/webhooks/endpoints'
import { EVENT_KINDS, type WebhookArea } from '../../shared/webhooks/events'
import { PORT_RULE } from '../../shared/webhooks/url-policy'
import { api, call, expectError, failingFields, newPlatformKey, newProduct, ok, startProcess, type Worker } from '../helpers'

type Owner = { token: string; productId: string }
const as = (owner: Owner, extra: Record<string, unknown> = {}) => ({ token: owner.token, productId: owner.productId, ...extra })
const AREAS: WebhookArea[] = ['realtime', 'mail']
const OTHER: Record<WebhookArea, WebhookArea> = { realtime: 'mail', mail: 'realtime' }
const URL_OK = 'http://127.0.0.1:9999/hooks'
/** A list's items, whichever shape the area lists in (Realtime `webhooks`, Mail `data`). */
const items = (area: WebhookArea, body: any): any[] => (area === 'mail' ? body.data : body.webhooks)
const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/

async function create(owner: Owner, area: WebhookArea, body: Record<string, unknown> = {}) {
  return ok(await call('POST', `/${area}/webhooks`, as(owner, { body: { url: URL_OK, eventKinds: [EVENT_KINDS[area][0]], ...body } })),
    `create a ${area} webhook`).body
}

let server: ReturnType<typeof Bun.serve>
let capped: Worker
beforeAll(async () => {
  server = Bun.serve({ port: 0, fetch: (request) => api.handle(request) })
  capped = await startProcess('api', { PRODUCT_MAX_WEBHOOK_ENDPOINTS: '2' })
})
afterAll(async () => {
  server.stop(true)
  await capped?.stop()
})

async function mcpClient(token: string, productId?: string) {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` }
  if (productId) headers['x-product-id'] = productId
  const client = new Client({ name: 'webhooks-test', version: '1.0.0' })
  await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${server.port}/mcp`), { requestInit: { headers } }))
  return client
}

describe.each(AREAS)('%s webhooks', (area) => {
  test('create answers the endpoint and its secret once: whsec_ and the base64 of 32 bytes, sealed at rest', async () => {
    const owner = await newProduct()
    const kinds = EVENT_KINDS[area].slice(0, 2)
    const created = await create(owner, area, { eventKinds: kinds, description: 'orders backend' })
    expect(created).toEqual({
      id: expect.any(String), url: URL_OK, description: 'orders backend', eventKinds: kinds, enabled: true, disabledReason: null,
      secretPrefix: created.secret.slice(0, 12), previousSecretExpiresAt: null, createdAt: expect.any(String), updatedAt: created.createdAt,
      secret: expect.stringMatching(SECRET),
    })
    expect(Buffer.from(created.secret.slice(6), 'base64')).toHaveLength(32)
    expect(await endpointSecrets(created.id)).toEqual([created.secret])
    const [row] = await sql`select * from webhook_endpoints where id = ${created.id}`
    expect(row).toMatchObject({ product_id: owner.productId, area, previous_secret_sealed: null })
    expect(Buffer.from(row!.secret_sealed).includes(Buffer.from(created.secret.slice(6), 'base64'))).toBe(false)
    // get and list never show it
    const got = ok(await call('GET', `/${area}/webhooks/${created.id}`, as(owner)), 'get').body
    const { secret, ...shown } = created
    expect(got).toEqual(shown)
    const listed = ok(await call('GET', `/${area}/webhooks`, as(owner)), 'list').body
    expect(items(area, listed)).toEqual([shown])
    expect(JSON.stringify([got, listed])).not.toContain(secret.slice(12))
  })

  test('list is newest first, paginated with limit and after, and shaped as the area lists', async () => {
    const owner = await newProduct()
    const made = [await create(owner, area), await create(owner, area), await create(owner, area)]
    const first = ok(await call('GET', `/${area}/webhooks?limit=2`, as(owner)), 'page 1').body
    expect(Object.keys(first).sort()).toEqual(area === 'mail' ? ['data', 'has_more', 'object'] : ['has_more', 'webhooks'])
    expect([items(area, first).map((e) => e.id), first.has_more]).toEqual([[made[2].id, made[1].id], true])
    const second = ok(await call('GET', `/${area}/webhooks?limit=2&after=${made[1].id}`, as(owner)), 'page 2').body
    expect([items(area, second).map((e) => e.id), second.has_more]).toEqual([[made[0].id], false])
  })

  test('update changes only the supplied fields; "*" subscribes to every kind; enabling clears disabledReason', async () => {
    const owner = await newProduct()
    const created = await create(owner, area, { description: 'first' })
    const path = `/${area}/webhooks/${created.id}`
    const disabled = ok(await call('PATCH', path, as(owner, { body: { enabled: false } })), 'disable').body
    expect(disabled).toMatchObject({ enabled: false, description: 'first', url: URL_OK, eventKinds: created.eventKinds })
    const changed = ok(await call('PATCH', path, as(owner, { body: { url: 'http://localhost:8080/in', eventKinds: ['*'], description: null } })), 'change').body
    expect(changed).toMatchObject({ url: 'http://localhost:8080/in', eventKinds: ['*'], description: null, enabled: false, secretPrefix: created.secretPrefix })
    await sql`update webhook_endpoints set enabled = false, disabled_reason = 'failing for 5 days' where id = ${created.id}`
    expect(ok(await call('GET', path, as(owner)), 'get').body.disabledReason).toBe('failing for 5 days')
    expect(ok(await call('PATCH', path, as(owner, { body: { enabled: true } })), 'enable').body).toMatchObject({ enabled: true, disabledReason: null })
    expect(ok(await call('PATCH', path, as(owner, { body: {} })), 'empty patch').body).toMatchObject({ enabled: true })
    // the URL stored is the one checked, normalized
    expect(ok(await call('PATCH', path, as(owner, { body: { url: 'HTTP://2130706433:8081/x' } })), 'decimal host').body.url).toBe('http://127.0.0.1:8081/x')
  })

  test('rotate answers a new secret once; the old one keeps signing for 24 hours, and get shows neither', async () => {
    const owner = await newProduct()
    const created = await create(owner, area)
    const before = Date.now()
    const rotated = ok(await call('POST', `/${area}/webhooks/${created.id}/rotate-secret`, as(owner)), 'rotate').body
    expect(rotated.secret).toMatch(SECRET)
    expect(rotated.secret).not.toBe(created.secret)
    expect(rotated.secretPrefix).toBe(rotated.secret.slice(0, 12))
    const expires = Date.parse(rotated.previousSecretExpiresAt)
    expect(expires).toBeGreaterThan(before + 24 * 3600_000 - 60_000)
    expect(expires).toBeLessThan(Date.now() + 24 * 3600_000 + 60_000)
    expect(await endpointSecrets(created.id)).toEqual([rotated.secret, created.secret])
    const got = ok(await call('GET', `/${area}/webhooks/${created.id}`, as(owner)), 'get').body
    expect(got).not.toHaveProperty('secret')
    expect(JSON.stringify(got)).not.toContain(rotated.secret.slice(12))
    expect(JSON.stringify(got)).not.toContain(created.secret.slice(12))
    // once the overlap is over, only the new secret signs and the expiry is no longer shown
    await sql`update webhook_endpoints set previous_secret_expires_at = now() - interval '1 second' where id = ${created.id}`
    expect(await endpointSecrets(created.id)).toEqual([rotated.secret])
    expect(ok(await call('GET', `/${area}/webhooks/${created.id}`, as(owner)), 'get').body.previousSecretExpiresAt).toBeNull()
  })

  test('delete removes it: get, update, rotate and delete are 404 after', async () => {
    const owner = await newProduct()
    const created = await create(owner, area)
    const path = `/${area}/webhooks/${created.id}`
    expect(ok(await call('DELETE', path, as(owner)), 'delete').body).toEqual({ id: created.id, deleted: true })
    expectError(await call('GET', path, as(owner)), 404, 'not_found')
    expectError(await call('PATCH', path, as(owner, { body: { enabled: false } })), 404, 'not_found')
    expectError(await call('POST', `${path}/rotate-secret`, as(owner)), 404, 'not_found')
    expectError(await call('DELETE', path, as(owner)), 404, 'not_found')
  })

  test('validation: 400 or 422 naming the field and the rule', async () => {
    const owner = await newProduct()
    const post = (body: Record<string, unknown>) => call('POST', `/${area}/webhooks`, as(owner, { body: { url: URL_OK, eventKinds: [EVENT_KINDS[area][0]], ...body } }))
    const fieldOf = async (body: Record<string, unknown>) => failingFields(await post(body))
    expect(await fieldOf({ url: 'not a url' })).toEqual(['/body/url'])
    expect(await fieldOf({ url: 'ftp://127.0.0.1/' })).toEqual(['/body/url'])
    expect(await fieldOf({ url: 'http://user:pass@127.0.0.1/' })).toEqual(['/body/url'])
    expect(await fieldOf({ url: 'http://127.0.0.1/#x' })).toEqual(['/body/url'])
    expect(await fieldOf({ url: 'http://127.0.0.1/' + 'a'.repeat(2048) })).toEqual(['/body/url'])
    const metadata = await post({ url: 'http://169.254.169.254/latest/meta-data/' }) // refused even where private URLs are allowed
    expectError(metadata, 422, 'unprocessable')
    expect(metadata.body.fields).toEqual([{ path: '/body/url', message: 'its host 169.254.169.254 is a link-local address, not a public one' }])
    // Ports a receiver does not listen on: below 1024 but 80 and 443, and known services' above (even where private URLs are allowed)
    const ssh = await post({ url: 'http://127.0.0.1:22/' })
    expectError(ssh, 400, 'validation_failed')
    expect(ssh.body.fields).toEqual([{ path: '/body/url', message: `${PORT_RULE}; 22 is refused` }])
    for (const url of ['http://127.0.0.1:0/', 'https://127.0.0.1:25/', 'http://127.0.0.1:1023/', 'http://127.0.0.1:5432/', 'https://127.0.0.1:6379/']) {
      expect([url, await fieldOf({ url })]).toEqual([url, ['/body/url']])
    }
    expect(await fieldOf({ eventKinds: ['no.such_kind'] })).toEqual(['/body/eventKinds/0'])
    expect(await fieldOf({ eventKinds: [EVENT_KINDS[area][0], EVENT_KINDS[OTHER[area]][0]] })).toEqual(['/body/eventKinds/1'])
    expect(await fieldOf({ eventKinds: [] })).toEqual(['/body/eventKinds'])
    expect(await fieldOf({ eventKinds: [EVENT_KINDS[area][0], EVENT_KINDS[area][0]] })).toEqual(['/body/eventKinds'])
    expect(await fieldOf({ eventKinds: ['*', EVENT_KINDS[area][0]] })).toEqual(['/body/eventKinds'])
    expect(await fieldOf({ description: 'd'.repeat(257) })).toEqual(['/body/description'])
    expect(await fieldOf({ secret: 'whsec_mine' })).toEqual(['/body/secret'])
    expect(failingFields(await call('POST', `/${area}/webhooks`, as(owner, { body: { url: URL_OK } })))).toEqual(['/body/eventKinds'])
    expect((await post({ description: 'd'.repeat(256), eventKinds: ['*'] })).status).toBe(200)
    const created = await create(owner, area)
    expect(failingFields(await call('PATCH', `/${area}/webhooks/${created.id}`, as(owner, { body: { url: 'https://u@127.0.0.1/' } })))).toEqual(['/body/url'])
    const redis = await call('PATCH', `/${area}/webhooks/${created.id}`, as(owner, { body: { url: 'http://127.0.0.1:6379/' } }))
    expectError(redis, 400, 'validation_failed')
    expect(redis.body.fields).toEqual([{ path: '/body/url', message: `${PORT_RULE}; 6379 is refused` }])
    expect(ok(await call('GET', `/${area}/webhooks/${created.id}`, as(owner)), 'get').body.url).toBe(URL_OK) // unchanged
  })

  test("another product's endpoint, the other area's route and a non-uuid id are all 404, never 403 and never data", async () => {
    const owner = await newProduct()
    const stranger = await newProduct()
    const theirs = await create(stranger, area)
    const mine = await create(owner, area)
    for (const [target, id] of [[area, theirs.id], [OTHER[area], mine.id], [area, 'not-a-uuid']] as const) {
      const path = `/${target}/webhooks/${id}`
      for (const [method, suffix, body] of [['GET', '', undefined], ['PATCH', '', { enabled: false }], ['POST', '/rotate-secret', undefined], ['DELETE', '', undefined]] as const) {
        const answer = await call(method, path + suffix, as(owner, { body }))
        expect([method, path, answer.status, answer.body.error]).toEqual([method, path, 404, 'not_found'])
      }
    }
    expect(items(area, ok(await call('GET', `/${area}/webhooks`, as(owner)), 'list').body).map((e) => e.id)).toEqual([mine.id])
    expect(items(OTHER[area], ok(await call('GET', `/${OTHER[area]}/webhooks`, as(owner)), 'list').body)).toEqual([])
    // nothing changed on either
    expect(await endpointSecrets(theirs.id)).toEqual([theirs.secret])
    expect(ok(await call('GET', `/${area}/webhooks/${mine.id}`, as(owner)), 'get').body.enabled).toBe(true)
  })
})

test('a platform key bound to realtime only manages realtime webhooks; mail_webhooks_* answer 403 forbidden, over REST and MCP', async () => {
  const owner = await newProduct()
  const key = await newPlatformKey(owner, ['realtime'])
  const created = ok(await call('POST', '/realtime/webhooks', { token: key.key, body: { url: URL_OK, eventKinds: ['*'] } }), 'create with the key').body
  expect(items('realtime', ok(await call('GET', '/realtime/webhooks', { token: key.key }), 'list').body).map((e) => e.id)).toEqual([created.id])
  const refused = await call('POST', '/mail/webhooks', { token: key.key, body: { url: URL_OK, eventKinds: ['*'] } })
  // read before expectError: bun's toMatchObject writes its expect.any() matchers into the object it checks
  expect(refused.body.message).toBe('This platform key does not carry the Mail area')
  expectError(refused, 403, 'forbidden')
  expectError(await call('GET', '/mail/webhooks', { token: key.key }), 403, 'forbidden')
  expect(await sql`select 1 from webhook_endpoints where product_id = ${owner.productId} and area = 'mail'`).toHaveLength(0)
  const client = await mcpClient(key.key)
  const viaTool = await client.callTool({ name: 'mail_webhooks_list', arguments: {} })
  expect(viaTool.isError).toBe(true)
  expect(JSON.parse((viaTool.content as any)[0].text)).toMatchObject({ error: 'forbidden', status: 403 })
  await client.close()
})

test('MCP lists the twenty webhook tools, and a tool call creates an endpoint as REST does', async () => {
  const owner = await newProduct()
  const client = await mcpClient(owner.token, owner.productId)
  const tools = (await client.listTools()).tools.map((t) => t.name).filter((name) => name.includes('_webhooks_')).sort()
  const verbs = ['create', 'delete', 'deliveries_get', 'deliveries_list', 'deliveries_replay', 'get', 'list', 'rotate_secret', 'send_test', 'update']
  expect(tools).toEqual(['mail', 'realtime'].flatMap((area) => verbs.map((verb) => `${area}_webhooks_${verb}`)))
  const made = await client.callTool({ name: 'mail_webhooks_create', arguments: { body: { url: URL_OK, eventKinds: ['email.bounced'] } } })
  expect(made.isError).toBeFalsy()
  const endpoint = made.structuredContent as any
  expect(endpoint.secret).toMatch(SECRET)
  const got = await client.callTool({ name: 'mail_webhooks_get', arguments: { path: { id: endpoint.id } } })
  expect(got.structuredContent).toEqual(ok(await call('GET', `/mail/webhooks/${endpoint.id}`, as(owner)), 'get').body)
  const wrongArea = await client.callTool({ name: 'realtime_webhooks_get', arguments: { path: { id: endpoint.id } } })
  expect(JSON.parse((wrongArea.content as any)[0].text)).toMatchObject({ error: 'not_found', status: 404 })
  const listed = await client.callTool({ name: 'mail_webhooks_deliveries_list', arguments: { path: { id: endpoint.id } } })
  expect(listed.structuredContent).toEqual({ object: 'list', has_more: false, data: [] })
  await client.close()
})

test('the OpenAPI document has the webhook paths of both areas, with the kinds of each area as the enum', async () => {
  const openapi = ok(await call('GET', '/openapi.json'), 'GET /openapi.json').body
  for (const area of AREAS) {
    expect(Object.keys(openapi.paths[`/${area}/webhooks`]).sort()).toEqual(['get', 'post'])
    expect(Object.keys(openapi.paths[`/${area}/webhooks/{id}`]).sort()).toEqual(['delete', 'get', 'patch'])
    expect(Object.keys(openapi.paths[`/${area}/webhooks/{id}/rotate-secret`])).toEqual(['post'])
    const create = openapi.paths[`/${area}/webhooks`].post
    expect(create.operationId).toBe(`${area}_webhooks_create`)
    expect(create.tags).toEqual([area === 'mail' ? 'Mail' : 'Realtime'])
    const kinds = create.requestBody.content['application/json'].schema.properties.eventKinds.items.enum
    expect(kinds).toEqual([...EVENT_KINDS[area], '*'])
  }
})

test('a product holds at most PRODUCT_MAX_WEBHOOK_ENDPOINTS per area (409 limit_reached); each area counts its own', async () => {
  const owner = await newProduct()
  const post = (area: WebhookArea) => fetch(`${capped.url}/${area}/webhooks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${owner.token}`, 'x-product-id': owner.productId, 'content-type': 'application/json' },
    body: JSON.stringify({ url: URL_OK, eventKinds: ['*'] }),
  }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }))
  const burst = await Promise.all(Array.from({ length: 5 }, () => post('realtime')))
  expect(burst.map((a) => a.status).sort()).toEqual([200, 200, 409, 409, 409])
  expect(burst.find((a) => a.status === 409)!.body).toMatchObject({ error: 'limit_reached', resource: 'webhookEndpoints', limit: 2 })
  expect((await post('mail')).status).toBe(200)
  expect((await post('mail')).status).toBe(200)
  expect((await post('mail')).status).toBe(409)
})

test('rotating the master key re-wraps both of an endpoint\'s sealed secrets', async () => {
  const owner = await newProduct()
  const created = await create(owner, 'realtime')
  const current = requireSecretKey()
  const old = keyring(randomBytes(32).toString('base64'))
  const [secretBytes, previousBytes] = [randomBytes(32), randomBytes(32)]
  const aad = aadOf('webhook_endpoints', created.id)
  await sql`update webhook_endpoints set secret_sealed = ${seal(secretBytes, aad, old)}, previous_secret_sealed = ${seal(previousBytes, aad, old)},
            previous_secret_expires_at = now() + interval '1 hour' where id = ${created.id}`
  const during = { current: current.current, all: new Map([...current.all, ...old.all]) }
  expect(await rewrapSecrets(sql, during)).toBeGreaterThanOrEqual(2)
  expect(await endpointSecrets(created.id)).toEqual([secretBytes, previousBytes].map((b) => 'whsec_' + b.toString('base64')))
})
