// Delegated tokens: HS256 compact JWTs signed by the public process and verified by WebSocket gateways.
//
// Signing keys live in realtime_signing_keys, sealed (shared/secrets.ts): reading the database is not enough to mint
// tokens. The newest non-retired key signs; its `kid` goes in the JWT header, so a key can be rotated (insert a new one,
// later set retired_at on the old one) while tokens signed by the old key keep verifying until they expire (at most
// 3600 s). Secrets are cached by kid in memory: after the first lookup of a kid, verification is pure CPU with no
// database round trip.
import { createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto'
import type postgres from 'postgres'
import { config } from '../config'
import { sql as defaultSql, type Sql } from '../db/client'
import { aadOf } from '../db/seal-secrets'
import { open, seal } from '../secrets'
import type { Op } from './names'

/** One channel a token reaches, with the operations it may perform there (already narrowed by namespace policy). */
export interface TokenChannel {
  name: string
  ops: Op[]
}

/** The verified payload of a delegated token. */
export interface Claims {
  /** `ext:<subject>`: the identity shown on presence rosters. */
  sub: string
  /** Always true: the subject is external (issued by a product backend, not a platform user). */
  ext: true
  /** Product id. */
  pid: string
  /** Id of the product API key that issued the token: revoking that key ends the token (shared/realtime/revocations.ts). */
  akid: string
  /** Environment the token was issued in; a gateway refuses tokens of other environments. */
  env: string
  channels: TokenChannel[]
  /** Issued at / expires at, seconds since the epoch. */
  iat: number
  exp: number
  /** Unique token id. */
  jti: string
}

/** Why a token was refused. Gateways close the connection with 4001 on any of these. */
export type TokenFailure = 'malformed' | 'unknown_key' | 'bad_signature' | 'expired' | 'wrong_environment'

export class TokenError extends Error {
  constructor(readonly reason: TokenFailure) {
    super(`Token refused: ${reason}`)
  }
}

export const TOKEN_TTL_MIN = 60
export const TOKEN_TTL_MAX = 3600
export const TOKEN_TTL_DEFAULT = 3600

/** How long a worker signs with the key it loaded before looking for a newer one (so a rotation spreads). */
const SIGNING_KEY_REFRESH_MS = 60_000
/** How long a verifier trusts a cached secret before re-reading it (a deleted key stops verifying within this). */
const VERIFY_CACHE_MS = 10 * 60_000
/** How long an unknown kid is remembered as unknown, so forged kids cannot turn each verification into a query. */
const UNKNOWN_KID_MS = 5_000
const MAX_CACHED_KIDS = 1000

interface SigningKey {
  kid: string
  secret: Buffer
}

const b64url = (data: Buffer | string) => Buffer.from(data).toString('base64url')
const hmac = (secret: Buffer, input: string) => createHmac('sha256', secret).update(input).digest()

let signing: { key: SigningKey; loadedAt: number } | undefined
let signingLoad: Promise<SigningKey> | undefined
const secrets = new Map<string, { secret: Buffer | null; until: number }>()

/** The newest non-retired signing key; creates the first one when there is none (serialized by an advisory lock). */
async function loadSigningKey(sql: Sql): Promise<SigningKey> {
  const newest = async (q: Sql | postgres.TransactionSql) => {
    const [row] = await q`
      select kid, secret_sealed from realtime_signing_keys
      where retired_at is null and secret_sealed is not null order by created_at desc, kid desc limit 1`
    return row ? { kid: row.kid as string, secret: openSecret(row.kid, row.secret_sealed) } : undefined
  }
  const found = await newest(sql)
  if (found) return found
  return await sql.begin(async (tx): Promise<SigningKey> => {
    // Two processes starting at once must not both create a key: the second waits, then finds the first one's.
    await tx`select pg_advisory_xact_lock(hashtext('realtime_signing_keys'))`
    const existing = await newest(tx)
    if (existing) return existing
    const key = { kid: randomUUID(), secret: randomBytes(32) }
    await tx`insert into realtime_signing_keys (kid, secret_sealed) values (${key.kid}, ${sealSecret(key.kid, key.secret)})`
    return key
  })
}

/** A signing secret as stored: sealed for its own row. */
export const sealSecret = (kid: string, secret: Buffer) => seal(secret, aadOf('realtime_signing_keys', kid))
const openSecret = (kid: string, sealed: Uint8Array) => open(Buffer.from(sealed), aadOf('realtime_signing_keys', kid))

async function currentSigningKey(sql: Sql): Promise<SigningKey> {
  if (signing && Date.now() - signing.loadedAt < SIGNING_KEY_REFRESH_MS) return signing.key
  signingLoad ??= loadSigningKey(sql)
    .then((key) => {
      signing = { key, loadedAt: Date.now() }
      remember(key.kid, key.secret, VERIFY_CACHE_MS)
      return key
    })
    .finally(() => (signingLoad = undefined))
  if (!signing) return signingLoad
  // A refresh only looks for a newer key: while the database cannot answer, the key in hand still signs.
  const held = signing.key
  return signingLoad.catch(() => held)
}

function remember(kid: string, secret: Buffer | null, ms: number) {
  if (secrets.size >= MAX_CACHED_KIDS) secrets.delete(secrets.keys().next().value!)
  secrets.set(kid, { secret, until: Date.now() + ms })
}

async function secretFor(kid: string, sql: Sql): Promise<Buffer | null> {
  const cached = secrets.get(kid)
  if (cached && cached.until > Date.now()) return cached.secret
  const [row] = await sql`select secret_sealed from realtime_signing_keys where kid = ${kid} and secret_sealed is not null`
  const secret = row ? openSecret(kid, row.secret_sealed) : null
  remember(kid, secret, secret ? VERIFY_CACHE_MS : UNKNOWN_KID_MS)
  return secret
}

export interface SignInput {
  productId: string
  /** The product API key issuing the token. */
  apiKeyId: string
  /** Without the `ext:` prefix; the caller has validated its grammar. */
  subject: string
  channels: TokenChannel[]
  /** 60..3600, default 3600. */
  ttlSeconds?: number
  /** Seconds since the epoch; for tests. */
  now?: number
}

/**
 * Signs a delegated token with the current signing key.
 * @example const { token, expiresAt } = await signToken({ productId, subject: 'abc', channels: [{ name: 'chat:1', ops: ['subscribe'] }] })
 */
export async function signToken(input: SignInput, sql: Sql = defaultSql): Promise<{ token: string; claims: Claims; expiresAt: Date }> {
  const ttl = input.ttlSeconds ?? TOKEN_TTL_DEFAULT
  if (!Number.isInteger(ttl) || ttl < TOKEN_TTL_MIN || ttl > TOKEN_TTL_MAX) throw new RangeError(`ttlSeconds must be ${TOKEN_TTL_MIN}..${TOKEN_TTL_MAX}`)
  const key = await currentSigningKey(sql)
  const iat = input.now ?? Math.floor(Date.now() / 1000)
  const claims: Claims = {
    sub: `ext:${input.subject}`, ext: true, pid: input.productId, akid: input.apiKeyId, env: config.environment,
    channels: input.channels.map((c) => ({ name: c.name, ops: [...c.ops] })), iat, exp: iat + ttl, jti: randomUUID(),
  }
  const signingInput = `${b64url(JSON.stringify({ alg: 'HS256', typ: 'JWT', kid: key.kid }))}.${b64url(JSON.stringify(claims))}`
  return { token: `${signingInput}.${b64url(hmac(key.secret, signingInput))}`, claims, expiresAt: new Date(claims.exp * 1000) }
}

function decodeJson(part: string): unknown {
  try {
    return JSON.parse(Buffer.from(part, 'base64url').toString('utf8'))
  } catch {
    throw new TokenError('malformed')
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

function checkClaims(payload: unknown): Claims {
  if (!isObject(payload)) throw new TokenError('malformed')
  const { sub, ext, pid, akid, env, channels, iat, exp, jti } = payload
  const wellFormed = typeof sub === 'string' && sub.startsWith('ext:') && ext === true && typeof pid === 'string' && typeof akid === 'string'
    && typeof env === 'string' && typeof jti === 'string' && Number.isInteger(iat) && Number.isInteger(exp)
    && Array.isArray(channels)
    && channels.every((c) => isObject(c) && typeof c.name === 'string' && Array.isArray(c.ops) && c.ops.every((op) => typeof op === 'string'))
  if (!wellFormed) throw new TokenError('malformed')
  return payload as unknown as Claims
}

/**
 * Verifies a delegated token: structure, HS256 signature under its `kid`, environment and expiry. Throws TokenError
 * (close with 4001) for a refused token; a database failure while fetching an unseen kid propagates as is (answer
 * "unavailable", not 4001).
 * @example const claims = await verifyToken(token) // claims.channels → [{ name: 'chat:1', ops: ['subscribe'] }]
 */
export async function verifyToken(token: string, options: { now?: number; sql?: Sql } = {}): Promise<Claims> {
  if (typeof token !== 'string' || token.length > 16_384) throw new TokenError('malformed')
  const parts = token.split('.')
  if (parts.length !== 3 || parts.some((p) => !/^[A-Za-z0-9_-]+$/.test(p))) throw new TokenError('malformed')
  const [headerPart, payloadPart, signaturePart] = parts as [string, string, string]
  const header = decodeJson(headerPart)
  if (!isObject(header) || header.alg !== 'HS256' || typeof header.kid !== 'string' || header.kid.length > 128) {
    throw new TokenError('malformed')
  }
  const secret = await secretFor(header.kid, options.sql ?? defaultSql)
  if (!secret) throw new TokenError('unknown_key')
  const expected = hmac(secret, `${headerPart}.${payloadPart}`)
  const given = Buffer.from(signaturePart, 'base64url')
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw new TokenError('bad_signature')
  const claims = checkClaims(decodeJson(payloadPart))
  if (claims.env !== config.environment) throw new TokenError('wrong_environment')
  if (claims.exp <= (options.now ?? Math.floor(Date.now() / 1000))) throw new TokenError('expired')
  return claims
}

/** Forgets every cached key (tests rotating keys). */
export function resetTokenKeyCache(): void {
  signing = undefined
  secrets.clear()
}
