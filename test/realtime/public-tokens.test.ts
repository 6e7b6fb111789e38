// POST /tokens/issue on real workers (validation, narrowing (a)(b)(c), grants) and the token module (sign, verify, rotate).
import { afterAll, beforeAll, describe, expect, spyOn, test } from 'bun:test'
import { createHmac, randomBytes, randomUUID } from 'node:crypto'
import { config } from '../../shared/config'
import { sql } from '../../shared/db/client'
import { resetTokenKeyCache, sealSecret, signToken, type TokenError, verifyToken } from '../../shared/realtime/tokens'
import { open } from '../../shared/secrets'
import { manage, pub, realtimeProduct, startPublicPair, type Pair, type RealtimeProduct } from './public-helpers'

let pair: Pair
let p: RealtimeProduct

beforeAll(async () => {
  ;[pair, p] = await Promise.all([
    startPublicPair(),
    realtimeProduct([
      { name: 'chat', presence: true, clientEvents: true, history: { ttlSeconds: 300, size: 100 } },
      { name: 'feed' }, // subscribe only
      { name: 'docs', presence: true, history: { ttlSeconds: 60, size: 10 } },
    ]),
  ])
})
afterAll(async () => {
  await pair.stop()
})

const issue = (body: unknown, worker = pair.a) => pub(worker, 'POST', `/${p.productId}/realtime/tokens/issue`, { key: p.key, body })
const ALL = ['subscribe', 'publish', 'presence', 'history']
const fieldPaths = (result: { body: any }) => [...new Set((result.body.fields as { path: string }[]).map((f) => f.path))].sort()

