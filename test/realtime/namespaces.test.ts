// Realtime control plane on the platform API: namespaces, grants (and allowedOps), payload storage.
import { describe, expect, test } from 'bun:test'
import { Client as S3 } from 'minio'
import { config } from '../../shared/config'
import { sql } from '../../shared/db/client'
import { publishInvalidation } from '../../shared/cache/invalidation'
import type { Op } from '../../shared/realtime/names'
import { allowedOps } from '../../shared/realtime/grants'
import { call, expectError, failingFields, newPlatformKey, newProduct, newUser, ok, recordInvalidations } from '../helpers'

type Owner = { token: string; productId: string }
const as = (owner: Owner, extra: Record<string, unknown> = {}) => ({ token: owner.token, productId: owner.productId, ...extra })

async function createNamespace(owner: Owner, body: Record<string, unknown>) {
  const result = await call('POST', '/realtime/namespaces', as(owner, { body }))
  expect({ status: result.status, body: result.body }).toMatchObject({ status: 200 })
  return result.body
}

async function createGrant(owner: Owner, pattern: string, ops: string[]) {
  const result = await call('POST', '/realtime/grants', as(owner, { body: { pattern, ops } }))
  expect({ status: result.status, body: result.body }).toMatchObject({ status: 200 })
  return result.body
}

// Every invalidation published while this file runs; tests wait for the ones they caused.
const heard = recordInvalidations()

/**
 * Where the next test's messages start in `heard`: publishes a sentinel on the same Redis connection the api uses and
 * waits for it, so every message published before (delivered in order) has arrived and is not counted again.
 */
async function mark(): Promise<number> {
  const sentinel = { kind: 'namespaces' as const, productId: crypto.randomUUID() }
  await publishInvalidation(sentinel)
  const deadline = Date.now() + 3000
  while (!heard.some((m) => m.kind === 'namespaces' && m.productId === sentinel.productId) && Date.now() < deadline) await Bun.sleep(5)
  return heard.length
}

/** Waits until `count` invalidations of this kind for the product have arrived since `from` (an index into `heard`). */
async function expectAnnounced(kind: 'namespaces' | 'payload_storage', productId: string, from: number, count = 1) {
  const matching = () => heard.slice(from).filter((m) => m.kind === kind && 'productId' in m && m.productId === productId)
  const deadline = Date.now() + 3000
  while (matching().length < count && Date.now() < deadline) await Bun.sleep(10)
  expect(matching()).toEqual(Array(count).fill({ kind, productId }))
}

