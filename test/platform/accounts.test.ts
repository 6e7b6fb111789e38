import { describe, expect, test } from 'bun:test'
import Type from 'typebox'
import { defineOperation } from '../../shared/catalog/operation'
import { sql } from '../../shared/db/client'
import { invoke } from '../../services/api/invoke'
import { call, expectError, newPlatformKey, newProduct, newUser, ok, uniqueEmail } from '../helpers'

describe('sign-up and login', () => {
  test('sign-up creates a user with an owned organization and logs in', async () => {
    const email = uniqueEmail()
    const signup = await call('POST', '/auth/signup', { body: { email, password: 'long enough', name: 'Ada' } })
    expect(signup.status).toBe(200)
    expect(signup.body.user.email).toBe(email)
    expect(signup.body.token).toMatch(/^pls_[A-Za-z0-9_-]{43}$/)
    const me = await call('GET', '/auth/me', { token: signup.body.token })
    expect(me.body).toMatchObject({ kind: 'session', user: { id: signup.body.user.id, name: 'Ada' } })
    const orgs = await call('GET', '/organizations', { token: signup.body.token })
    expect(orgs.body.organizations).toEqual([expect.objectContaining({ id: signup.body.organization.id, role: 'owner' })])
  })

  test('passwords are stored as argon2id hashes', async () => {
    const user = await newUser('my secret password')
    const [row] = await sql`select password_hash from users where id = ${user.userId}`
    expect(row!.password_hash).toStartWith('$argon2id$')
    expect(row!.password_hash).not.toContain('my secret password')
  })

  test('duplicate email, in any case, is 409 naming the field', async () => {
    const user = await newUser()
    const again = await call('POST', '/auth/signup', { body: { email: user.email.toUpperCase(), password: 'whatever123' } })
    expectError(again, 409, 'conflict')
    expect(again.body.fields).toEqual([{ path: '/body/email', message: 'is already registered' }])
  })

  test('login with the right password gives a new session; a wrong one or unknown email is 401', async () => {
    const user = await newUser('right password')
    const ok = await call('POST', '/auth/login', { body: { email: user.email, password: 'right password' } })
    expect(ok.status).toBe(200)
    expect(ok.body.token).not.toBe(user.token)
    expectError(await call('POST', '/auth/login', { body: { email: user.email, password: 'wrong password' } }), 401, 'invalid_credentials')
    expectError(await call('POST', '/auth/login', { body: { email: uniqueEmail(), password: 'right password' } }), 401, 'invalid_credentials')
  })

  test('logout ends only that session', async () => {
    const user = await newUser('pw pw pw pw')
    const second = ok(await call('POST', '/auth/login', { body: { email: user.email, password: 'pw pw pw pw' } }), 'second login')
    expect((await call('POST', '/auth/logout', { token: user.token })).body).toEqual({ loggedOut: true })
    expectError(await call('GET', '/auth/me', { token: user.token }), 401, 'unauthorized')
    expect((await call('GET', '/auth/me', { token: second.body.token })).status).toBe(200)
  })
})

describe('bearer tokens', () => {
  test('missing, malformed, unknown, expired and revoked tokens are all 401', async () => {
    const user = await newUser()
    expectError(await call('GET', '/products'), 401, 'unauthorized')
    expectError(await call('GET', '/products', { headers: { authorization: 'Basic abc' } }), 401)
    expectError(await call('GET', '/products', { token: 'not-a-token' }), 401)
    expectError(await call('GET', '/products', { token: 'pls_' + 'A'.repeat(43) }), 401)
    expectError(await call('GET', '/products', { token: 'plk_' + 'A'.repeat(43) }), 401)
    await sql`update sessions set expires_at = now() - interval '1 second' where user_id = ${user.userId}`
    expectError(await call('GET', '/products', { token: user.token }), 401)
  })
})