describe('POST /tokens/issue', () => {
  test('signs a token the gateway can verify; response carries gatewayUrl, expiresAt and what was granted', async () => {
    const before = Math.floor(Date.now() / 1000)
    const result = await issue({ subject: 'user-1', channels: [{ name: 'chat:room-1', ops: ['subscribe', 'presence'] }] })
    expect(result.status).toBe(200)
    expect(result.body).toEqual({
      token: expect.any(String), gatewayUrl: config.gatewayUrl, expiresAt: expect.any(String),
      subject: 'ext:user-1', channels: [{ name: 'chat:room-1', ops: ['subscribe', 'presence'] }], dropped: [],
    })
    const claims = await verifyToken(result.body.token)
    expect(claims).toMatchObject({ sub: 'ext:user-1', ext: true, pid: p.productId, akid: p.keyId, env: config.environment, channels: result.body.channels })
    expect(claims.exp - claims.iat).toBe(3600)
    expect(claims.iat).toBeGreaterThanOrEqual(before)
    expect(new Date(result.body.expiresAt).getTime()).toBe(claims.exp * 1000)
    const header = JSON.parse(Buffer.from(result.body.token.split('.')[0], 'base64url').toString())
    expect(header).toMatchObject({ alg: 'HS256', typ: 'JWT', kid: expect.any(String) })
  })

  test('ttlSeconds sets the lifetime (60..3600)', async () => {
    const result = await issue({ subject: 'u', channels: [{ name: 'feed:x', ops: ['subscribe'] }], ttlSeconds: 60 }, pair.b)
    expect(result.status).toBe(200)
    const claims = await verifyToken(result.body.token)
    expect(claims.exp - claims.iat).toBe(60)
  })

  test('narrowing (a) and (b): unregistered namespaces and disallowed operations are dropped, and reported', async () => {
    const result = await issue({
      subject: 'u.2',
      channels: [
        { name: 'chat:a', ops: ALL },
        { name: 'feed:b', ops: ALL },
        { name: 'docs:c', ops: ALL },
        { name: 'ghost:d', ops: ['subscribe'] },
      ],
    })
    expect(result.status).toBe(200)
    expect(result.body.channels).toEqual([
      { name: 'chat:a', ops: ALL },
      { name: 'feed:b', ops: ['subscribe'] },
      { name: 'docs:c', ops: ['subscribe', 'presence', 'history'] },
    ])
    expect(result.body.dropped).toEqual([
      { name: 'feed:b', ops: ['publish', 'presence', 'history'], reason: 'not_allowed' },
      { name: 'docs:c', ops: ['publish'], reason: 'not_allowed' },
      { name: 'ghost:d', ops: ['subscribe'], reason: 'namespace_not_registered' },
    ])
    expect((await verifyToken(result.body.token)).channels).toEqual(result.body.channels)
  })

  test('narrowing (c): everything dropped is 422 unprocessable', async () => {
    const result = await issue({ subject: 'u', channels: [{ name: 'ghost:a', ops: ['subscribe'] }, { name: 'feed:b', ops: ['publish', 'history'] }] })
    expect(result.status).toBe(422)
    expect(result.body).toMatchObject({ error: 'unprocessable', message: expect.any(String) })
    expect(fieldPaths(result)).toEqual(['/body/channels/0', '/body/channels/1'])
  })

  test('grants narrow further, and a namespace change is seen at once by both workers', async () => {
    const q = await realtimeProduct([{ name: 'room', presence: true, clientEvents: true }])
    const call = (worker = pair.a) => pub(worker, 'POST', `/${q.productId}/realtime/tokens/issue`, {
      key: q.key, body: { subject: 'u', channels: [{ name: 'room:1:public', ops: ['subscribe', 'publish', 'presence'] }, { name: 'room:1:staff', ops: ['subscribe'] }] },
    })
    // Both workers cache the policy ...
    expect((await call(pair.a)).body.channels).toHaveLength(2)
    expect((await call(pair.b)).body.channels).toHaveLength(2)
    // ... and a new grant reaches both immediately.
    await manage(q, 'POST', '/realtime/grants', { pattern: 'room:*:public', ops: ['subscribe', 'presence'] })
    for (const worker of [pair.b, pair.a]) {
      const result = await call(worker)
      expect(result.body.channels).toEqual([{ name: 'room:1:public', ops: ['subscribe', 'presence'] }])
      expect(result.body.dropped).toEqual([
        { name: 'room:1:public', ops: ['publish'], reason: 'not_allowed' },
        { name: 'room:1:staff', ops: ['subscribe'], reason: 'not_allowed' },
      ])
    }
    await manage(q, 'DELETE', '/realtime/namespaces/room')
    expect((await call(pair.b)).status).toBe(422)
  })

  test('a channel named twice gets the union of its operations', async () => {
    const result = await issue({ subject: 'u', channels: [{ name: 'chat:x', ops: ['history'] }, { name: 'chat:x', ops: ['subscribe'] }] })
    expect(result.body.channels).toEqual([{ name: 'chat:x', ops: ['subscribe', 'history'] }])
  })

  test('validation: 400 naming each failing field', async () => {
    const channel = { name: 'chat:a', ops: ['subscribe'] }
    const cases: [unknown, string[]][] = [
      [undefined, ['/body']],
      [{ channels: [channel] }, ['/body/subject']],
      [{ subject: 'ext:abc', channels: [channel] }, ['/body/subject']],
      [{ subject: 'x'.repeat(129), channels: [channel] }, ['/body/subject']],
      [{ subject: 'u', channels: [] }, ['/body/channels']],
      [{ subject: 'u', channels: Array.from({ length: 33 }, (_, i) => ({ name: `chat:${i}`, ops: ['subscribe'] })) }, ['/body/channels']],
      [{ subject: 'u', channels: [{ name: 'chat:*', ops: ['subscribe'] }] }, ['/body/channels/0/name']],
      [{ subject: 'u', channels: [{ name: 'nocolon', ops: ['subscribe'] }] }, ['/body/channels/0/name']],
      [{ subject: 'u', channels: [{ name: 'chat:a', ops: [] }] }, ['/body/channels/0/ops']],
      [{ subject: 'u', channels: [{ name: 'chat:a', ops: ['subscribe', 'subscribe'] }] }, ['/body/channels/0/ops']],
      [{ subject: 'u', channels: [{ name: 'chat:a', ops: ['admin'] }] }, ['/body/channels/0/ops/0']],
      [{ subject: 'u', channels: [channel], ttlSeconds: 59 }, ['/body/ttlSeconds']],
      [{ subject: 'u', channels: [channel], ttlSeconds: 3601 }, ['/body/ttlSeconds']],
      [{ subject: 'u', channels: [channel], extra: 1 }, ['/body/extra']],
    ]
    for (const [body, fields] of cases) {
      const result = await issue(body)
      expect({ body, status: result.status, error: result.body.error }).toEqual({ body, status: 400, error: 'validation_failed' })
      expect(fieldPaths(result)).toEqual(fields)
    }
    const notJson = await pub(pair.a, 'POST', `/${p.productId}/realtime/tokens/issue`, { key: p.key, raw: '{"subject":' })
    expect({ status: notJson.status, error: notJson.body.error }).toEqual({ status: 400, error: 'invalid_json' })
    const gzip = await pub(pair.a, 'POST', `/${p.productId}/realtime/tokens/issue`, { key: p.key, raw: Bun.gzipSync('{}'), headers: { 'content-encoding': 'gzip' } })
    expect(gzip.status).toBe(415)
  })
})

