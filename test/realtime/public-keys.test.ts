// Realtime product API keys (rtk_) on the platform API: owner's login only, per environment, revocation announced.
import { describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { config } from '../../shared/config'
import { sql } from '../../shared/db/client'
import { onInvalidation, type Invalidation } from '../../shared/cache/invalidation'
import { PUBLIC_SCOPES, publicKeyHash } from '../../shared/realtime/public-keys'
import { isKeyRevoked } from '../../shared/realtime/revocations'
import { call, expectError, failingFields, newPlatformKey, newProduct, newUser, ok, recordInvalidations } from '../helpers'

const keysPath = (productId: string) => `/governance/api/v1/products/${productId}/public-keys`

async function createKey(owner: { token: string; productId: string }, body: Record<string, unknown> = { name: 'backend' }) {
  const result = await call('POST', keysPath(owner.productId), { token: owner.token, body })
  expect(result.status).toBe(200)
  return result.body as { id: string; name: string; scope: string[]; prefix: string; key: string; environment: string; createdAt: string }
}

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex')

// Every invalidation published while this file runs; tests wait for the ones they caused.
const heard = recordInvalidations()

/**
 * Reads the key's row the moment its invalidation arrives, as a worker dropping its cache would: the change must already
 * be committed by then, or the worker would reload the old state.
 */
async function rowSeenOnInvalidation(digest: string): Promise<() => Promise<Record<string, unknown> | undefined>> {
  let seen: Promise<Record<string, unknown> | undefined> | undefined
  const stop = await onInvalidation((m) => {
    if (m.kind === 'public_key' && m.keyHash === digest && !seen) {
      seen = sql`select scope, revoked_at from public_keys where key_hash = ${Buffer.from(digest, 'hex')}`.then((rows) => rows[0])
    }
  })
  return async () => {
    const deadline = Date.now() + 3000
    while (!seen && Date.now() < deadline) await Bun.sleep(5)
    await stop()
    return seen
  }
}

async function waitForInvalidation(match: (m: Invalidation) => boolean): Promise<Invalidation | undefined> {
  const deadline = Date.now() + 3000
  while (Date.now() < deadline) {
    const found = heard.find(match)
    if (found) return found
    await Bun.sleep(10)
  }
  return undefined
}

describe('create', () => {
  test('returns the secret once with all scopes by default; only a digest of key + environment is stored', async () => {
    const owner = await newProduct()
    const created = await createKey(owner)
    expect(created).toEqual({
      id: expect.any(String), name: 'backend', scope: [...PUBLIC_SCOPES], prefix: created.key.slice(0, 10), key: expect.any(String),
      environment: config.environment, createdAt: expect.any(String),
    })
    expect(created.key).toMatch(/^rtk_[A-Za-z0-9_-]{43}$/)
    expect(created.prefix).toMatch(/^rtk_[A-Za-z0-9_-]{6}$/)
    const [row] = await sql`select * from public_keys where id = ${created.id}`
    expect(hex(row!.key_hash)).toBe(hex(publicKeyHash(created.key, config.environment)))
    expect(hex(row!.key_hash)).not.toBe(hex(publicKeyHash(created.key, config.environment + '-other')))
    expect(row).toMatchObject({ product_id: owner.productId, environment: config.environment, prefix: created.prefix, created_by: owner.userId, revoked_at: null })
    expect(JSON.stringify(Object.values(row!).map(String))).not.toContain(created.key.slice(10))
  })

  test('two keys never share a secret', async () => {
    const owner = await newProduct()
    const a = await createKey(owner)
    const b = await createKey(owner)
    expect(a.key).not.toBe(b.key)
    expect(a.id).not.toBe(b.id)
  })

  test('a given scope is stored deduplicated in catalog order', async () => {
    const owner = await newProduct()
    const created = await createKey(owner, { name: 'issuer', scope: ['history:read', 'tokens:issue'] })
    expect(created.scope).toEqual(['tokens:issue', 'history:read'])
    const [row] = await sql`select scope from public_keys where id = ${created.id}`
    expect(row!.scope).toEqual(['tokens:issue', 'history:read'])
  })

  test('bad input is a 400 naming the field', async () => {
    const owner = await newProduct()
    const post = (body: unknown) => call('POST', keysPath(owner.productId), { token: owner.token, body })
    expect(failingFields(await post({}))).toEqual(['/body/name'])
    expect(failingFields(await post({ name: '' }))).toEqual(['/body/name'])
    expect(failingFields(await post({ name: 'x'.repeat(257) }))).toEqual(['/body/name'])
    expect(failingFields(await post({ name: 'ok', scope: [] }))).toContain('/body/scope')
    expect(failingFields(await post({ name: 'ok', scope: ['tokens:issue', 'tokens:issue'] }))).toContain('/body/scope')
    expect(failingFields(await post({ name: 'ok', scope: ['admin'] }))).toContain('/body/scope/0')
    expect(failingFields(await post({ name: 'ok', scope: 'tokens:issue' }))).toContain('/body/scope')
    expect(failingFields(await post({ name: 'ok', environment: 'production' }))).toEqual(['/body/environment'])
    expect(failingFields(await call('GET', keysPath('not-a-uuid'), { token: owner.token }))).toContain('/path/productId')
    expect((await post({ name: 'x'.repeat(256) })).status).toBe(200)
  })
})

describe('list', () => {
  test("active keys of this environment only, newest first, never a secret", async () => {
    const owner = await newProduct()
    const first = await createKey(owner, { name: 'first' })
    const second = await createKey(owner, { name: 'second', scope: ['messages:publish'] })
    const revoked = await createKey(owner, { name: 'revoked' })
    expect((await call('DELETE', `${keysPath(owner.productId)}/${revoked.id}`, { token: owner.token })).status).toBe(200)
    const list = await call('GET', keysPath(owner.productId), { token: owner.token })
    expect(list.status).toBe(200)
    expect(list.body).toEqual({
      keys: [
        { id: second.id, name: 'second', scope: ['messages:publish'], prefix: second.prefix, environment: config.environment, createdAt: second.createdAt, updatedAt: expect.any(String) },
        { id: first.id, name: 'first', scope: [...PUBLIC_SCOPES], prefix: first.prefix, environment: config.environment, createdAt: first.createdAt, updatedAt: expect.any(String) },
      ],
      has_more: false,
    })
    const text = JSON.stringify(list.body)
    for (const key of [first, second, revoked]) expect(text).not.toContain(key.key)
  })

  test("another environment's key is invisible here: not listed, and revoke and update-scope are 404", async () => {
    const owner = await newProduct()
    const mine = await createKey(owner)
    const elsewhere = 'rtk_' + randomBytes(32).toString('base64url')
    const [row] = await sql`
      insert into public_keys (product_id, environment, name, scope, prefix, key_hash)
      values (${owner.productId}, 'staging-elsewhere', 'other env', ${[...PUBLIC_SCOPES]}, ${elsewhere.slice(0, 10)},
              ${publicKeyHash(elsewhere, 'staging-elsewhere')})
      returning id`
    const list = await call('GET', keysPath(owner.productId), { token: owner.token })
    expect(list.body.keys.map((k: any) => k.id)).toEqual([mine.id])
    expectError(await call('DELETE', `${keysPath(owner.productId)}/${row!.id}`, { token: owner.token }), 404, 'not_found')
    expectError(await call('PUT', `${keysPath(owner.productId)}/${row!.id}/scope`, { token: owner.token, body: { scope: ['channels:read'] } }), 404, 'not_found')
    const [after] = await sql`select revoked_at, scope from public_keys where id = ${row!.id}`
    expect(after).toEqual({ revoked_at: null, scope: [...PUBLIC_SCOPES] })
  })
})

describe('revoke', () => {
  test('revokes at once, announces the key digest to every worker, and a second revoke is 404', async () => {
    const owner = await newProduct()
    const created = await createKey(owner)
    const digest = hex(publicKeyHash(created.key, config.environment))
    const seenOnArrival = await rowSeenOnInvalidation(digest)
    const revoked = await call('DELETE', `${keysPath(owner.productId)}/${created.id}`, { token: owner.token })
    expect(revoked.status).toBe(200)
    expect(revoked.body).toEqual({ id: created.id, revoked: true })
    expect(await waitForInvalidation((m) => m.kind === 'public_key' && m.keyHash === digest)).toEqual({ kind: 'public_key', keyHash: digest, keyId: created.id, revoked: true })
    expect((await seenOnArrival())?.revoked_at).toBeInstanceOf(Date)
    // Tokens the key issued end with it: gateways ask PostgreSQL, the authority (test/security/revocation.test.ts).
    expect(await isKeyRevoked({ akid: created.id, pid: owner.productId })).toBe(true)
    const [row] = await sql`select revoked_at from public_keys where id = ${created.id}`
    expect(row!.revoked_at).toBeInstanceOf(Date)
    expect((await call('GET', keysPath(owner.productId), { token: owner.token })).body.keys).toEqual([])
    expectError(await call('DELETE', `${keysPath(owner.productId)}/${created.id}`, { token: owner.token }), 404, 'not_found')
  })

  test('unknown id is 404; a malformed id is a 400 naming it', async () => {
    const owner = await newProduct()
    expectError(await call('DELETE', `${keysPath(owner.productId)}/${crypto.randomUUID()}`, { token: owner.token }), 404, 'not_found')
    expect(failingFields(await call('DELETE', `${keysPath(owner.productId)}/nope`, { token: owner.token }))).toEqual(['/path/keyId'])
  })
})

describe('update scope', () => {
  test('replaces the scope, keeps the key (same digest, still active), and announces the change', async () => {
    const owner = await newProduct()
    const created = await createKey(owner)
    const digest = hex(publicKeyHash(created.key, config.environment))
    const seenOnArrival = await rowSeenOnInvalidation(digest)
    const updated = await call('PUT', `${keysPath(owner.productId)}/${created.id}/scope`, { token: owner.token, body: { scope: ['presence:read', 'tokens:issue'] } })
    expect(updated.status).toBe(200)
    expect(updated.body).toEqual({
      id: created.id, name: 'backend', scope: ['tokens:issue', 'presence:read'], prefix: created.prefix,
      environment: config.environment, createdAt: created.createdAt, updatedAt: expect.any(String),
    })
    expect(updated.body.key).toBeUndefined()
    expect(Date.parse(updated.body.updatedAt)).toBeGreaterThan(Date.parse(created.createdAt))
    expect(await waitForInvalidation((m) => m.kind === 'public_key' && m.keyHash === digest)).toBeDefined()
    expect(await isKeyRevoked({ akid: created.id, pid: owner.productId })).toBe(false) // a scope change leaves tokens the key issued valid
    expect((await seenOnArrival())?.scope).toEqual(['tokens:issue', 'presence:read'])
    const [row] = await sql`select scope, key_hash, revoked_at from public_keys where id = ${created.id}`
    expect(row!.scope).toEqual(['tokens:issue', 'presence:read'])
    expect(hex(row!.key_hash)).toBe(digest)
    expect(row!.revoked_at).toBeNull()
    const listed = (await call('GET', keysPath(owner.productId), { token: owner.token })).body.keys
    expect(listed[0].scope).toEqual(['tokens:issue', 'presence:read'])
  })

  test("a revoked key's scope cannot be changed (404); bad scope is a 400 naming the field", async () => {
    const owner = await newProduct()
    const created = await createKey(owner)
    const scopePath = `${keysPath(owner.productId)}/${created.id}/scope`
    expect(failingFields(await call('PUT', scopePath, { token: owner.token, body: {} }))).toEqual(['/body/scope'])
    expect(failingFields(await call('PUT', scopePath, { token: owner.token, body: { scope: [] } }))).toContain('/body/scope')
    expect(failingFields(await call('PUT', scopePath, { token: owner.token, body: { scope: ['channels:read', 'channels:read'] } }))).toContain('/body/scope')
    expect(failingFields(await call('PUT', scopePath, { token: owner.token, body: { scope: ['root'] } }))).toContain('/body/scope/0')
    expect(failingFields(await call('PUT', scopePath, { token: owner.token, body: { scope: ['channels:read'], name: 'x' } }))).toEqual(['/body/name'])
    ok(await call('DELETE', `${keysPath(owner.productId)}/${created.id}`, { token: owner.token }), 'revoke key')
    expectError(await call('PUT', scopePath, { token: owner.token, body: { scope: ['channels:read'] } }), 404, 'not_found')
    expectError(await call('PUT', `${keysPath(owner.productId)}/${crypto.randomUUID()}/scope`, { token: owner.token, body: { scope: ['channels:read'] } }), 404)
    const [row] = await sql`select scope from public_keys where id = ${created.id}`
    expect(row!.scope).toEqual([...PUBLIC_SCOPES])
  })
})

describe('who may manage keys', () => {
  test('a platform key, even with the Realtime area, is 403 on all four tools, and changes nothing', async () => {
    const owner = await newProduct()
    const publicKey = await createKey(owner)
    for (const areas of [['organization', 'realtime'], ['realtime']]) {
      const platformKey = await newPlatformKey(owner, areas)
      const as = { token: platformKey.key }
      expectError(await call('GET', keysPath(owner.productId), as), 403, 'forbidden')
      expectError(await call('POST', keysPath(owner.productId), { ...as, body: { name: 'sneaky' } }), 403, 'forbidden')
      expectError(await call('DELETE', `${keysPath(owner.productId)}/${publicKey.id}`, as), 403, 'forbidden')
      expectError(await call('PUT', `${keysPath(owner.productId)}/${publicKey.id}/scope`, { ...as, body: { scope: ['channels:read'] } }), 403, 'forbidden')
      // Nor itself: its own id on these routes is refused before any lookup.
      expectError(await call('DELETE', `${keysPath(owner.productId)}/${platformKey.id}`, as), 403, 'forbidden')
      expect((await call('GET', '/auth/me', as)).status).toBe(200)
    }
    const listed = await call('GET', keysPath(owner.productId), { token: owner.token })
    expect(listed.body.keys.map((k: any) => [k.id, k.scope])).toEqual([[publicKey.id, [...PUBLIC_SCOPES]]])
  })

  test("another product's keys are 404: for a stranger, and for a member of another product using its ids", async () => {
    const owner = await newProduct()
    const other = await newProduct()
    const stranger = await newUser()
    const key = await createKey(owner)
    for (const token of [stranger.token, other.token]) {
      expectError(await call('GET', keysPath(owner.productId), { token }), 404, 'not_found')
      expectError(await call('POST', keysPath(owner.productId), { token, body: { name: 'x' } }), 404, 'not_found')
      expectError(await call('DELETE', `${keysPath(owner.productId)}/${key.id}`, { token }), 404, 'not_found')
      expectError(await call('PUT', `${keysPath(owner.productId)}/${key.id}/scope`, { token, body: { scope: ['channels:read'] } }), 404, 'not_found')
    }
    // The other product's own path with this product's key id: still not theirs.
    expectError(await call('DELETE', `${keysPath(other.productId)}/${key.id}`, { token: other.token }), 404, 'not_found')
    expectError(await call('PUT', `${keysPath(other.productId)}/${key.id}/scope`, { token: other.token, body: { scope: ['channels:read'] } }), 404)
    const [row] = await sql`select revoked_at, scope from public_keys where id = ${key.id}`
    expect(row).toEqual({ revoked_at: null, scope: [...PUBLIC_SCOPES] })
  })

  test('no bearer token is 401', async () => {
    const owner = await newProduct()
    expectError(await call('GET', keysPath(owner.productId)), 401, 'unauthorized')
    expectError(await call('POST', keysPath(owner.productId), { body: { name: 'x' } }), 401, 'unauthorized')
  })
})