describe('products', () => {
  test('create, list newest first, get', async () => {
    const user = await newUser()
    const a = ok(await call('POST', '/products', { token: user.token, body: { name: 'A' } }), 'create product A')
    ok(await call('POST', '/products', { token: user.token, body: { name: 'B', organizationId: user.organizationId } }), 'create product B')
    expect(a.body.organizationId).toBe(user.organizationId)
    const list = await call('GET', '/products', { token: user.token })
    expect(list.body.products.map((p: any) => p.name)).toEqual(['B', 'A'])
    expect((await call('GET', `/products/${a.body.id}`, { token: user.token })).body).toEqual(a.body)
  })

  test("another user's product and organization are invisible: 404, never 403", async () => {
    const owner = await newProduct()
    const stranger = await newUser()
    expectError(await call('GET', `/products/${owner.productId}`, { token: stranger.token }), 404, 'not_found')
    expectError(await call('GET', `/products/${owner.productId}/platform-keys`, { token: stranger.token }), 404)
    expectError(await call('POST', '/products', { token: stranger.token, body: { name: 'x', organizationId: owner.organizationId } }), 404)
    expect((await call('GET', '/products', { token: stranger.token })).body.products).toEqual([])
  })
})

describe('platform API keys', () => {
  test('created with areas, secret shown once, listed by prefix only', async () => {
    const owner = await newProduct()
    const key = await newPlatformKey(owner, ['realtime', 'analytics', 'realtime'])
    expect(key.key).toMatch(/^plk_[A-Za-z0-9_-]{43}$/)
    expect(key.prefix).toBe(key.key.slice(0, 10))
    expect(key.areas).toEqual(['analytics', 'realtime'])
    const list = await call('GET', `/products/${owner.productId}/platform-keys`, { token: owner.token })
    expect(list.body.keys).toEqual([{ id: key.id, name: 'test key', areas: ['analytics', 'realtime'], prefix: key.prefix, createdAt: expect.any(String) }])
    expect(JSON.stringify(list.body)).not.toContain(key.key)
    const [row] = await sql`select key_hash from platform_keys where id = ${key.id}`
    expect(Buffer.from(row!.key_hash).toString('hex')).toBe(new Bun.CryptoHasher('sha256').update(key.key).update('\0').digest('hex'))
  })

  test("a platform key acts on its own product only; another product is 404", async () => {
    const owner = await newProduct()
    const other = await newProduct()
    const key = await newPlatformKey(owner, ['organization'])
    const me = await call('GET', '/auth/me', { token: key.key })
    expect(me.body).toEqual({ kind: 'platform_key', user: null, productId: owner.productId, areas: ['organization'] })
    expect((await call('GET', '/products', { token: key.key })).body.products.map((p: any) => p.id)).toEqual([owner.productId])
    expectError(await call('GET', `/products/${other.productId}`, { token: key.key }), 404)
  })

  test('platform keys cannot manage keys or products (403), not even their own', async () => {
    const owner = await newProduct()
    const key = await newPlatformKey(owner, ['organization', 'realtime'])
    expectError(await call('GET', `/products/${owner.productId}/platform-keys`, { token: key.key }), 403, 'forbidden')
    expectError(await call('POST', `/products/${owner.productId}/platform-keys`, { token: key.key, body: { name: 'x', areas: ['realtime'] } }), 403)
    expectError(await call('DELETE', `/products/${owner.productId}/platform-keys/${key.id}`, { token: key.key }), 403)
    expectError(await call('POST', '/products', { token: key.key, body: { name: 'x' } }), 403)
  })

  test('revocation is immediate; revoking again or another product\'s key is 404', async () => {
    const owner = await newProduct()
    const other = await newProduct()
    const key = await newPlatformKey(owner, ['organization'])
    expect((await call('GET', '/auth/me', { token: key.key })).status).toBe(200)
    expectError(await call('DELETE', `/products/${other.productId}/platform-keys/${key.id}`, { token: other.token }), 404)
    expect((await call('DELETE', `/products/${owner.productId}/platform-keys/${key.id}`, { token: owner.token })).body).toEqual({ id: key.id, revoked: true })
    expectError(await call('GET', '/auth/me', { token: key.key }), 401)
    expectError(await call('DELETE', `/products/${owner.productId}/platform-keys/${key.id}`, { token: owner.token }), 404)
    expect((await call('GET', `/products/${owner.productId}/platform-keys`, { token: owner.token })).body.keys).toEqual([])
  })
})