describe('namespaces', () => {
  test('create with defaults: no presence, no client events, no history, no archive', async () => {
    const owner = await newProduct()
    const created = await createNamespace(owner, { name: 'chat' })
    expect(created).toEqual({
      id: expect.any(String), name: 'chat', presence: false, clientEvents: false, history: null, archive: null,
      createdAt: expect.any(String), updatedAt: created.createdAt,
    })
    expect(await call('GET', '/realtime/namespaces/chat', as(owner))).toMatchObject({ status: 200, body: created })
  })

  test('create with a full policy stores every field', async () => {
    const owner = await newProduct()
    const body = { name: 'Game.room-1_x', presence: true, clientEvents: true, history: { ttlSeconds: 2_592_000, size: 10_000 }, archive: { retentionDays: 3650 } }
    const created = await createNamespace(owner, body)
    expect(created).toMatchObject(body)
    const [row] = await sql`select * from realtime_namespaces where id = ${created.id}`
    expect(row).toMatchObject({ product_id: owner.productId, presence: true, client_events: true, history_ttl_seconds: 2_592_000, history_size: 10_000, archive_days: 3650 })
    const explicitNulls = await createNamespace(owner, { name: 'plain', history: null, archive: null })
    expect(explicitNulls).toMatchObject({ history: null, archive: null })
  })

  test('list is by name and holds only this product\'s namespaces', async () => {
    const owner = await newProduct()
    const other = await newProduct()
    for (const name of ['zeta', 'Alpha', 'beta', 'alpha']) await createNamespace(owner, { name })
    await createNamespace(other, { name: 'other-only' })
    const list = await call('GET', '/realtime/namespaces', as(owner))
    expect(list.status).toBe(200)
    expect(list.body.namespaces.map((n: any) => n.name)).toEqual(['Alpha', 'alpha', 'beta', 'zeta'])
    expect(Object.keys(list.body.namespaces[0]).sort()).toEqual(['archive', 'clientEvents', 'createdAt', 'history', 'id', 'name', 'presence', 'updatedAt'])
  })

  test('a duplicate name in the product is a 409 naming /body/name; the same name in another product is fine', async () => {
    const owner = await newProduct()
    const other = await newProduct()
    await createNamespace(owner, { name: 'chat' })
    const again = await call('POST', '/realtime/namespaces', as(owner, { body: { name: 'chat', presence: true } }))
    expectError(again, 409, 'conflict')
    expect(again.body.fields).toEqual([{ path: '/body/name', message: 'already exists' }])
    await createNamespace(other, { name: 'chat' })
    expect((await call('GET', '/realtime/namespaces/chat', as(owner))).body.presence).toBe(false)
  })

  test('bad input is a 400 naming the field', async () => {
    const owner = await newProduct()
    const post = (body: unknown) => call('POST', '/realtime/namespaces', as(owner, { body }))
    expect(failingFields(await post({}))).toEqual(['/body/name'])
    expect(failingFields(await post({ name: 'a:b' }))).toEqual(['/body/name'])
    expect(failingFields(await post({ name: '' }))).toEqual(['/body/name'])
    expect(failingFields(await post({ name: 'x'.repeat(65) }))).toEqual(['/body/name'])
    expect(failingFields(await post({ name: 'sp ace' }))).toEqual(['/body/name'])
    expect(failingFields(await post({ name: 'ok', presence: 'yes' }))).toEqual(['/body/presence'])
    expect(failingFields(await post({ name: 'ok', clientEvents: 1 }))).toEqual(['/body/clientEvents'])
    expect(failingFields(await post({ name: 'ok', history: { ttlSeconds: 0, size: 1 } }))).toContain('/body/history/ttlSeconds')
    expect(failingFields(await post({ name: 'ok', history: { ttlSeconds: 2_592_001, size: 1 } }))).toContain('/body/history/ttlSeconds')
    expect(failingFields(await post({ name: 'ok', history: { ttlSeconds: 60, size: 10_001 } }))).toContain('/body/history/size')
    expect(failingFields(await post({ name: 'ok', history: { ttlSeconds: 60.5, size: 10 } }))).toContain('/body/history/ttlSeconds')
    expect(failingFields(await post({ name: 'ok', history: { ttlSeconds: 60 } }))).toContain('/body/history/size')
    expect(failingFields(await post({ name: 'ok', history: true }))).toContain('/body/history')
    expect(failingFields(await post({ name: 'ok', archive: { retentionDays: 3651 } }))).toContain('/body/archive/retentionDays')
    expect(failingFields(await post({ name: 'ok', archive: { retentionDays: 0 } }))).toContain('/body/archive/retentionDays')
    expect(failingFields(await post({ name: 'ok', webhooks: [] }))).toEqual(['/body/webhooks'])
    expect(failingFields(await call('GET', '/realtime/namespaces/a:b', as(owner)))).toEqual(['/path/name'])
    expect((await call('GET', '/realtime/namespaces', as(owner))).body.namespaces).toEqual([])
  })

  test('update changes only the supplied fields; an empty body changes nothing', async () => {
    const owner = await newProduct()
    const created = await createNamespace(owner, { name: 'feed', presence: true, history: { ttlSeconds: 600, size: 100 }, archive: { retentionDays: 30 } })
    const patch = (body: unknown) => call('PATCH', '/realtime/namespaces/feed', as(owner, { body }))
    const unchanged = await patch({})
    expect(unchanged).toMatchObject({ status: 200, body: created })
    const updated = await patch({ clientEvents: true })
    expect(updated.status).toBe(200)
    expect(updated.body).toEqual({ ...created, clientEvents: true, updatedAt: expect.any(String) })
    expect(Date.parse(updated.body.updatedAt)).toBeGreaterThan(Date.parse(created.updatedAt))
    const noHistory = await patch({ history: null, presence: false })
    expect(noHistory.body).toMatchObject({ presence: false, clientEvents: true, history: null, archive: { retentionDays: 30 } })
    const [row] = await sql`select history_ttl_seconds, history_size from realtime_namespaces where id = ${created.id}`
    expect(row).toEqual({ history_ttl_seconds: 0, history_size: 0 })
    const again = await patch({ history: { ttlSeconds: 5, size: 1 }, archive: null })
    expect(again.body).toMatchObject({ history: { ttlSeconds: 5, size: 1 }, archive: null })
    expect((await call('GET', '/realtime/namespaces/feed', as(owner))).body).toEqual(again.body)
  })

  test('update refuses a new name and bad values (400 naming the field); an unknown namespace is 404', async () => {
    const owner = await newProduct()
    await createNamespace(owner, { name: 'feed' })
    const patch = (name: string, body: unknown) => call('PATCH', `/realtime/namespaces/${name}`, as(owner, { body }))
    expect(failingFields(await patch('feed', { name: 'renamed' }))).toEqual(['/body/name'])
    expect(failingFields(await patch('feed', { presence: null }))).toEqual(['/body/presence'])
    expect(failingFields(await patch('feed', { history: { ttlSeconds: 10, size: 0 } }))).toContain('/body/history/size')
    expect(failingFields(await patch('feed', { archive: { retentionDays: 10, extra: 1 } }))).toContain('/body/archive/extra')
    expect(failingFields(await patch('fe:ed', { presence: true }))).toEqual(['/path/name'])
    expectError(await patch('missing', { presence: true }), 404, 'not_found')
    expectError(await patch('missing', {}), 404, 'not_found')
    expect((await call('GET', '/realtime/namespaces/feed', as(owner))).body.presence).toBe(false)
  })

  test('delete removes the namespace and its grants; then it is 404', async () => {
    const owner = await newProduct()
    await createNamespace(owner, { name: 'gone' })
    await createNamespace(owner, { name: 'kept' })
    const grant = await createGrant(owner, 'gone:*', ['subscribe'])
    await createGrant(owner, 'kept:*', ['subscribe'])
    const deleted = await call('DELETE', '/realtime/namespaces/gone', as(owner))
    expect(deleted).toMatchObject({ status: 200, body: { name: 'gone', deleted: true } })
    expectError(await call('GET', '/realtime/namespaces/gone', as(owner)), 404, 'not_found')
    expectError(await call('DELETE', '/realtime/namespaces/gone', as(owner)), 404, 'not_found')
    expect((await call('GET', '/realtime/grants', as(owner))).body.grants.map((g: any) => g.pattern)).toEqual(['kept:*'])
    expectError(await call('DELETE', `/realtime/grants/${grant.id}`, as(owner)), 404, 'not_found')
    const [row] = await sql`select count(*)::int as n from realtime_grants where id = ${grant.id}`
    expect(row!.n).toBe(0)
  })

  test('create, update, delete each announce the product\'s namespaces to every worker', async () => {
    const owner = await newProduct()
    const from = await mark()
    await createNamespace(owner, { name: 'n1' })
    ok(await call('PATCH', '/realtime/namespaces/n1', as(owner, { body: { presence: true } })), 'update namespace')
    ok(await call('DELETE', '/realtime/namespaces/n1', as(owner)), 'delete namespace')
    await expectAnnounced('namespaces', owner.productId, from, 3)
  })
})

