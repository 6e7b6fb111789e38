// The platform API as a hostile tenant would try it: request rates per operation class, per credential and per
// organization (REST and MCP alike) against a real api worker with low limits; every list walked page by page; every
// per-product ceiling hit, in a concurrent burst too; analytics concurrency bounded per organization.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { unboundedSql } from '../../shared/db/client'
import { listMembers } from '../../services/api/accounts/members'
import { createPlatformKey } from '../../services/api/accounts/platform-keys'
import { createProduct } from '../../services/api/accounts/products'
import { createInsight } from '../../services/api/analytics/insights'
import { createMailKey } from '../../services/api/mail/key-management'
import { operations } from '../../services/api/catalog'
import { buildPublicApp } from '../../services/public/app'
import { call, callApp, newPlatformKey, newProduct, newUser, ok as checked, startProcess, type Worker } from '../helpers'

type Owner = Awaited<ReturnType<typeof newProduct>>
const METRIC = { entity: 'events', metrics: ['count'], range: { from: '-7d' }, bucket: 'day' }
const layout = { x: 0, y: 0, w: 6, h: 4 }
const short = () => crypto.randomUUID().slice(0, 8)

// Low limits on a real worker: the in-process suite keeps raised ones (test/env.ts).
const RATES = {
  PLATFORM_RATE_READS_PER_MINUTE: '8', PLATFORM_ORG_RATE_READS_PER_MINUTE: '12',
  PLATFORM_RATE_WRITES_PER_MINUTE: '5', PLATFORM_ORG_RATE_WRITES_PER_MINUTE: '8',
  PLATFORM_RATE_EXPENSIVE_PER_MINUTE: '2', PLATFORM_ORG_RATE_EXPENSIVE_PER_MINUTE: '3',
  PLATFORM_RATE_ANALYTICS_PER_MINUTE: '3', PLATFORM_ORG_RATE_ANALYTICS_PER_MINUTE: '4',
}
const CEILING = 3
const CEILINGS = Object.fromEntries([
  'MAIL_DOMAINS', 'MAIL_TEMPLATES', 'MAIL_KEYS', 'PUBLIC_KEYS', 'PLATFORM_KEYS', 'NAMESPACES', 'GRANTS', 'DASHBOARDS', 'INSIGHTS',
].map((name) => [`PRODUCT_MAX_${name}`, String(CEILING)]).concat([['ORGANIZATION_MAX_PRODUCTS', String(CEILING)]]))

let rated: Worker
let capped: Worker
let ratedPublic: Worker
let single: Worker
beforeAll(async () => {
  ;[rated, capped, ratedPublic, single] = await Promise.all([
    startProcess('api', RATES),
    startProcess('api', { ...CEILINGS, ANALYTICS_MAX_CONCURRENT_PER_ORGANIZATION: '1', PRODUCT_MAX_KEYS_CREATED_PER_DAY: '5' }),
    startProcess('public', RATES),
    startProcess('api', { ANALYTICS_MAX_CONCURRENT_PER_WORKER: '1' }),
  ])
})
afterAll(async () => {
  await Promise.all([rated?.stop(), capped?.stop(), ratedPublic?.stop(), single?.stop()])
})

interface Answer { status: number; body: any; headers: Headers }

async function over(worker: Worker, token: string, method: string, path: string, body?: unknown, productId?: string): Promise<Answer> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` }
  if (productId) headers['x-product-id'] = productId
  if (body !== undefined) headers['content-type'] = 'application/json'
  const response = await fetch(worker.url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
  const text = await response.text()
  return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: response.headers }
}

/** One MCP tools/call over the worker's /mcp; answers the tool result (structuredContent, or isError with the body). */
async function tool(worker: Worker, token: string, productId: string, name: string, args: Record<string, unknown> = {}) {
  const response = await fetch(`${worker.url}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'x-product-id': productId, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } }),
  })
  expect(response.status).toBe(200)
  const result = ((await response.json()) as any).result
  return result.isError ? { isError: true, body: JSON.parse(result.content[0].text) } : { isError: false, body: result.structuredContent }
}

/**
 * Windows are whole minutes of epoch time: a burst that straddles a minute would be counted in two windows. Starts
 * each burst with at least 15 s of its minute left.
 */
/** A test that may wait for a fresh window (up to 15 s) has its own time limit. */
const WINDOW_TEST_MS = 45_000
async function freshWindow(): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000)
  if (left < 15_000) await Bun.sleep(left + 50)
}

const expectRefused = (answer: Answer, rateClass: string, scope: string, limit: number) => {
  expect(answer.status).toBe(429)
  expect(answer.body).toMatchObject({ error: 'rate_limited', class: rateClass, scope, limit })
  expect(answer.body.message).toContain(`More than ${limit}`)
  const retryAfter = Number(answer.headers.get('retry-after'))
  expect(retryAfter).toBeGreaterThanOrEqual(1)
  expect(retryAfter).toBeLessThanOrEqual(60)
  expect(answer.body.retryAfter).toBe(retryAfter)
}

/**
 * Set-up for the rate tests without spending the budgets under test: the counters live in the shared Redis, so a write
 * made in-process would count against the same user. Sign-up is anonymous (limited per address only); the product
 * and keys are made by the domain functions directly.
 */