describe('product context of an operation', () => {
  // A product operation of one area, declared here so the rule is tested apart from any one area's routes.
  const probe = defineOperation({
    id: 'analytics_probe_get', method: 'GET', path: '/probe', area: 'analytics', auth: 'product', summary: 'probe',
    response: Type.Object({ productId: Type.String() }),
    handler: async (_input, ctx) => ({ productId: ctx.productId! }),
  })
  const run = (authorization: string, productId: string | null = null) =>
    invoke(probe, {}, { authorization: `Bearer ${authorization}`, productId, requestId: 'test', clientIp: '127.0.0.1' }).then(
      (value) => ({ ok: true as const, value }),
      (error) => ({ ok: false as const, status: error.status as number, code: error.code as string }),
    )

  test('a session names its product with X-Product-Id; missing is 400, not a member is 404', async () => {
    const owner = await newProduct()
    const stranger = await newUser()
    expect(await run(owner.token, owner.productId)).toEqual({ ok: true, value: { productId: owner.productId } })
    expect(await run(owner.token)).toMatchObject({ ok: false, status: 400 })
    expect(await run(owner.token, 'not-a-uuid')).toMatchObject({ ok: false, status: 400 })
    expect(await run(stranger.token, owner.productId)).toMatchObject({ ok: false, status: 404 })
  })

  test("a platform key needs the operation's area (403) and never reaches another product (404)", async () => {
    const owner = await newProduct()
    const other = await newProduct()
    const analytics = await newPlatformKey(owner, ['analytics'])
    const mail = await newPlatformKey(owner, ['mail'])
    expect(await run(analytics.key)).toEqual({ ok: true, value: { productId: owner.productId } })
    // UUIDs are case-insensitive: the canonical (lower-case) id is what the operation sees.
    expect(await run(analytics.key, owner.productId.toUpperCase())).toEqual({ ok: true, value: { productId: owner.productId } })
    expect(await run(owner.token, owner.productId.toUpperCase())).toEqual({ ok: true, value: { productId: owner.productId } })
    expect(await run(mail.key)).toMatchObject({ ok: false, status: 403, code: 'forbidden' })
    expect(await run(analytics.key, other.productId)).toMatchObject({ ok: false, status: 404 })
  })
})

describe('organization members', () => {
  test('an owner adds an existing user, who then reaches the organization\'s products', async () => {
    const owner = await newProduct()
    const teammate = await newUser()
    expectError(await call('GET', `/products/${owner.productId}`, { token: teammate.token }), 404)
    const added = await call('POST', `/organizations/${owner.organizationId}/members`, { token: owner.token, body: { email: teammate.email.toUpperCase() } })
    expect(added.body).toEqual({ userId: teammate.userId, email: teammate.email, name: null, role: 'member', joinedAt: expect.any(String) })
    expect((await call('GET', `/products/${owner.productId}`, { token: teammate.token })).status).toBe(200)
    const list = await call('GET', `/organizations/${owner.organizationId}/members`, { token: teammate.token })
    expect(list.body.members.map((m: any) => [m.userId, m.role])).toEqual([[owner.userId, 'owner'], [teammate.userId, 'member']])
    expectError(await call('POST', `/organizations/${owner.organizationId}/members`, { token: owner.token, body: { email: teammate.email } }), 409)
    expectError(await call('POST', `/organizations/${owner.organizationId}/members`, { token: owner.token, body: { email: uniqueEmail() } }), 404)
  })

  test('only owners manage members; strangers see 404; the last owner stays; a member may leave', async () => {
    const owner = await newProduct()
    const member = await newUser()
    const stranger = await newUser()
    ok(await call('POST', `/organizations/${owner.organizationId}/members`, { token: owner.token, body: { email: member.email } }), 'add member')
    expectError(await call('POST', `/organizations/${owner.organizationId}/members`, { token: member.token, body: { email: stranger.email } }), 403)
    expectError(await call('DELETE', `/organizations/${owner.organizationId}/members/${owner.userId}`, { token: member.token }), 403)
    expectError(await call('GET', `/organizations/${owner.organizationId}/members`, { token: stranger.token }), 404)
    expectError(await call('POST', `/organizations/${owner.organizationId}/members`, { token: stranger.token, body: { email: stranger.email } }), 404)
    const lastOwner = await call('DELETE', `/organizations/${owner.organizationId}/members/${owner.userId}`, { token: owner.token })
    expectError(lastOwner, 409)
    expect(lastOwner.body.fields).toEqual([{ path: '/path/userId', message: 'is the last owner' }])
    expect((await call('DELETE', `/organizations/${owner.organizationId}/members/${member.userId}`, { token: member.token })).body).toEqual({ userId: member.userId, removed: true })
    expectError(await call('GET', `/products/${owner.productId}`, { token: member.token }), 404)
    expectError(await call('DELETE', `/organizations/${owner.organizationId}/members/${member.userId}`, { token: owner.token }), 404)
  })

  test('platform keys cannot manage members', async () => {
    const owner = await newProduct()
    const key = await newPlatformKey(owner, ['organization'])
    expectError(await call('GET', `/organizations/${owner.organizationId}/members`, { token: key.key }), 403)
  })
})

