// Secrets at rest: the AES-256-GCM envelope, master-key rotation, and the signing keys stored only sealed.
import { describe, expect, test } from 'bun:test'
import { randomBytes, randomUUID } from 'node:crypto'
import { existsSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { sql } from '../../shared/db/client'
import { aadOf, rewrapSecrets, sealPlainSecrets } from '../../shared/db/seal-secrets'
import { resetTokenKeyCache, signToken, verifyToken } from '../../shared/realtime/tokens'
import { keyring, masterKeyId, open, parseMasterKey, requireSecretKey, rewrap, seal, sealedUnder } from '../../shared/secrets'

const keyA = randomBytes(32).toString('base64')
const keyB = randomBytes(32).toString('hex')
const secret = randomBytes(48)

describe('envelope', () => {
  test('seals and opens; the sealed form does not contain the secret', () => {
    const ring = keyring(keyA)
    const sealed = seal(secret, 'table:row-1', ring)
    expect(sealed.includes(secret)).toBe(false)
    expect(sealed.length).toBe(97 + secret.length)
    expect(open(sealed, 'table:row-1', ring)).toEqual(secret)
    expect(seal(secret, 'table:row-1', ring)).not.toEqual(sealed) // fresh data key and nonces every time
  })

  test('another row, any flipped byte, or an unknown master key: refused, never garbage', () => {
    const ring = keyring(keyA)
    const sealed = seal(secret, 'table:row-1', ring)
    expect(() => open(sealed, 'table:row-2', ring)).toThrow('does not open')
    for (const at of [0, 5, 20, 60, 75, 90, sealed.length - 1]) {
      const tampered = Buffer.from(sealed)
      tampered[at]! ^= 0x01
      expect(() => open(tampered, 'table:row-1', ring)).toThrow()
    }
    expect(() => open(sealed, 'table:row-1', keyring(keyB))).toThrow('is not configured')
  })

  test('rotation: the old key still opens as PREVIOUS, and a re-wrapped secret opens with the new key alone', () => {
    const sealed = seal(secret, 'table:row-1', keyring(keyA))
    const during = keyring(keyB, [keyA])
    expect(open(sealed, 'table:row-1', during)).toEqual(secret)
    const rewrapped = rewrap(sealed, 'table:row-1', during)
    expect(sealedUnder(rewrapped)).toBe(masterKeyId(parseMasterKey(keyB)))
    expect(rewrapped.subarray(69)).toEqual(sealed.subarray(69)) // the data itself is not touched
    expect(open(rewrapped, 'table:row-1', keyring(keyB))).toEqual(secret)
    expect(() => open(rewrapped, 'table:row-1', keyring(keyA))).toThrow()
  })

  test('a missing or malformed master key is a clear error naming the variable', () => {
    expect(() => keyring(null)).toThrow('PLATFORM_SECRET_KEY is not set')
    expect(() => keyring('too-short')).toThrow('PLATFORM_SECRET_KEY is malformed')
    expect(() => keyring(keyA, ['nope'])).toThrow('PLATFORM_SECRET_KEY_PREVIOUS is malformed')
    expect(parseMasterKey(randomBytes(32).toString('base64url')).length).toBe(32)
  })
})

describe('signing keys in the database', () => {
  test('are stored sealed only, and the tokens they sign verify', async () => {
    resetTokenKeyCache()
    const { token } = await signToken({ productId: randomUUID(), apiKeyId: randomUUID(), subject: 'sealed', channels: [{ name: 'chat:1', ops: ['subscribe'] }] })
    const kid = JSON.parse(Buffer.from(token.split('.')[0]!, 'base64url').toString()).kid as string
    const [row] = await sql`select secret, secret_sealed from realtime_signing_keys where kid = ${kid}`
    expect(row!.secret).toBeNull()
    const plain = open(Buffer.from(row!.secret_sealed), aadOf('realtime_signing_keys', kid))
    expect(Buffer.from(row!.secret_sealed).includes(plain)).toBe(false)
    expect((await verifyToken(token)).sub).toBe('ext:sealed')
    expect((await sql`select kid from realtime_signing_keys where secret is not null`).length).toBe(0)
  })

  test('a plain row left from before the migration is sealed by the migration step, and its tokens verify', async () => {
    const kid = randomUUID() // key ids are UUIDs: anything else is refused as malformed before any lookup
    const plain = randomBytes(32)
    // Older than every other key, so it never becomes the one that signs for other tests.
    await sql`insert into realtime_signing_keys (kid, secret, created_at, retired_at) values (${kid}, ${plain}, now() - interval '1 day', now())`
    resetTokenKeyCache()
    const forge = (await import('node:crypto')).createHmac
    const header = Buffer.from(JSON.stringify({ alg: 'HS256', typ: 'JWT', kid })).toString('base64url')
    const now = Math.floor(Date.now() / 1000)
    const claims = { sub: 'ext:legacy', ext: true, pid: randomUUID(), akid: randomUUID(), env: process.env.PLATFORM_ENV ?? 'development', channels: [], iat: now, exp: now + 60, jti: randomUUID() }
    const payload = Buffer.from(JSON.stringify(claims)).toString('base64url')
    const token = `${header}.${payload}.${forge('sha256', plain).update(`${header}.${payload}`).digest('base64url')}`
    await expect(verifyToken(token)).rejects.toMatchObject({ reason: 'unknown_key' }) // plain rows are never read
    expect(await sealPlainSecrets(sql)).toBeGreaterThanOrEqual(1)
    const [row] = await sql`select secret, secret_sealed from realtime_signing_keys where kid = ${kid}`
    expect(row!.secret).toBeNull()
    resetTokenKeyCache()
    expect((await verifyToken(token)).sub).toBe('ext:legacy')
  })

  test('rotation re-wraps every secret sealed under an older master key, and leaves the current ones alone', async () => {
    const current = requireSecretKey()
    expect(masterKeyId()).toBe(masterKeyId(current.current)) // without an argument: the current key's id
    const old = keyring(randomBytes(32).toString('base64'))
    const kid = `rotated-${randomUUID()}`
    const plain = randomBytes(32)
    await sql`insert into realtime_signing_keys (kid, secret_sealed, created_at, retired_at)
              values (${kid}, ${seal(plain, aadOf('realtime_signing_keys', kid), old)}, now() - interval '1 day', now())`
    const during = { current: current.current, all: new Map([...current.all, ...old.all]) }
    expect(await rewrapSecrets(sql, during)).toBe(1)
    expect(await rewrapSecrets(sql, during)).toBe(0)
    const [row] = await sql`select secret_sealed from realtime_signing_keys where kid = ${kid}`
    expect(open(Buffer.from(row!.secret_sealed), aadOf('realtime_signing_keys', kid), current)).toEqual(plain)
    await sql`delete from realtime_signing_keys where kid = ${kid}`
  })
})

const keyFile = join(import.meta.dir, '..', '..', '.data', 'secret.key')

// The scripts (and a plain `bun test`) create it unless PLATFORM_SECRET_KEY comes from elsewhere.
test.if(existsSync(keyFile))('the generated master key file is readable by its owner only, and is the key in use', () => {
  expect(statSync(keyFile).mode & 0o077).toBe(0)
  expect(masterKeyId(parseMasterKey(readFileSync(keyFile, 'utf8')))).toBe(masterKeyId(requireSecretKey().current))
})