async function quietProduct(): Promise<Owner> {
  const user = await newUser()
  return { ...user, productId: (await createProduct(user.userId, { name: 'rated' })).id }
}
const quietKey = async (owner: Owner, areas: ('realtime' | 'mail')[]) => createPlatformKey(owner.productId, { name: 'k', areas }, owner.userId)

async function ok(owner: Owner, method: string, path: string, body?: unknown) {
  const result = await call(method, path, { token: owner.token, productId: owner.productId, body })
  if (result.status !== 200) throw new Error(`${method} ${path}: ${result.status} ${JSON.stringify(result.body)}`)
  return result.body
}

describe('the catalog declares the limits', () => {
  const WEBHOOK_LOOKUPS = ['realtime', 'mail'].flatMap((area) => [`${area}_webhooks_create`, `${area}_webhooks_update`])
  const WEBHOOK_SENDS = ['realtime', 'mail'].flatMap((area) => [`${area}_webhooks_deliveries_replay`, `${area}_webhooks_send_test`])

  test('every operation has a rate class in OpenAPI: GET reads, other methods writes, the costly ones marked', async () => {
    const openapi = (await call('GET', '/openapi.json')).body
    const classes = new Map<string, string>()
    for (const methods of Object.values<any>(openapi.paths)) {
      for (const [method, op] of Object.entries<any>(methods)) {
        classes.set(op.operationId, op['x-rate-class'])
        expect(op.responses['429'].content['application/json'].schema.$ref).toBe('#/components/schemas/Error')
        if (!['mail_domain_create', 'mail_domain_verify', 'realtime_payload-storage_provision', 'analytics_metric_query',
          'analytics_funnel_run', 'analytics_insight_run', 'organization_auth_signup', 'organization_auth_login',
          ...WEBHOOK_LOOKUPS, ...WEBHOOK_SENDS].includes(op.operationId)) {
          expect([op.operationId, op['x-rate-class']]).toEqual([op.operationId, method === 'get' ? 'read' : 'write'])
        }
      }
    }
    expect(classes.size).toBe(operations.length)
    expect(['mail_domain_create', 'mail_domain_verify', 'realtime_payload-storage_provision'].map((id) => classes.get(id))).toEqual(['expensive', 'expensive', 'expensive'])
    expect(['analytics_metric_query', 'analytics_funnel_run', 'analytics_insight_run'].map((id) => classes.get(id))).toEqual(['analytics', 'analytics', 'analytics'])
    expect(WEBHOOK_LOOKUPS.map((id) => classes.get(id))).toEqual(WEBHOOK_LOOKUPS.map(() => 'expensive')) // a DNS lookup of the URL's host
    expect(WEBHOOK_SENDS.map((id) => classes.get(id))).toEqual(WEBHOOK_SENDS.map(() => 'expensive')) // an outbound request, more to keep
    expect([classes.get('organization_auth_signup'), classes.get('organization_auth_login')]).toEqual(['address', 'address'])
  })

  test('every list operation takes limit and after and answers has_more, in OpenAPI and in its MCP tool schema', async () => {
    const lists = operations.filter((op) => op.id.endsWith('_list'))
    expect(lists.map((op) => op.id).sort()).toEqual([
      'analytics_dashboard_list', 'analytics_dashboard_versions_list', 'analytics_insight_list', 'mail_apikey_list', 'mail_domain_list',
      'mail_emails_list', 'mail_template_list', 'organization_members_list', 'organization_organizations_list', 'organization_platform-keys_list',
      'organization_products_list', 'organization_public-keys_list', 'realtime_grants_list', 'realtime_namespaces_list',
      'mail_webhooks_list', 'realtime_webhooks_list', 'mail_webhooks_deliveries_list', 'realtime_webhooks_deliveries_list',
      'tracking_capture-keys_list', 'mail_emails_deliveries_list', 'mail_suppressions_list', 'realtime_channels_list',
      'realtime_connections_list',
    ].sort())
    for (const op of lists) {
      const query = (op.query as any)?.properties ?? {}
      expect([op.id, query.limit?.minimum, query.limit?.maximum, query.after !== undefined]).toEqual([op.id, 1, 100, true])
      expect([op.id, (op.response as any).properties.has_more?.type]).toEqual([op.id, 'boolean'])
      expect([op.id, (op.response as any).required]).toEqual([op.id, expect.arrayContaining(['has_more'])])
    }
  })
})