describe('credential management is for owners', () => {
  test("a member (not owner) gets 403 on every platform-key and product-API-key tool and changes nothing; an owner may", async () => {
    const owner = await newProduct()
    const member = await newUser()
    ok(await call('POST', `/organizations/${owner.organizationId}/members`, { token: owner.token, body: { email: member.email } }), 'add member')
    const platformKey = await newPlatformKey(owner, ['realtime'])
    const publicKey = ok(await call('POST', `/governance/api/v1/products/${owner.productId}/public-keys`, { token: owner.token, body: { name: 'backend' } }), 'create public key')
    const attempts: [string, string, unknown?][] = [
      ['POST', `/products/${owner.productId}/platform-keys`, { name: 'x', areas: ['realtime'] }],
      ['GET', `/products/${owner.productId}/platform-keys`],
      ['DELETE', `/products/${owner.productId}/platform-keys/${platformKey.id}`],
      ['POST', `/governance/api/v1/products/${owner.productId}/public-keys`, { name: 'x' }],
      ['GET', `/governance/api/v1/products/${owner.productId}/public-keys`],
      ['PUT', `/governance/api/v1/products/${owner.productId}/public-keys/${publicKey.body.id}/scope`, { scope: ['tokens:issue'] }],
      ['DELETE', `/governance/api/v1/products/${owner.productId}/public-keys/${publicKey.body.id}`],
    ]
    for (const [method, path, body] of attempts) expectError(await call(method, path, { token: member.token, body }), 403, 'forbidden')
    // The member still reaches the product itself, and the owner's keys are untouched.
    expect((await call('GET', `/products/${owner.productId}`, { token: member.token })).status).toBe(200)
    expect((await call('GET', `/products/${owner.productId}/platform-keys`, { token: owner.token })).body.keys.map((k: any) => k.id)).toEqual([platformKey.id])
    const publicKeys = await call('GET', `/governance/api/v1/products/${owner.productId}/public-keys`, { token: owner.token })
    expect(publicKeys.body.keys).toEqual([expect.objectContaining({ id: publicKey.body.id, scope: publicKey.body.scope })])
    // Promoted to owner, the same user may.
    await sql`update organization_members set role = 'owner' where user_id = ${member.userId} and organization_id = ${owner.organizationId}`
    expect((await call('GET', `/governance/api/v1/products/${owner.productId}/public-keys`, { token: member.token })).status).toBe(200)
    expect((await call('GET', `/products/${owner.productId}/platform-keys`, { token: member.token })).status).toBe(200)
  })
})
