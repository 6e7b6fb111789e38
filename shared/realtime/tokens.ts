// Delegated tokens: HS256 compact JWTs signed by the public process and verified by WebSocket gateways.
//
// Signing keys live in realtime_signing_keys, sealed (shared/secrets.ts): reading the database is not enough to mint
// tokens. The newest non-retired key signs; its `kid` goes in the JWT header, so a key can be rotated (insert a new one,
// later set retired_at on the old one) while tokens signed by the old key keep verifying until they expire (at most
// 3600 s, plus slack). A verifier holds the whole set of keys that may verify, loaded once and re-read on change and
// every 30 s: verification is pure CPU, and a forged or unknown kid never costs a database query.
import { createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto'
import type postgres from 'postgres'
import { config } from '../config'
import { logUnlessOutage, unavailable } from '../errors'
import { describeError, log } from '../log'
import { sql as defaultSql, type Sql } from '../db/client'
import { aadOf } from '../db/seal-secrets'
import { open, seal } from '../secrets'
import { publishInvalidation } from '../cache/invalidation'
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
/**
 * How often a verifier re-reads the set of key ids that may verify (besides on each `signing_keys` invalidation). A new
 * key signs only once it is KEY_MATURE_SECONDS old, so every verifier knows a kid before any token carries it, and a
 * kid a verifier does not know is refused without asking PostgreSQL.
 */
export const KEY_SET_REFRESH_MS = 30_000 // the longest REALTIME_KEY_SET_REFRESH_MS may be
/**
 * 2.5 periodic re-reads (75 s): a verifier that missed the key's announcement and whose next re-read failed still has
 * a second periodic re-read, plus 15 s for clocks and a slow query, before the key signs. (Refresh + 15 s, as before,
 * left no room for one failed re-read.)
 */
export const KEY_MATURE_SECONDS = (KEY_SET_REFRESH_MS * 2.5) / 1000
/**
 * How long after `retired_at` a retired key still verifies: every token it signed has expired by then. A worker may
 * sign with a key for up to SIGNING_KEY_REFRESH_MS after it was retired, plus clock skew between hosts: the slack.
 */
export const RETIRED_KEY_VERIFIES_SECONDS = TOKEN_TTL_MAX + SIGNING_KEY_REFRESH_MS / 1000 + 60
/** Key ids are UUIDs; anything else is malformed before any lookup. */
const KID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/** A key that signs or verifies: its id (the JWT header's `kid`) and its HMAC-SHA256 secret. */
export interface SigningKey {
  kid: string
  secret: Buffer
}

const b64url = (data: Buffer | string) => Buffer.from(data).toString('base64url')
const hmac = (secret: Buffer, input: string) => createHmac('sha256', secret).update(input).digest()

let signing: { key: SigningKey; loadedAt: number } | undefined
let signingLoad: Promise<SigningKey> | undefined

/**
 * The keys that may verify, by kid, each with the instant (ms) it stops verifying. It holds every key in the table
 * that is not retired or retired less than RETIRED_KEY_VERIFIES_SECONDS ago — a handful, rotated by operators — and
 * nothing else: an unknown kid is answered from it without a query, and can never push a live key's secret out.
 */
let keySet: Map<string, { secret: Buffer; until: number }> | undefined
let keySetLoad: Promise<void> | undefined
let keySetTimer: ReturnType<typeof setInterval> | undefined
/** When the last read of the set failed (ms), while no set was ever loaded; undefined once one is. */
let keySetFailedAt: number | undefined
/**
 * While no key set was ever loaded, a `connect` frame may start a read of it at most this often (ms): after a failure,
 * frames are answered `unavailable` from memory until this has passed, so a flood of frames against a gateway whose
 * PostgreSQL is down or refusing costs one query per interval, not one per frame.
 */
export const KEY_SET_RETRY_MS = 3000
/** When an unknown kid last made a verifier with an empty key set read it again (ms). */
let emptySetReadAt = -Infinity

/** The newest non-retired signing key; creates the first one when there is none (serialized by an advisory lock). */
async function loadSigningKey(sql: Sql): Promise<SigningKey> {
  // A key signs once every verifier has had time to load it; a younger one only when no older one is left (the very
  // first key, announced when created; or an operator retired every older key).
  const newest = async (q: Sql | postgres.TransactionSql) => {
    const [row] = await q`
      select kid, secret_sealed from realtime_signing_keys
      where retired_at is null and secret_sealed is not null
      order by created_at <= now() - make_interval(secs => ${KEY_MATURE_SECONDS}) desc, created_at desc, kid desc limit 1`
    return row ? { kid: row.kid as string, secret: openSecret(row.kid, row.secret_sealed) } : undefined
  }
  const found = await newest(sql)
  if (found) return found
  const created = await sql.begin(async (tx): Promise<SigningKey & { created?: true }> => {
    // Two processes starting at once must not both create a key: the second waits, then finds the first one's.
    await tx`select pg_advisory_xact_lock(hashtext('realtime_signing_keys'))`
    const existing = await newest(tx)
    if (existing) return existing
    const key = { kid: randomUUID(), secret: randomBytes(32) }
    await tx`insert into realtime_signing_keys (kid, secret_sealed) values (${key.kid}, ${sealSecret(key.kid, key.secret)})`
    return { ...key, created: true }
  })
  // Verifiers reload their key set now rather than at their next periodic read.
  if (created.created) await publishInvalidation({ kind: 'signing_keys' })
  return { kid: created.kid, secret: created.secret }
}

/**
 * Rotation: inserts a new signing key (it signs once verifiers know it, KEY_MATURE_SECONDS later) and announces it.
 * @example const kid = await addSigningKey()
 */
export async function addSigningKey(sql: Sql = defaultSql): Promise<string> {
  const kid = randomUUID()
  await sql`insert into realtime_signing_keys (kid, secret_sealed) values (${kid}, ${sealSecret(kid, randomBytes(32))})`
  await publishInvalidation({ kind: 'signing_keys' })
  return kid
}

/**
 * Retires a signing key: it stops signing at each worker's next re-read, and verifies until every token it signed
 * has expired (RETIRED_KEY_VERIFIES_SECONDS after now). Announced, so verifiers learn the deadline at once.
 */
export async function retireSigningKey(kid: string, sql: Sql = defaultSql): Promise<void> {
  await sql`update realtime_signing_keys set retired_at = now() where kid = ${kid} and retired_at is null`
  await publishInvalidation({ kind: 'signing_keys' })
}

/** A signing secret as stored: sealed for its own row. */
export const sealSecret = (kid: string, secret: Buffer) => seal(secret, aadOf('realtime_signing_keys', kid))
const openSecret = (kid: string, sealed: Uint8Array) => open(Buffer.from(sealed), aadOf('realtime_signing_keys', kid))

/** When the last "signing with the held key" warning was logged (ms): at most one a SIGNING_KEY_REFRESH_MS. */
let heldKeyWarnedAt = -Infinity

async function currentSigningKey(sql: Sql, now: number): Promise<SigningKey> {
  if (signing && now - signing.loadedAt < SIGNING_KEY_REFRESH_MS) return signing.key
  signingLoad ??= loadSigningKey(sql)
    .then((key) => {
      signing = { key, loadedAt: Date.now() } // the real clock: a test's `now` in the future must not pin the key
      return key
    })
    .finally(() => (signingLoad = undefined))
  if (!signing) return signingLoad
  // A refresh only looks for a newer key: while the database cannot answer, the key in hand still signs, even if it was
  // retired meanwhile. That fails closed (verifiers stop accepting a retired key's tokens at its deadline, whoever
  // signed them), but an operator must be able to see it: a warning, at most once a re-read interval.
  const held = signing
  return signingLoad.catch((error) => {
    if (now - heldKeyWarnedAt >= SIGNING_KEY_REFRESH_MS) {
      heldKeyWarnedAt = now
      log('warn', 'signing key not re-read: still signing with the key held, which may have been retired since', {
        kid: held.key.kid, heldForMs: now - held.loadedAt, ...describeError(error),
      })
    }
    return held.key
  })
}

/**
 * Re-reads the set of keys that may verify (one query, one at a time). Verifiers call it on a `signing_keys`
 * invalidation; it also runs every REALTIME_KEY_SET_REFRESH_MS (at most KEY_SET_REFRESH_MS) from a process's first call on, whether that first read
 * succeeded or not (a gateway started while PostgreSQL is down loads its set as soon as it is back, with no client
 * waiting for it). A failed re-read keeps the set in hand (its retirement deadlines still apply) and is tried again at
 * the next tick.
 */
export function refreshSigningKeys(sql: Sql = defaultSql): Promise<void> {
  keySetTimer ??= setInterval(() => void reloadSigningKeys(sql), config.realtime.keySetRefreshMs)
  keySetTimer.unref?.()
  keySetLoad ??= (async () => {
    let rows
    try {
      rows = await sql`
        select kid, secret_sealed, extract(epoch from retired_at) * 1000 as retired_ms from realtime_signing_keys
        where secret_sealed is not null
          and (retired_at is null or retired_at > now() - make_interval(secs => ${RETIRED_KEY_VERIFIES_SECONDS}))`
    } catch (error) {
      if (!keySet) keySetFailedAt = Date.now()
      throw error
    }
    const keys = new Map<string, { secret: Buffer; until: number }>()
    for (const row of rows) {
      const until = row.retired_ms === null ? Infinity : Number(row.retired_ms) + RETIRED_KEY_VERIFIES_SECONDS * 1000
      // One row that does not open (sealed under a master key this process lacks) must not take the others down.
      try {
        keys.set(row.kid as string, { secret: openSecret(row.kid, row.secret_sealed), until })
      } catch (error) {
        log('error', 'signing key does not open; it cannot verify', { kid: row.kid, ...describeError(error) })
      }
    }
    keySet = keys
    keySetFailedAt = undefined
  })().finally(() => (keySetLoad = undefined))
  return keySetLoad
}

/**
 * refreshSigningKeys for callers that must not fail on it (the timer, an invalidation, a gateway starting): a failure is
 * logged, the set in hand keeps verifying, and the next tick tries again.
 */
export const reloadSigningKeys = (sql: Sql = defaultSql): Promise<void> =>
  refreshSigningKeys(sql).catch((error) => logUnlessOutage('signing keys not re-read', error))

/**
 * The secret of a kid that may verify at `nowMs`, or null. Reads the set only while it was never loaded, and then at
 * most once per KEY_SET_RETRY_MS: in between, a frame is answered `unavailable` without a query.
 */
async function secretFor(kid: string, sql: Sql, nowMs: number): Promise<Buffer | null> {
  if (!keySet) {
    if (!keySetLoad && keySetFailedAt !== undefined && Date.now() - keySetFailedAt < KEY_SET_RETRY_MS) {
      const retryAfter = Math.max(1, Math.ceil((keySetFailedAt + KEY_SET_RETRY_MS - Date.now()) / 1000))
      throw unavailable('The signing keys could not be loaded yet; retry shortly', retryAfter)
    }
    await refreshSigningKeys(sql)
  }
  let key = keySet!.get(kid)
  // A re-read under way (announced by an invalidation) may bring this kid: wait for it.
  if (!key && keySetLoad) {
    await keySetLoad.catch(() => {})
    key = keySet!.get(kid)
  }
  // An empty set is a deployment whose first key is being created now: its first tokens may reach this verifier before
  // the key's announcement does. Read the set again then, at most once per KEY_SET_RETRY_MS whatever the kids, so a
  // flood of forged kids costs one query per interval, and none once any key is known.
  if (!key && keySet!.size === 0 && Date.now() - emptySetReadAt >= KEY_SET_RETRY_MS) {
    emptySetReadAt = Date.now()
    await reloadSigningKeys(sql)
    key = keySet!.get(kid)
  }
  return key && key.until > nowMs ? key.secret : null
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
  /** Seconds since the epoch; for tests (it also ages the signing key in hand). */
  now?: number
}

/**
 * Signs a delegated token with the current signing key.
 * @example const { token, expiresAt } = await signToken({ productId, subject: 'abc', channels: [{ name: 'chat:1', ops: ['subscribe'] }] })
 */
export async function signToken(input: SignInput, sql: Sql = defaultSql): Promise<{ token: string; claims: Claims; expiresAt: Date }> {
  const ttl = input.ttlSeconds ?? TOKEN_TTL_DEFAULT
  if (!Number.isInteger(ttl) || ttl < TOKEN_TTL_MIN || ttl > TOKEN_TTL_MAX) throw new RangeError(`ttlSeconds must be ${TOKEN_TTL_MIN}..${TOKEN_TTL_MAX}`)
  // `now` (tests) also decides whether the key in hand is due for a re-read.
  const key = await currentSigningKey(sql, input.now === undefined ? Date.now() : input.now * 1000)
  const iat = input.now ?? Math.floor(Date.now() / 1000)
  const claims: Claims = {
    sub: `ext:${input.subject}`, ext: true, pid: input.productId, akid: input.apiKeyId, env: config.environment,
    channels: input.channels.map((c) => ({ name: c.name, ops: [...c.ops] })), iat, exp: iat + ttl, jti: randomUUID(),
  }
  return { token: signClaims(key, claims), claims, expiresAt: new Date(claims.exp * 1000) }
}

/** The compact JWT of `claims` signed with `key` (HS256, its kid in the header). Pure: the key is given. */
export function signClaims(key: SigningKey, claims: Claims): string {
  const signingInput = `${b64url(JSON.stringify({ alg: 'HS256', typ: 'JWT', kid: key.kid }))}.${b64url(JSON.stringify(claims))}`
  return `${signingInput}.${b64url(hmac(key.secret, signingInput))}`
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
export function verifyToken(token: string, options: { now?: number; sql?: Sql } = {}): Promise<Claims> {
  // A retired key's deadline is judged at `now` too (a test checks it to the second); else to the millisecond.
  const nowMs = options.now === undefined ? Date.now() : options.now * 1000
  return verifyWith(token, (kid) => secretFor(kid, options.sql ?? defaultSql, nowMs), options.now)
}

/**
 * verifyToken's checks against the keys `secretOf` gives (null: no key with that kid may verify), at `now` (seconds
 * since the epoch, default the clock): the key set is passed in, so the rules are tested with none stored.
 */
export async function verifyWith(token: string, secretOf: (kid: string) => Promise<Buffer | null>, now?: number): Promise<Claims> {
  if (typeof token !== 'string' || token.length > 16_384) throw new TokenError('malformed')
  const parts = token.split('.')
  if (parts.length !== 3 || parts.some((p) => !/^[A-Za-z0-9_-]+$/.test(p))) throw new TokenError('malformed')
  const [headerPart, payloadPart, signaturePart] = parts as [string, string, string]
  const header = decodeJson(headerPart)
  if (!isObject(header) || header.alg !== 'HS256' || typeof header.kid !== 'string' || !KID.test(header.kid)) {
    throw new TokenError('malformed')
  }
  const secret = await secretOf(header.kid)
  if (!secret) throw new TokenError('unknown_key')
  const expected = hmac(secret, `${headerPart}.${payloadPart}`)
  const given = Buffer.from(signaturePart, 'base64url')
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw new TokenError('bad_signature')
  const claims = checkClaims(decodeJson(payloadPart))
  if (claims.env !== config.environment) throw new TokenError('wrong_environment')
  if (claims.exp <= (now ?? Math.floor(Date.now() / 1000))) throw new TokenError('expired')
  return claims
}

/** Forgets every cached key (tests rotating keys): the next signature and the next verification read them again. */
export function resetTokenKeyCache(): void {
  signing = undefined
  heldKeyWarnedAt = -Infinity
  keySet = undefined
  keySetFailedAt = undefined
  emptySetReadAt = -Infinity
}