describe('rate limits per operation class', () => {
  test('writes per credential: the sixth write of a session is 429 naming the class; reads and a platform key of the same product still pass', async () => {
    const owner = await quietProduct()
    const key = await quietKey(owner, ['realtime'])
    await freshWindow()
    const write = (token: string) => over(rated, token, 'POST', '/realtime/namespaces', { name: `n${short()}` }, owner.productId)
    for (let i = 0; i < 5; i++) expect((await write(owner.token)).status).toBe(200)
    expectRefused(await write(owner.token), 'write', 'credential', 5)
    // Another class has its own budget; another credential of the product too.
    expect((await over(rated, owner.token, 'GET', '/realtime/namespaces', undefined, owner.productId)).status).toBe(200)
    expect((await write(key.key)).status).toBe(200)
  }, WINDOW_TEST_MS)

  test('writes per organization: credentials of one organization share its budget; another organization is not held back', async () => {
    const owner = await quietProduct()
    const keys = [await quietKey(owner, ['realtime']), await quietKey(owner, ['realtime'])]
    const stranger = await quietProduct()
    await freshWindow()
    const write = (token: string, productId = owner.productId) => over(rated, token, 'POST', '/realtime/namespaces', { name: `n${short()}` }, productId)
    for (let i = 0; i < 5; i++) expect((await write(owner.token)).status).toBe(200) // the session's own 5
    for (let i = 0; i < 3; i++) expect((await write(keys[0]!.key)).status).toBe(200) // 8 for the organization
    expectRefused(await write(keys[1]!.key), 'write', 'organization', 8) // a fresh credential, a spent organization
    expect((await write(stranger.token, stranger.productId)).status).toBe(200)
  }, WINDOW_TEST_MS)

  test('MCP tool calls count with REST calls: the ninth read of one credential, through either, is 429 with retryAfter', async () => {
    const owner = await quietProduct()
    await freshWindow()
    for (let i = 0; i < 4; i++) expect((await over(rated, owner.token, 'GET', '/realtime/namespaces', undefined, owner.productId)).status).toBe(200)
    for (let i = 0; i < 4; i++) expect((await tool(rated, owner.token, owner.productId, 'realtime_namespaces_list')).isError).toBe(false)
    const refused = await tool(rated, owner.token, owner.productId, 'realtime_namespaces_list')
    expect(refused.isError).toBe(true)
    expect(refused.body).toMatchObject({ status: 429, error: 'rate_limited', class: 'read', scope: 'credential', limit: 8 })
    expect(refused.body.retryAfter).toBeGreaterThanOrEqual(1)
    expectRefused(await over(rated, owner.token, 'GET', '/realtime/namespaces', undefined, owner.productId), 'read', 'credential', 8)
  }, WINDOW_TEST_MS)

  test('expensive: the third domain registration of a credential in a minute is 429; its reads and writes are not spent', async () => {
    const owner = await quietProduct()
    await freshWindow()
    const create = () => over(rated, owner.token, 'POST', '/mail/domains', { name: `e${short()}.example.com` }, owner.productId)
    expect((await create()).status).toBe(200)
    expect((await create()).status).toBe(200)
    expectRefused(await create(), 'expensive', 'credential', 2)
    expect((await over(rated, owner.token, 'GET', '/mail/domains', undefined, owner.productId)).body.data).toHaveLength(2)
    expect((await over(rated, owner.token, 'POST', '/mail/templates', { name: 't', subject: 's', html: '<p>x</p>' }, owner.productId)).status).toBe(200)
  }, WINDOW_TEST_MS)

  test('the public Mail surface spends the same budgets: domain create and verify per sending key and per organization, management writes as writes', async () => {
    const owner = await quietProduct()
    const [first, second] = [await createMailKey(owner.productId, { name: 'a', scope: 'full_access' }), await createMailKey(owner.productId, { name: 'b', scope: 'full_access' })]
    await freshWindow()
    const send = async (key: string, method: string, path: string, body?: unknown): Promise<Answer> => {
      const response = await fetch(`${ratedPublic.url}/${owner.productId}/mail${path}`, {
        method, headers: { 'x-api-key': key, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body),
      })
      const text = await response.text()
      return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: response.headers }
    }
    const create = (key: string) => send(key, 'POST', '/domains', { name: `e${short()}.example.com` })
    const made = await create(first.key)
    expect([made.status, made.body]).toEqual([200, expect.objectContaining({ name: expect.any(String) })])
    expect((await create(first.key)).status).toBe(200)
    expectRefused(await create(first.key), 'expensive', 'credential', 2)
    // A verification is as expensive, even of an unknown domain; the organization's 3 are then spent, for every key.
    expect((await send(second.key, 'POST', `/domains/${crypto.randomUUID()}/verify`)).status).toBe(404)
    expectRefused(await send(second.key, 'POST', `/domains/${crypto.randomUUID()}/verify`), 'expensive', 'organization', 3)
    expectRefused(await over(rated, owner.token, 'POST', '/mail/domains', { name: `e${short()}.example.com` }, owner.productId), 'expensive', 'organization', 3)
    // Template writes are writes: 5 per key.
    const template = () => send(second.key, 'POST', '/templates', { name: `t${short()}`, subject: 's', html: '<p>x</p>' })
    for (let i = 0; i < 5; i++) expect((await template()).status).toBe(200)
    expectRefused(await template(), 'write', 'credential', 5)
    expect((await send(second.key, 'GET', '/domains')).body.data).toHaveLength(2) // reads are not limited here
  }, WINDOW_TEST_MS)

  test('analytics runs: the fourth metric query, funnel or insight run of a credential in a minute is 429', async () => {
    const owner = await quietProduct()
    const insight = await createInsight(owner.productId, { name: 'i', kind: 'metric', query: METRIC }, owner.userId)
    await freshWindow()
    const post = (path: string, body?: unknown) => over(rated, owner.token, 'POST', path, body, owner.productId)
    expect((await post('/analytics/query', METRIC)).status).toBe(200)
    expect((await post(`/analytics/insights/${insight.id}/run`)).status).toBe(200)
    expect((await post('/analytics/funnel', { steps: [{ entity: 'events', event: 'a' }, { entity: 'events', event: 'b' }], identity: 'users_id', range: { from: '-7d' } })).status).toBe(200)
    expectRefused(await post('/analytics/query', METRIC), 'analytics', 'credential', 3)
    expect((await over(rated, owner.token, 'GET', '/analytics/catalog', undefined, owner.productId)).status).toBe(200) // a read
  }, WINDOW_TEST_MS)

  test('a stranger naming an organization spends only their own budget, never the organization\'s', async () => {
    const owner = await newUser()
    const stranger = await newUser()
    await freshWindow()
    const members = (token: string) => over(rated, token, 'GET', `/organizations/${owner.organizationId}/members`)
    for (let i = 0; i < 8; i++) expect((await members(stranger.token)).status).toBe(404)
    expectRefused(await members(stranger.token), 'read', 'credential', 8)
    // The organization's 12 reads are all still there: its owner reads 8 (their own limit) without a refusal.
    for (let i = 0; i < 8; i++) expect((await members(owner.token)).status).toBe(200)
  }, WINDOW_TEST_MS)
})