describe('who may manage namespaces', () => {
  test('a platform key with the Realtime area acts on its own product; without it, 403', async () => {
    const owner = await newProduct()
    const realtimeKey = await newPlatformKey(owner, ['realtime'])
    const mailKey = await newPlatformKey(owner, ['mail', 'organization'])
    const created = await call('POST', '/realtime/namespaces', { token: realtimeKey.key, body: { name: 'by-key' } })
    expect(created.status).toBe(200)
    expect((await call('GET', '/realtime/namespaces', as(owner))).body.namespaces.map((n: any) => n.name)).toEqual(['by-key'])
    expect((await call('GET', '/realtime/namespaces/by-key', { token: realtimeKey.key })).body.id).toBe(created.body.id)
    expectError(await call('GET', '/realtime/namespaces', { token: mailKey.key }), 403, 'forbidden')
    expectError(await call('POST', '/realtime/namespaces', { token: mailKey.key, body: { name: 'nope' } }), 403, 'forbidden')
    expectError(await call('PUT', '/realtime/payload-storage', { token: mailKey.key, body: {} }), 403, 'forbidden')
    expectError(await call('POST', '/realtime/grants', { token: mailKey.key, body: { pattern: 'by-key:*', ops: ['subscribe'] } }), 403, 'forbidden')
  })

  test("another product's namespaces and grants are 404 to a stranger, a member of another product, and its platform key", async () => {
    const owner = await newProduct()
    const other = await newProduct()
    const stranger = await newUser()
    const otherKey = await newPlatformKey(other, ['realtime'])
    await createNamespace(owner, { name: 'private' })
    const grant = await createGrant(owner, 'private:*', ['subscribe'])
    // A session naming a product it does not belong to, and a platform key naming another product.
    for (const options of [{ token: stranger.token, productId: owner.productId }, { token: otherKey.key, productId: owner.productId }]) {
      expectError(await call('GET', '/realtime/namespaces', options), 404, 'not_found')
      expectError(await call('GET', '/realtime/namespaces/private', options), 404, 'not_found')
      expectError(await call('DELETE', `/realtime/grants/${grant.id}`, options), 404, 'not_found')
    }
    // The other product acting on its own product cannot see or touch this product's resources.
    for (const options of [as(other), { token: otherKey.key }]) {
      expectError(await call('GET', '/realtime/namespaces/private', options), 404, 'not_found')
      expectError(await call('PATCH', '/realtime/namespaces/private', { ...options, body: { presence: true } }), 404, 'not_found')
      expectError(await call('DELETE', '/realtime/namespaces/private', options), 404, 'not_found')
      expectError(await call('DELETE', `/realtime/grants/${grant.id}`, options), 404, 'not_found')
      expect((await call('GET', '/realtime/grants', options)).body.grants).toEqual([])
    }
    expect((await call('GET', '/realtime/namespaces/private', as(owner))).body.presence).toBe(false)
    expect((await call('GET', '/realtime/grants', as(owner))).body.grants.map((g: any) => g.id)).toEqual([grant.id])
  })

  test('a session without X-Product-Id is a 400 naming the header; no token is 401', async () => {
    const owner = await newProduct()
    const result = await call('GET', '/realtime/namespaces', { token: owner.token })
    expect(failingFields(result)).toEqual(['/header/X-Product-Id'])
    expectError(await call('GET', '/realtime/namespaces', { productId: owner.productId }), 401, 'unauthorized')
  })
})