describe('tokens module', () => {
  const channels = [{ name: 'chat:1', ops: ['subscribe' as const] }]

  test('tampered, truncated, expired or foreign tokens are refused with a reason', async () => {
    const { token } = await signToken({ productId: randomUUID(), apiKeyId: randomUUID(), subject: 'abc', channels, ttlSeconds: 60 })
    const [h, payload, s] = token.split('.') as [string, string, string]
    const forged = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(payload, 'base64url').toString()), channels: [{ name: 'chat:1', ops: ['publish'] }] })).toString('base64url')
    const reason = async (t: string, now?: number) => {
      try {
        await verifyToken(t, { now })
        return 'accepted'
      } catch (error) {
        return (error as TokenError).reason
      }
    }
    expect(await reason(token)).toBe('accepted')
    expect(await reason(`${h}.${forged}.${s}`)).toBe('bad_signature')
    expect(await reason(`${h}.${payload}`)).toBe('malformed')
    expect(await reason('not a token')).toBe('malformed')
    expect(await reason(token, Math.floor(Date.now() / 1000) + 61)).toBe('expired')
    const unknownKid = Buffer.from(JSON.stringify({ alg: 'HS256', typ: 'JWT', kid: randomUUID() })).toString('base64url')
    expect(await reason(`${unknownKid}.${payload}.${s}`)).toBe('unknown_key')
    const none = Buffer.from(JSON.stringify({ alg: 'none', kid: 'x' })).toString('base64url')
    expect(await reason(`${none}.${payload}.${s}`)).toBe('malformed')

    // Correctly signed, but for another environment.
    const kid = JSON.parse(Buffer.from(h, 'base64url').toString()).kid
    const [row] = await sql`select secret_sealed from realtime_signing_keys where kid = ${kid}`
    const secret = open(Buffer.from(row!.secret_sealed), `realtime_signing_keys:${kid}`)
    const otherEnv = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(payload, 'base64url').toString()), env: 'elsewhere' })).toString('base64url')
    const sig = createHmac('sha256', secret).update(`${h}.${otherEnv}`).digest('base64url')
    expect(await reason(`${h}.${otherEnv}.${sig}`)).toBe('wrong_environment')
  })

  test('a new key does not sign before it is 75 s old (2.5 of the verifiers\' 30 s re-reads): at 60 s an older key still signs, at 80 s the new one', async () => {
    const kid = randomUUID()
    const older = randomUUID() // a mature key, whatever ran before: the youngest key signs when none is mature
    const kidOf = (token: string) => JSON.parse(Buffer.from(token.split('.')[0]!, 'base64url').toString()).kid
    await sql`insert into realtime_signing_keys (kid, secret_sealed, created_at) values
      (${older}, ${sealSecret(older, randomBytes(32))}, now() - interval '10 minutes'),
      (${kid}, ${sealSecret(kid, randomBytes(32))}, now() - interval '60 seconds')`
    try {
      resetTokenKeyCache()
      expect(kidOf((await signToken({ productId: randomUUID(), apiKeyId: randomUUID(), subject: 'abc', channels })).token)).not.toBe(kid)
      await sql`update realtime_signing_keys set created_at = now() - interval '80 seconds' where kid = ${kid}`
      resetTokenKeyCache()
      expect(kidOf((await signToken({ productId: randomUUID(), apiKeyId: randomUUID(), subject: 'abc', channels })).token)).toBe(kid)
    } finally {
      await sql`delete from realtime_signing_keys where kid in (${kid}, ${older})`
      resetTokenKeyCache()
    }
  })

  test('while the database cannot answer, the key in hand still signs, with a warning naming it (once a minute, not per token)', async () => {
    resetTokenKeyCache()
    const now = Math.floor(Date.now() / 1000)
    const input = { productId: randomUUID(), apiKeyId: randomUUID(), subject: 'abc', channels }
    const held = JSON.parse(Buffer.from((await signToken({ ...input, now })).token.split('.')[0]!, 'base64url').toString()).kid
    // The key was loaded by now, on the real clock (its load time), which may be past the second `now` names.
    const loadedBy = Date.now()
    const broken = (() => Promise.reject(new Error('no database'))) as unknown as typeof sql
    const lines: string[] = []
    const spy = spyOn(console, 'log').mockImplementation((line: unknown) => void lines.push(String(line)))
    try {
      // Two minutes on, the key is due for a re-read, which fails: it signs on.
      for (let i = 0; i < 5; i++) {
        const { token } = await signToken({ ...input, now: now + 120 + i }, broken)
        expect(JSON.parse(Buffer.from(token.split('.')[0]!, 'base64url').toString()).kid).toBe(held)
      }
    } finally {
      spy.mockRestore()
      resetTokenKeyCache()
    }
    const warnings = lines.map((line) => JSON.parse(line)).filter((entry) => entry.level === 'warn')
    expect(warnings).toEqual([expect.objectContaining({ msg: expect.stringContaining('still signing with the key held'), kid: held, error: 'no database' })])
    // Held from its load (at or before loadedBy) to the first failed re-read, at `now + 120` seconds.
    expect(warnings[0].heldForMs).toBeGreaterThanOrEqual((now + 120) * 1000 - loadedBy)
    expect(warnings[0].heldForMs).toBeLessThanOrEqual(120_000)
  })

  test('rotation: a newer key signs (kid in the header); tokens of the older key still verify', async () => {
    const old = await signToken({ productId: randomUUID(), apiKeyId: randomUUID(), subject: 'abc', channels })
    const kid = randomUUID()
    // A key signs once verifiers have had time to load it (KEY_MATURE_SECONDS): this one is old enough, and newer than
    // every other key old enough.
    await sql`insert into realtime_signing_keys (kid, secret_sealed, created_at) values (${kid}, ${sealSecret(kid, randomBytes(32))}, now() - interval '80 seconds')`
    resetTokenKeyCache()
    const fresh = await signToken({ productId: randomUUID(), apiKeyId: randomUUID(), subject: 'abc', channels })
    expect(JSON.parse(Buffer.from(fresh.token.split('.')[0]!, 'base64url').toString()).kid).toBe(kid)
    expect((await verifyToken(fresh.token)).sub).toBe('ext:abc')
    expect((await verifyToken(old.token)).sub).toBe('ext:abc')
    // After the first lookup of a kid, verification needs no database: a failing one changes nothing.
    const broken = (() => Promise.reject(new Error('no database'))) as unknown as typeof sql
    expect((await verifyToken(old.token, { sql: broken })).sub).toBe('ext:abc')
    await sql`update realtime_signing_keys set retired_at = now() where kid = ${kid}`
    resetTokenKeyCache()
    const after = await signToken({ productId: randomUUID(), apiKeyId: randomUUID(), subject: 'abc', channels })
    expect(JSON.parse(Buffer.from(after.token.split('.')[0]!, 'base64url').toString()).kid).not.toBe(kid)
    expect((await verifyToken(fresh.token)).sub).toBe('ext:abc') // retired keys stop signing, not verifying
  })
})