/** Walks a list page by page with `limit`, checking each page's size and has_more; answers every item in order. */
async function walk(owner: Owner, path: string, member: string, limit: number, cursorOf = (item: any) => item.id as string) {
  const items: any[] = []
  let after: string | undefined
  for (let pages = 0; ; pages++) {
    expect(pages).toBeLessThan(50)
    const separator = path.includes('?') ? '&' : '?'
    const page = await ok(owner, 'GET', `${path}${separator}limit=${limit}${after ? `&after=${encodeURIComponent(after)}` : ''}`)
    expect(page[member].length).toBeLessThanOrEqual(limit)
    items.push(...page[member])
    if (!page.has_more) break
    expect(page[member]).toHaveLength(limit) // a short page is the last one
    after = cursorOf(page[member].at(-1))
  }
  return items
}

/** The walk finds exactly what one big page shows, in the same order, each item once, and `expected` in that order. */
async function expectWalk(owner: Owner, path: string, member: string, expected: string[], cursorOf = (item: any) => item.id as string) {
  const separator = path.includes('?') ? '&' : '?'
  const whole = await ok(owner, 'GET', `${path}${separator}limit=100`)
  expect(whole.has_more).toBe(false)
  const walked = await walk(owner, path, member, 2, cursorOf)
  expect(walked.map(cursorOf)).toEqual(whole[member].map(cursorOf))
  expect(new Set(walked.map(cursorOf)).size).toBe(walked.length)
  expect(walked.map(cursorOf)).toEqual(expected)
  return walked
}