describe('grants', () => {
  test('create returns the grant with its namespace and ops deduplicated in catalog order', async () => {
    const owner = await newProduct()
    await createNamespace(owner, { name: 'chat' })
    const grant = await createGrant(owner, 'chat:room:*', ['history', 'subscribe'])
    expect(grant).toEqual({ id: expect.any(String), pattern: 'chat:room:*', namespace: 'chat', ops: ['subscribe', 'history'], createdAt: expect.any(String) })
    const [row] = await sql`select g.product_id, g.ops, n.name from realtime_grants g join realtime_namespaces n on n.id = g.namespace_id where g.id = ${grant.id}`
    expect(row).toEqual({ product_id: owner.productId, ops: ['subscribe', 'history'], name: 'chat' })
  })

  test("a pattern whose namespace is not registered in the product is 422 naming /body/pattern", async () => {
    const owner = await newProduct()
    const other = await newProduct()
    await createNamespace(other, { name: 'theirs' })
    for (const pattern of ['missing:*', 'theirs:*']) {
      const result = await call('POST', '/realtime/grants', as(owner, { body: { pattern, ops: ['subscribe'] } }))
      expectError(result, 422, 'unprocessable')
      expect(result.body.fields.map((f: any) => f.path)).toEqual(['/body/pattern'])
    }
    const [row] = await sql`select count(*)::int as n from realtime_grants where product_id = ${owner.productId}`
    expect(row!.n).toBe(0)
  })

  test('a duplicate pattern is 409 naming /body/pattern', async () => {
    const owner = await newProduct()
    await createNamespace(owner, { name: 'chat' })
    await createGrant(owner, 'chat:*', ['subscribe'])
    const again = await call('POST', '/realtime/grants', as(owner, { body: { pattern: 'chat:*', ops: ['publish'] } }))
    expectError(again, 409, 'conflict')
    expect(again.body.fields).toEqual([{ path: '/body/pattern', message: 'already exists' }])
  })

  test('bad input is a 400 naming the field', async () => {
    const owner = await newProduct()
    await createNamespace(owner, { name: 'chat' })
    const post = (body: unknown) => call('POST', '/realtime/grants', as(owner, { body }))
    expect(failingFields(await post({}))).toEqual(['/body/pattern', '/body/ops'])
    for (const pattern of ['chat', '*:room', 'chat:ro*m', 'chat:**', 'chat::x', 'chat:a:b:c:d:e:f:g:h', 'ch at:x', '']) {
      expect({ pattern, fields: failingFields(await post({ pattern, ops: ['subscribe'] })) }).toEqual({ pattern, fields: ['/body/pattern'] })
    }
    expect(failingFields(await post({ pattern: 'chat:*', ops: [] }))).toContain('/body/ops')
    expect(failingFields(await post({ pattern: 'chat:*', ops: ['subscribe', 'subscribe'] }))).toContain('/body/ops')
    expect(failingFields(await post({ pattern: 'chat:*', ops: ['admin'] }))).toContain('/body/ops/0')
    expect(failingFields(await post({ pattern: 'chat:*', ops: ['subscribe', 'publish', 'presence', 'history', 'subscribe'] }))).toContain('/body/ops')
    expect(failingFields(await call('DELETE', '/realtime/grants/not-a-uuid', as(owner)))).toEqual(['/path/grantId'])
    expect(failingFields(await call('GET', '/realtime/grants?namespace=a:b', as(owner)))).toEqual(['/query/namespace'])
    // Seven segments after the namespace is the most a pattern may have.
    await createGrant(owner, 'chat:a:b:c:d:e:f:*', ['subscribe', 'publish', 'presence', 'history'])
  })

  test('list by pattern, optionally of one namespace; delete returns {id, deleted} and then 404', async () => {
    const owner = await newProduct()
    await createNamespace(owner, { name: 'chat' })
    await createNamespace(owner, { name: 'alerts' })
    const b = await createGrant(owner, 'chat:room:*', ['subscribe'])
    const a = await createGrant(owner, 'alerts:*', ['subscribe', 'history'])
    const c = await createGrant(owner, 'chat:*', ['publish'])
    const all = await call('GET', '/realtime/grants', as(owner))
    expect(all.body).toEqual({ grants: [a, c, b], has_more: false })
    const chat = await call('GET', '/realtime/grants?namespace=chat', as(owner))
    expect(chat.body.grants.map((g: any) => g.id)).toEqual([c.id, b.id])
    expect((await call('GET', '/realtime/grants?namespace=unknown', as(owner))).body).toEqual({ grants: [], has_more: false })
    expect(await call('DELETE', `/realtime/grants/${c.id}`, as(owner))).toMatchObject({ status: 200, body: { id: c.id, deleted: true } })
    expectError(await call('DELETE', `/realtime/grants/${c.id}`, as(owner)), 404, 'not_found')
    expectError(await call('DELETE', `/realtime/grants/${crypto.randomUUID()}`, as(owner)), 404, 'not_found')
    expect((await call('GET', '/realtime/grants?namespace=chat', as(owner))).body.grants.map((g: any) => g.id)).toEqual([b.id])
  })

  test("create and delete announce the product's namespaces", async () => {
    const owner = await newProduct()
    await createNamespace(owner, { name: 'chat' })
    const from = await mark()
    const grant = await createGrant(owner, 'chat:*', ['subscribe'])
    ok(await call('DELETE', `/realtime/grants/${grant.id}`, as(owner)), 'delete grant')
    await expectAnnounced('namespaces', owner.productId, from, 2)
  })
})