describe('every list is paginated: limit, after, has_more', () => {
  let owner: Owner
  beforeAll(async () => {
    owner = await newProduct()
  })
  const five = () => Array.from({ length: 5 }, (_, i) => i)

  test('organizations, oldest first; members, by joining', async () => {
    const user = await newUser()
    const inviters = [] as Awaited<ReturnType<typeof newUser>>[]
    for (const _ of five()) {
      const inviter = await newUser()
      expect((await call('POST', `/organizations/${inviter.organizationId}/members`, { token: inviter.token, body: { email: user.email } })).status).toBe(200)
      inviters.push(inviter)
    }
    const orgs = [user.organizationId, ...inviters.map((i) => i.organizationId)]
    await expectWalk({ ...user, productId: '' } as Owner, '/organizations', 'organizations', orgs)
    const host = inviters[0]!
    for (const _ of five()) {
      const member = await newUser()
      checked(await call('POST', `/organizations/${host.organizationId}/members`, { token: host.token, body: { email: member.email } }), 'add a member')
    }
    const all = checked(await call('GET', `/organizations/${host.organizationId}/members?limit=100`, { token: host.token }), 'list every member').body.members
    expect(all).toHaveLength(7)
    expect(all[0].userId).toBe(host.userId)
    await expectWalk({ ...host, productId: '' } as Owner, `/organizations/${host.organizationId}/members`, 'members', all.map((m: any) => m.userId), (m) => m.userId)
  })

  test('products, newest first; a platform key sees its own product and nothing after it', async () => {
    const user = await newUser()
    const ids: string[] = []
    for (const i of five()) ids.unshift(checked(await call('POST', '/products', { token: user.token, body: { name: `p${i}` } }), 'create a product').body.id)
    await expectWalk({ ...user, productId: '' } as Owner, '/products', 'products', ids)
    const key = await newPlatformKey({ token: user.token, productId: ids[0]! }, ['organization'])
    expect((await call('GET', '/products?limit=1', { token: key.key })).body).toMatchObject({ products: [{ id: ids[0] }], has_more: false })
    expect((await call('GET', `/products?after=${ids[0]}`, { token: key.key })).body).toEqual({ products: [], has_more: false })
    expect((await call('GET', `/products?after=${ids[0]!.toUpperCase()}`, { token: key.key })).body).toEqual({ products: [], has_more: false })
    expect((await call('GET', `/products?after=${ids[1]}`, { token: key.key })).body.fields).toEqual([{ path: '/query/after', message: 'names no product of this list' }])
  })

  test('platform keys, public keys, mail keys: newest first; revoked keys leave the list but their position holds', async () => {
    const base = `/products/${owner.productId}`
    const platform: string[] = []
    for (const _ of five()) platform.unshift((await ok(owner, 'POST', `${base}/platform-keys`, { name: 'k', areas: ['mail'] })).id)
    const walked = await expectWalk(owner, `${base}/platform-keys`, 'keys', platform)
    expect(walked.filter((k) => 'key' in k)).toEqual([]) // never a secret
    const publicKeys: string[] = []
    for (const _ of five()) publicKeys.unshift((await ok(owner, 'POST', `/governance/api/v1${base}/public-keys`, { name: 'k' })).id)
    await expectWalk(owner, `/governance/api/v1${base}/public-keys`, 'keys', publicKeys)
    const mailKeys: string[] = []
    for (const _ of five()) mailKeys.unshift((await ok(owner, 'POST', '/mail/api-keys', { name: 'k', scope: 'sending_access' })).id)
    await expectWalk(owner, '/mail/api-keys', 'data', mailKeys)
    // A walk that stopped at a key revoked since goes on after it.
    const firstPage = await ok(owner, 'GET', '/mail/api-keys?limit=2')
    await ok(owner, 'DELETE', `/mail/api-keys/${firstPage.data[1].id}`)
    const rest = await ok(owner, 'GET', `/mail/api-keys?limit=100&after=${firstPage.data[1].id}`)
    expect(rest.data.map((k: any) => k.id)).toEqual(mailKeys.slice(2))
  })

  test('mail domains and templates, newest first, on the platform API and the public surface alike', async () => {
    const domains: string[] = []
    for (const _ of five()) domains.unshift((await ok(owner, 'POST', '/mail/domains', { name: `p${short()}.example.com` })).id)
    await expectWalk(owner, '/mail/domains', 'data', domains)
    const templates: string[] = []
    for (const i of five()) templates.unshift((await ok(owner, 'POST', '/mail/templates', { name: `t${i}`, subject: 's', html: '<p>x</p>' })).id)
    await expectWalk(owner, '/mail/templates', 'data', templates)
    const full = await ok(owner, 'POST', '/mail/api-keys', { name: 'full', scope: 'full_access' })
    const publicApp = buildPublicApp()
    for (const [path, expected] of [['domains', domains], ['templates', templates]] as const) {
      const seen: string[] = []
      let after = ''
      for (;;) {
        const page = await callApp(publicApp, 'http://public.test', 'GET', `/${owner.productId}/mail/${path}?limit=2${after}`, { headers: { 'x-api-key': full.key } })
        expect(page.status).toBe(200)
        expect(page.body.object).toBe('list')
        seen.push(...page.body.data.map((d: any) => d.id))
        if (!page.body.has_more) break
        after = `&after=${page.body.data.at(-1).id}`
      }
      expect(seen).toEqual(expected)
    }
  })

  test('namespaces by name, grants by pattern (and of one namespace)', async () => {
    const names = ['delta', 'alpha', 'echo', 'charlie', 'bravo']
    for (const name of names) await ok(owner, 'POST', '/realtime/namespaces', { name })
    const walked = await expectWalk(owner, '/realtime/namespaces', 'namespaces',
      (await ok(owner, 'GET', '/realtime/namespaces?limit=100')).namespaces.map((n: any) => n.id))
    expect(walked.map((n) => n.name)).toEqual([...names].sort())
    for (const pattern of ['alpha:e', 'alpha:a', 'bravo:c', 'alpha:d', 'bravo:b']) await ok(owner, 'POST', '/realtime/grants', { pattern, ops: ['subscribe'] })
    const grants = await expectWalk(owner, '/realtime/grants', 'grants', (await ok(owner, 'GET', '/realtime/grants?limit=100')).grants.map((g: any) => g.id))
    expect(grants.map((g) => g.pattern)).toEqual(['alpha:a', 'alpha:d', 'alpha:e', 'bravo:b', 'bravo:c'])
    const ofAlpha = await walk(owner, '/realtime/grants?namespace=alpha', 'grants', 2)
    expect(ofAlpha.map((g) => g.pattern)).toEqual(['alpha:a', 'alpha:d', 'alpha:e'])
  })

  test('insights newest first; dashboards newest first with tag and q kept; a dashboard\'s versions newest first', async () => {
    const insights: string[] = []
    for (const i of five()) insights.unshift((await ok(owner, 'POST', '/analytics/insights', { name: `i${i}`, kind: 'metric', query: METRIC })).id)
    await expectWalk(owner, '/analytics/insights', 'insights', insights)
    const tag = `t${short()}`
    const dashboards: { id: string; tagged: boolean; name: string }[] = []
    for (const i of Array.from({ length: 7 }, (_, n) => n)) {
      const tagged = i % 2 === 0
      const name = i < 4 ? `Growth ${i}` : `Revenue ${i}`
      const created = await ok(owner, 'POST', '/analytics/dashboards', {
        slug: `d-${short()}`, name, tags: tagged ? [tag] : [], tiles: [{ type: 'text', markdown: '#', layout }],
      })
      dashboards.unshift({ id: created.id, tagged, name })
    }
    await expectWalk(owner, '/analytics/dashboards', 'dashboards', dashboards.map((d) => d.id))
    await expectWalk(owner, `/analytics/dashboards?tag=${tag}`, 'dashboards', dashboards.filter((d) => d.tagged).map((d) => d.id))
    await expectWalk(owner, '/analytics/dashboards?q=growth', 'dashboards', dashboards.filter((d) => d.name.startsWith('Growth')).map((d) => d.id))
    await expectWalk(owner, `/analytics/dashboards?q=REVENUE&tag=${tag}`, 'dashboards',
      dashboards.filter((d) => d.name.startsWith('Revenue') && d.tagged).map((d) => d.id))
    const target = dashboards[0]!.id
    for (const i of five()) await ok(owner, 'PATCH', `/analytics/dashboards/${target}`, { name: `v${i}` })
    const versions = await expectWalk(owner, `/analytics/dashboards/${target}/versions`, 'versions', ['6', '5', '4', '3', '2', '1'], (v) => String(v.version))
    expect(versions.map((v) => v.definition.name).slice(0, 2)).toEqual(['v4', 'v3'])
  })

  test('a bad limit or cursor is 400 naming /query/limit or /query/after, on REST and MCP alike', async () => {
    const other = await newProduct()
    const foreign = await ok(other, 'POST', '/mail/templates', { name: 't', subject: 's', html: 'x' })
    for (const limit of ['0', '101', 'abc', '-1', '1.5', '1e1', '']) {
      const refused = await call('GET', `/mail/templates?limit=${limit}`, { token: owner.token, productId: owner.productId })
      expect([limit, refused.status, refused.body.fields.map((f: any) => f.path)]).toEqual([limit, 400, ['/query/limit']])
    }
    for (const after of ['not-a-uuid', crypto.randomUUID(), foreign.id]) {
      const refused = await call('GET', `/mail/templates?after=${after}`, { token: owner.token, productId: owner.productId })
      expect([after, refused.status, refused.body.fields.map((f: any) => f.path)]).toEqual([after, 400, ['/query/after']])
    }
    const versions = await call('GET', `/analytics/dashboards/${crypto.randomUUID()}/versions?after=x`, { token: owner.token, productId: owner.productId })
    expect(versions.body.fields.map((f: any) => f.path)).toEqual(['/query/after'])
    for (const limit of [1000, 1.5, 0.5, '1.5', 'abc']) {
      const viaTool = await tool(capped, owner.token, owner.productId, 'mail_template_list', { query: { limit } })
      expect([limit, viaTool.body.status, [...new Set(viaTool.body.fields.map((f: any) => f.path))]]).toEqual([limit, 400, ['/query/limit']])
    }
    // A JSON number with a fraction is refused, never truncated to 1.
    expect((await tool(capped, owner.token, owner.productId, 'mail_template_list', { query: { limit: 1.5 } })).body.fields)
      .toEqual([{ path: '/query/limit', message: 'must be integer' }])
    const onePage = await tool(capped, owner.token, owner.productId, 'mail_template_list', { query: { limit: 1 } })
    expect(onePage.body.data).toHaveLength(1)
    expect(onePage.body.has_more).toBe(true)
  })

  test('a cursor deleted while the list is being read is 400 /query/after, never an empty last page', async () => {
    const host = await newUser()
    const member = await newUser()
    expect((await call('POST', `/organizations/${host.organizationId}/members`, { token: host.token, body: { email: member.email } })).status).toBe(200)
    // Hold the list query (it joins users) while the cursor's membership is deleted: the query runs after the delete.
    const locker = unboundedSql()
    const held = await locker.reserve()
    try {
      await held`begin`
      await held`lock table users in access exclusive mode`
      const listing = listMembers(host.organizationId, host.userId, { limit: 10, after: member.userId }).then((rows) => ({ rows }), (error) => ({ error }))
      for (let waited = 0; ; waited += 20) {
        expect(waited).toBeLessThan(10_000)
        const [blocked] = await locker`select count(*)::int as n from pg_locks where not granted and relation = 'users'::regclass`
        if (blocked!.n > 0) break
        await Bun.sleep(20)
      }
      await locker`delete from organization_members where organization_id = ${host.organizationId} and user_id = ${member.userId}`
      await held`rollback`
      const answer = (await listing) as { rows?: unknown[]; error?: any }
      expect(answer.rows).toBeUndefined()
      expect([answer.error?.status, answer.error?.extra?.fields]).toEqual([400, [{ path: '/query/after', message: 'names no member of this list' }]])
    } finally {
      held.release()
      await locker.end()
    }
  })

  test('without limit a page holds 50, and has_more says more follow', async () => {
    const product = await newProduct()
    const insert = unboundedSql()
    await insert`insert into mail_templates (product_id, name, subject, html) select ${product.productId}, 't' || i, 's', 'x' from generate_series(1, 51) as i`
    await insert.end()
    const first = await ok(product, 'GET', '/mail/templates')
    expect([first.data.length, first.has_more]).toEqual([50, true])
    const second = await ok(product, 'GET', `/mail/templates?after=${first.data.at(-1).id}`)
    expect([second.data.length, second.has_more]).toEqual([1, false])
  })
})

describe('ceilings per product', () => {
  const burst = async <T>(n: number, make: (i: number) => Promise<T>) => Promise.all(Array.from({ length: n }, (_, i) => make(i)))

  /** Eight creates at once against a ceiling of 3: exactly three succeed, the rest are 409 limit_reached naming it. */
  async function expectCeiling(owner: Owner, resource: string, path: string, body: (i: number) => unknown, count: () => Promise<number>) {
    const answers = await burst(8, (i) => over(capped, owner.token, 'POST', path, body(i), owner.productId))
    const statuses = answers.map((a) => a.status).sort()
    expect({ resource, statuses }).toEqual({ resource, statuses: [200, 200, 200, 409, 409, 409, 409, 409] })
    for (const refused of answers.filter((a) => a.status === 409)) {
      expect(refused.body).toMatchObject({ error: 'limit_reached', resource, limit: CEILING })
      expect(refused.body.message).toContain(`already has ${CEILING}`)
    }
    expect(await count()).toBe(CEILING)
    return answers.filter((a) => a.status === 200).map((a) => a.body)
  }

  test('every kind: a burst stops at the ceiling, and deleting one makes room', async () => {
    const owner = await newProduct()
    const listed = async (path: string, member: string) => (await over(capped, owner.token, 'GET', `${path}?limit=100`, undefined, owner.productId)).body[member].length
    const domains = await expectCeiling(owner, 'mailDomains', '/mail/domains', () => ({ name: `c${short()}.example.com` }), () => listed('/mail/domains', 'data'))
    await expectCeiling(owner, 'mailTemplates', '/mail/templates', (i) => ({ name: `t${i}`, subject: 's', html: 'x' }), () => listed('/mail/templates', 'data'))
    const mailKeys = await expectCeiling(owner, 'mailKeys', '/mail/api-keys', () => ({ name: 'k', scope: 'sending_access' }), () => listed('/mail/api-keys', 'data'))
    const base = `/products/${owner.productId}`
    await expectCeiling(owner, 'platformKeys', `${base}/platform-keys`, () => ({ name: 'k', areas: ['mail'] }), () => listed(`${base}/platform-keys`, 'keys'))
    await expectCeiling(owner, 'publicKeys', `/governance/api/v1${base}/public-keys`, () => ({ name: 'k' }), () => listed(`/governance/api/v1${base}/public-keys`, 'keys'))
    await expectCeiling(owner, 'namespaces', '/realtime/namespaces', (i) => ({ name: `n${i}` }), () => listed('/realtime/namespaces', 'namespaces'))
    const namespace = (await over(capped, owner.token, 'GET', '/realtime/namespaces', undefined, owner.productId)).body.namespaces[0].name
    await expectCeiling(owner, 'grants', '/realtime/grants', (i) => ({ pattern: `${namespace}:g${i}`, ops: ['subscribe'] }), () => listed('/realtime/grants', 'grants'))
    const insights = await expectCeiling(owner, 'insights', '/analytics/insights', (i) => ({ name: `i${i}`, kind: 'metric', query: METRIC }), () => listed('/analytics/insights', 'insights'))
    await expectCeiling(owner, 'dashboards', '/analytics/dashboards', () => ({ slug: `d-${short()}`, name: 'd', tiles: [{ type: 'text', markdown: '#', layout }] }),
      () => listed('/analytics/dashboards', 'dashboards'))
    // Room again after a delete or a revocation (revoked keys do not count).
    expect((await over(capped, owner.token, 'DELETE', `/mail/api-keys/${mailKeys[0].id}`, undefined, owner.productId)).status).toBe(200)
    expect((await over(capped, owner.token, 'POST', '/mail/api-keys', { name: 'k', scope: 'sending_access' }, owner.productId)).status).toBe(200)
    expect((await over(capped, owner.token, 'DELETE', `/mail/domains/${domains[0].id}`, undefined, owner.productId)).status).toBe(200)
    expect((await over(capped, owner.token, 'POST', '/mail/domains', { name: `r${short()}.example.com` }, owner.productId)).status).toBe(200)
    expect((await over(capped, owner.token, 'DELETE', `/analytics/insights/${insights[0].id}`, undefined, owner.productId)).status).toBe(200)
    expect((await over(capped, owner.token, 'POST', '/analytics/insights', { name: 'again', kind: 'metric', query: METRIC }, owner.productId)).status).toBe(200)
    // The ceiling is per product: another product of the same owner starts empty.
    const second = checked(await call('POST', '/products', { token: owner.token, body: { name: 'second' } }), 'create a product').body.id
    expect((await over(capped, owner.token, 'POST', '/realtime/namespaces', { name: 'n0' }, second)).status).toBe(200)
  }, 60_000)

  test('keys created in a day, revoked ones included, are bounded per kind: create-and-revoke churn is 429 after PRODUCT_MAX_KEYS_CREATED_PER_DAY', async () => {
    const owner = await newProduct()
    const base = `/products/${owner.productId}`
    for (const [resource, path] of [['mailKeys', '/mail/api-keys'], ['platformKeys', `${base}/platform-keys`], ['publicKeys', `/governance/api/v1${base}/public-keys`]] as const) {
      const body = resource === 'mailKeys' ? { name: 'k', scope: 'sending_access' } : resource === 'platformKeys' ? { name: 'k', areas: ['mail'] } : { name: 'k' }
      for (let i = 0; i < 5; i++) {
        const made = await over(capped, owner.token, 'POST', path, body, owner.productId)
        expect([resource, i, made.status]).toEqual([resource, i, 200])
        expect((await over(capped, owner.token, 'DELETE', `${path}/${made.body.id}`, undefined, owner.productId)).status).toBe(200)
      }
      // No active key of the kind is left, yet the sixth create of the day is refused.
      const refused = await over(capped, owner.token, 'POST', path, body, owner.productId)
      expect([resource, refused.status]).toEqual([resource, 429])
      expect(refused.body).toMatchObject({ error: 'rate_limited', resource, limit: 5, windowSeconds: 86_400 })
      expect(refused.body.message).toContain('in the last 24 hours')
      const retryAfter = Number(refused.headers.get('retry-after'))
      expect(retryAfter).toBeGreaterThan(86_000)
      expect(retryAfter).toBeLessThanOrEqual(86_400)
    }
  }, 60_000)

  test('an organization holds at most so many products, so per-product ceilings cannot be multiplied freely', async () => {
    const user = await newUser()
    const owner = { ...user, productId: '' } as Owner
    await expectCeiling(owner, 'organizationProducts', '/products', (i) => ({ name: `p${i}` }),
      async () => (await over(capped, user.token, 'GET', '/products?limit=100')).body.products.length)
  })
})