describe('allowedOps', () => {
  const open = { presence: true, clientEvents: true, history: { ttlSeconds: 60, size: 10 } }
  const closed = { presence: false, clientEvents: false, history: null }

  test('without grants, the namespace policy alone decides; subscribe is always allowed', () => {
    expect(allowedOps(open, [], 'chat:room')).toEqual(['subscribe', 'publish', 'presence', 'history'])
    expect(allowedOps(closed, [], 'chat:room')).toEqual(['subscribe'])
    expect(allowedOps({ ...closed, presence: true }, [], 'chat:room')).toEqual(['subscribe', 'presence'])
    expect(allowedOps({ ...closed, clientEvents: true }, [], 'chat:room')).toEqual(['subscribe', 'publish'])
    expect(allowedOps({ ...closed, history: { ttlSeconds: 1, size: 1 } }, [], 'chat:room')).toEqual(['subscribe', 'history'])
    expect(allowedOps({ ...open, history: { ttlSeconds: 0, size: 0 } }, [], 'chat:room')).toEqual(['subscribe', 'publish', 'presence'])
  })

  test('with grants, an operation needs a matching grant listing it', () => {
    const grants: { pattern: string; ops: Op[] }[] = [
      { pattern: 'chat:room:*', ops: ['subscribe', 'presence'] },
      { pattern: 'chat:room:lobby', ops: ['publish'] },
      { pattern: 'chat:*', ops: ['history'] },
    ]
    expect(allowedOps(open, grants, 'chat:room:42')).toEqual(['subscribe', 'presence'])
    expect(allowedOps(open, grants, 'chat:room:lobby')).toEqual(['subscribe', 'publish', 'presence'])
    expect(allowedOps(open, grants, 'chat:general')).toEqual(['history'])
    // `*` is exactly one segment: "chat:room:*" matches neither fewer nor more segments ("chat:*" still matches chat:room).
    expect(allowedOps(open, grants, 'chat:room')).toEqual(['history'])
    expect(allowedOps(open, grants, 'chat:room:42:x')).toEqual([])
    expect(allowedOps(open, grants.slice(0, 2), 'chat:room')).toEqual([])
    expect(allowedOps(open, grants, 'chat:room:')).toEqual(['subscribe', 'presence'])
  })

  test('grants never widen the policy', () => {
    const everything: { pattern: string; ops: Op[] }[] = [{ pattern: 'chat:*', ops: ['subscribe', 'publish', 'presence', 'history'] }]
    expect(allowedOps(closed, everything, 'chat:x')).toEqual(['subscribe'])
    expect(allowedOps({ ...closed, presence: true }, everything, 'chat:x')).toEqual(['subscribe', 'presence'])
    expect(allowedOps(closed, [{ pattern: 'chat:*', ops: ['publish'] }], 'chat:x')).toEqual([])
  })

  test("only the channel's own namespace's grants count; a namespace without grants is unrestricted", () => {
    const grants: { pattern: string; ops: Op[] }[] = [{ pattern: 'other:*', ops: ['subscribe'] }, { pattern: 'chatter:*', ops: ['subscribe'] }]
    expect(allowedOps(open, grants, 'chat:x')).toEqual(['subscribe', 'publish', 'presence', 'history'])
    expect(allowedOps(open, grants, 'other:x')).toEqual(['subscribe'])
    expect(allowedOps(open, grants, 'other:x:y')).toEqual([])
    // Segments compare exactly: a grant on "chat" does not reach "chatter", nor one on "chat:a" reach "chat:ab".
    expect(allowedOps(open, [{ pattern: 'chat:a', ops: ['subscribe'] }], 'chat:ab')).toEqual([])
    expect(allowedOps(open, [{ pattern: 'chat:a', ops: ['subscribe'] }], 'chat:a')).toEqual(['subscribe'])
  })

  test('a name without a namespace segment gets nothing; the inputs are not changed', () => {
    const grants: { pattern: string; ops: Op[] }[] = [{ pattern: 'chat:*', ops: ['history', 'subscribe'] }]
    const policy = { ...open }
    expect(allowedOps(policy, [], 'nochannel')).toEqual([])
    expect(allowedOps(policy, grants, 'chat:x')).toEqual(['subscribe', 'history'])
    expect(grants).toEqual([{ pattern: 'chat:*', ops: ['history', 'subscribe'] }])
    expect(policy).toEqual(open)
  })
})