describe('analytics concurrency per organization and per worker', () => {
  let owner: Owner
  let sibling: string
  const heavy = { entity: 'events', metrics: ['identities'], dimensions: ['properties.n'], range: { from: '-7d' }, limit: 1 }
  beforeAll(async () => {
    owner = await newProduct('first')
    sibling = checked(await call('POST', '/products', { token: owner.token, body: { name: 'second' } }), 'create a product').body.id as string
    const seed = unboundedSql() // a bulk insert longer than the API's own statement deadline
    await seed`
      insert into tracked_events (product_id, event, ts, users_id, properties)
      select ${owner.productId}, 'e' || (i % 7), now() - (i || ' seconds')::interval, 'u' || (i % 5000), jsonb_build_object('n', i)
      from generate_series(1, 200000) as i`
    await seed.end()
  }, 60_000)

  /**
   * Resolves once the heavy query runs in PostgreSQL, so holds its slot (or has already finished): the next query goes
   * then, not after a fixed 50 ms, which the heavy one's own start outlasted on a loaded machine (it came second and was
   * the one refused).
   */
  async function heavyRunning(heavyQuery: Promise<unknown>): Promise<void> {
    let settled = false
    void heavyQuery.then(() => (settled = true), () => (settled = true))
    const watcher = unboundedSql()
    try {
      while (!settled) {
        const running = await watcher`
          select 1 from pg_stat_activity
          where datname = current_database() and state = 'active' and query like '%tracked_events%' and pid <> pg_backend_pid()`
        if (running.length) return
        await Bun.sleep(10)
      }
    } finally {
      await watcher.end()
    }
  }

  test('two products of one organization share its slots on a worker: the second query waits its turn (429); another organization runs', async () => {
    const stranger = await newProduct()
    const query = (productId: string, token = owner.token, body: unknown = METRIC) => over(capped, token, 'POST', '/analytics/query', body, productId)
    const heavyQuery = query(owner.productId, owner.token, heavy)
    await heavyRunning(heavyQuery)
    const [first, second, theirs] = await Promise.all([heavyQuery, query(sibling), query(stranger.productId, stranger.token)])
    expect(first.status).toBe(200)
    expect(second.status).toBe(429)
    expect(second.body).toMatchObject({ error: 'too_many_queries', scope: 'organization', limit: 1 })
    expect(second.headers.get('retry-after')).toBe('1')
    expect(theirs.status).toBe(200)
    expect((await query(sibling)).status).toBe(200) // freed when done
  }, 60_000)

  test('a worker runs at most ANALYTICS_MAX_CONCURRENT_PER_WORKER at once, whatever the organizations: beyond, 429 scope worker', async () => {
    const stranger = await newProduct()
    const query = (productId: string, token: string, body: unknown = METRIC) => over(single, token, 'POST', '/analytics/query', body, productId)
    const heavyQuery = query(owner.productId, owner.token, heavy)
    await heavyRunning(heavyQuery)
    const [first, theirs] = await Promise.all([heavyQuery, query(stranger.productId, stranger.token)])
    expect(first.status).toBe(200)
    expect(theirs.status).toBe(429)
    expect(theirs.body).toMatchObject({ error: 'too_many_queries', scope: 'worker', limit: 1 })
    expect(theirs.headers.get('retry-after')).toBe('1')
    expect((await query(stranger.productId, stranger.token)).status).toBe(200) // freed when done
  }, 60_000)
})