describe('payload storage', () => {
  const s3 = (() => {
    const url = new URL(config.s3Url)
    return new S3({
      endPoint: url.hostname, port: Number(url.port || (url.protocol === 'https:' ? 443 : 80)), useSSL: url.protocol === 'https:',
      accessKey: decodeURIComponent(url.username), secretKey: decodeURIComponent(url.password), region: config.s3Region, pathStyle: true,
    })
  })()
  const uniqueBucket = () => `rt-test-${crypto.randomUUID().slice(0, 13)}`
  /** Offers a bucket the way a deployment does with REALTIME_PAYLOAD_BUCKETS (config is read at call time). */
  const allowBucket = (bucket: string) => (config.realtime.payloadBucketsAllowed.push(bucket), bucket)

  test('not provisioned at first; provisioning creates the default bucket, and is idempotent', async () => {
    const owner = await newProduct()
    expect(await call('GET', '/realtime/payload-storage', as(owner))).toMatchObject({ status: 200, body: { provisioned: false, bucket: null, createdAt: null } })
    const first = await call('PUT', '/realtime/payload-storage', as(owner, { body: {} }))
    expect(first.body).toEqual({ provisioned: true, bucket: config.realtime.payloadBucket, createdAt: expect.any(String) })
    expect(await s3.bucketExists(config.realtime.payloadBucket)).toBe(true)
    const second = await call('PUT', '/realtime/payload-storage', as(owner, { body: { bucket: config.realtime.payloadBucket } }))
    expect(second.body).toEqual(first.body)
    expect((await call('GET', '/realtime/payload-storage', as(owner))).body).toEqual(first.body)
  })

  test('a named bucket is created when missing; moving to another bucket resets createdAt', async () => {
    const owner = await newProduct()
    const bucket = allowBucket(uniqueBucket())
    expect(await s3.bucketExists(bucket)).toBe(false)
    const provisioned = await call('PUT', '/realtime/payload-storage', as(owner, { body: { bucket } }))
    expect(provisioned).toMatchObject({ status: 200, body: { provisioned: true, bucket } })
    expect(await s3.bucketExists(bucket)).toBe(true)
    const [row] = await sql`select bucket from realtime_payload_storage where product_id = ${owner.productId}`
    expect(row!.bucket).toBe(bucket)
    const moved = await call('PUT', '/realtime/payload-storage', as(owner, { body: { bucket: config.realtime.payloadBucket } }))
    expect(moved.body.bucket).toBe(config.realtime.payloadBucket)
    expect(Date.parse(moved.body.createdAt)).toBeGreaterThan(Date.parse(provisioned.body.createdAt))
  })

  test("a bucket the platform does not offer is refused (422 naming the field), never created, and nothing changes", async () => {
    const owner = await newProduct()
    ok(await call('PUT', '/realtime/payload-storage', as(owner, { body: {} })), 'provision payload storage')
    const before = ok(await call('GET', '/realtime/payload-storage', as(owner)), 'get payload storage').body
    const foreign = uniqueBucket() // e.g. another tenant's bucket, reachable with the platform's credentials
    const refused = await call('PUT', '/realtime/payload-storage', as(owner, { body: { bucket: foreign } }))
    expect(refused.status).toBe(422)
    expect(refused.body.fields).toEqual([{ path: '/body/bucket', message: expect.stringContaining(config.realtime.payloadBucket) }])
    expect(await s3.bucketExists(foreign)).toBe(false)
    expect((await call('GET', '/realtime/payload-storage', as(owner))).body).toEqual(before)
  })

  test('delete forgets the storage but keeps the bucket and its objects; it is idempotent', async () => {
    const owner = await newProduct()
    const bucket = allowBucket(uniqueBucket())
    ok(await call('PUT', '/realtime/payload-storage', as(owner, { body: { bucket } })), 'provision payload storage')
    await s3.putObject(bucket, 'kept.json', Buffer.from('{"kept":true}'))
    expect(await call('DELETE', '/realtime/payload-storage', as(owner))).toMatchObject({ status: 200, body: { provisioned: false } })
    expect((await call('GET', '/realtime/payload-storage', as(owner))).body).toEqual({ provisioned: false, bucket: null, createdAt: null })
    expect((await s3.statObject(bucket, 'kept.json')).size).toBe(13)
    expect(await call('DELETE', '/realtime/payload-storage', as(owner))).toMatchObject({ status: 200, body: { provisioned: false } })
  })

  test("each product has its own: one product's provisioning is invisible to another", async () => {
    const owner = await newProduct()
    const other = await newProduct()
    ok(await call('PUT', '/realtime/payload-storage', as(owner, { body: {} })), 'provision payload storage')
    expect((await call('GET', '/realtime/payload-storage', as(other))).body.provisioned).toBe(false)
    ok(await call('DELETE', '/realtime/payload-storage', as(other)), 'delete the other product\'s payload storage')
    expect((await call('GET', '/realtime/payload-storage', as(owner))).body.provisioned).toBe(true)
  })

  test('a bad bucket name is a 400 naming /body/bucket and creates nothing', async () => {
    const owner = await newProduct()
    for (const bucket of ['ab', 'A-bucket', '-abc', 'abc-', 'a_b_c', 'x'.repeat(64), 'has space', '', 'a..b', '192.168.1.1', 'x-10.0.0.1-y']) {
      const result = await call('PUT', '/realtime/payload-storage', as(owner, { body: { bucket } }))
      expect({ bucket, fields: failingFields(result) }).toEqual({ bucket, fields: ['/body/bucket'] })
    }
    expect(failingFields(await call('PUT', '/realtime/payload-storage', as(owner, { body: { region: 'eu' } })))).toEqual(['/body/region'])
    expect((await call('GET', '/realtime/payload-storage', as(owner))).body.provisioned).toBe(false)
  })

  test('provision and delete announce the product\'s payload storage', async () => {
    const owner = await newProduct()
    const from = await mark()
    ok(await call('PUT', '/realtime/payload-storage', as(owner, { body: {} })), 'provision payload storage')
    ok(await call('DELETE', '/realtime/payload-storage', as(owner)), 'delete payload storage')
    await expectAnnounced('payload_storage', owner.productId, from, 2)
  })
})
