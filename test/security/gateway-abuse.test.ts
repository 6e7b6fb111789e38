// A hostile client against real gateway processes: floods of connect frames with forged key ids cost no database
// query (counted on the wire to PostgreSQL) and leave the gateway serving; upgrades and connect frames per client IP,
// connections per subject and Redis-costly reads per connection are bounded; retired signing keys stop verifying once
// every token they signed has expired. A gateway that could not load its signing keys answers `unavailable` from
// memory between load attempts, and loads them by itself once PostgreSQL is back.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createHmac, randomBytes, randomUUID } from 'node:crypto'
import { connect } from 'node:net'
import postgres from 'postgres'
import { config } from '../../shared/config'
import { sql, unboundedSql } from '../../shared/db/client'
import { migrate } from '../../shared/db/migrate'
import { aadOf } from '../../shared/db/seal-secrets'
import { publishInvalidation } from '../../shared/cache/invalidation'
import { open } from '../../shared/secrets'
import { LIMITED_CLOSE_CODE, LIMITED_MIN_DELAY_MS, reconnectDelay } from '../../shared/realtime-client/client'
import { addSigningKey, KEY_SET_RETRY_MS, refreshSigningKeys, resetTokenKeyCache, retireSigningKey, RETIRED_KEY_VERIFIES_SECONDS, sealSecret, signToken, TOKEN_TTL_MAX, TokenError, type TokenChannel, verifyToken } from '../../shared/realtime/tokens'
import { type Frame, startGateway, type GatewayProcess, WsClient } from '../gateway/ws-helpers'
import { awayFromWindowEdge, realtimeProduct, type RealtimeProduct, uniqueIp } from '../realtime/public-helpers'
import { startQueryCounter, type QueryCounter } from './pg-query-counter'

const SUBJECT_LIMIT = 3
const READ_BURST = 3
const IP_UPGRADES = 6
const IP_CONNECTS = 3

let counter: QueryCounter
/** Its PostgreSQL link goes through `counter`; per-subject and read limits are low. */
let guarded: GatewayProcess
/** Low per-IP limits, behind a "proxy" (TRUST_PROXY): the test picks each client's address with X-Forwarded-For. */
let proxied: GatewayProcess
let product: RealtimeProduct
/** In front of `cold`'s PostgreSQL: it refuses every connection (a server starting up) until a test lets them through. */
let coldCounter: QueryCounter
/** Started while its PostgreSQL refuses connections, so it never loaded its signing keys. */
let cold: GatewayProcess

/** A gateway is ready only with PostgreSQL, so this one is awaited live (/healthz) instead. */
// Its periodic re-read of the key set every 10 s, not 30 s: the test waits for one. Longer than the flood (2.5 x
// KEY_SET_RETRY_MS), so that at most one periodic re-read falls within it, as the bound on attempts counts.
const COLD_KEY_SET_REFRESH_MS = 10_000
const startColdGateway = () => startGateway({
  GATEWAY_IP_UPGRADES_PER_MINUTE: '100000', GATEWAY_IP_CONNECTS_PER_MINUTE: '100000', DATABASE_URL: coldCounter.url(config.databaseUrl),
  REALTIME_KEY_SET_REFRESH_MS: String(COLD_KEY_SET_REFRESH_MS),
}, undefined, '/healthz')

beforeAll(async () => {
  const pg = new URL(config.databaseUrl)
  counter = await startQueryCounter({ host: pg.hostname, port: Number(pg.port) })
  coldCounter = await startQueryCounter({ host: pg.hostname, port: Number(pg.port) })
  coldCounter.startingUp = true
  ;[cold, guarded, proxied, product] = await Promise.all([
    startColdGateway(),
    startGateway({
      DATABASE_URL: counter.url(config.databaseUrl), GATEWAY_IP_UPGRADES_PER_MINUTE: '100000', GATEWAY_IP_CONNECTS_PER_MINUTE: '100000',
      GATEWAY_MAX_CONNECTIONS_PER_SUBJECT: String(SUBJECT_LIMIT), GATEWAY_READS_PER_SECOND: '1', GATEWAY_READ_BURST: String(READ_BURST),
    }),
    startGateway({ TRUST_PROXY: '1', GATEWAY_IP_UPGRADES_PER_MINUTE: String(IP_UPGRADES), GATEWAY_IP_CONNECTS_PER_MINUTE: String(IP_CONNECTS) }),
    realtimeProduct([{ name: 'chat', presence: true, history: { ttlSeconds: 300, size: 100 } }]),
  ])
}, 30_000)

afterAll(async () => {
  await Promise.all([cold?.stop(), guarded?.stop(), proxied?.stop()])
  await Promise.all([counter?.close(), coldCounter?.close()])
})

/** Polls `check` until it holds; false if it still does not after `ms`. */
async function until(check: () => boolean | Promise<boolean>, ms: number, everyMs = 50): Promise<boolean> {
  for (const deadline = Date.now() + ms; ; await Bun.sleep(everyMs)) {
    if (await check()) return true
    if (Date.now() > deadline) return false
  }
}

async function token(channels: TokenChannel[], subject = `user-${randomUUID().slice(0, 8)}`) {
  return (await signToken({ productId: product.productId, apiKeyId: product.keyId, subject, channels })).token
}

async function connected(gateway: GatewayProcess, tokenText: string, headers?: Record<string, string>): Promise<WsClient> {
  const client = await WsClient.open(gateway.wsUrl, headers)
  expect(await client.request({ type: 'connect', token: tokenText })).toMatchObject({ type: 'reply', to: 'connect' })
  return client
}

const b64 = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url')

/** A token with the given header `kid`, a plausible payload and a signature that matches nothing. */
function forged(kid: unknown): string {
  const now = Math.floor(Date.now() / 1000)
  const claims = { sub: 'ext:x', ext: true, pid: randomUUID(), akid: randomUUID(), env: config.environment, channels: [], iat: now, exp: now + 600, jti: randomUUID() }
  return `${b64({ alg: 'HS256', typ: 'JWT', kid })}.${b64(claims)}.${randomBytes(32).toString('base64url')}`
}

/** A token correctly signed with `secret` under `kid`, issued at `now` (seconds) for 600 s. */
function signedWith(kid: string, secret: Buffer, now = Math.floor(Date.now() / 1000)): string {
  const claims = { sub: 'ext:retired', ext: true, pid: product.productId, akid: product.keyId, env: config.environment, channels: [], iat: now, exp: now + 600, jti: randomUUID() }
  const input = `${b64({ alg: 'HS256', typ: 'JWT', kid })}.${b64(claims)}`
  return `${input}.${createHmac('sha256', secret).update(input).digest('base64url')}`
}

/** What `gateway` does with a connect frame carrying `tokenText`: 'connected', or the reason it closed the socket. */
async function outcome(gateway: GatewayProcess, tokenText: string): Promise<string> {
  const client = await WsClient.open(gateway.wsUrl)
  const frame = await Promise.race([client.request({ type: 'connect', token: tokenText }), client.closed])
  client.close()
  return 'to' in frame ? 'connected' : (frame as { reason: string }).reason
}

/** One raw upgrade request; the status code and headers of the answer (101 or a refusal). */
async function upgrade(port: number, headers: Record<string, string>): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  const socket = connect(port, '127.0.0.1')
  const extra = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')
  socket.write(`GET /connection/websocket HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n`
    + `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n${extra}\r\n`)
  const text = await new Promise<string>((resolve, reject) => {
    let data = ''
    socket.on('data', (chunk) => {
      data += chunk.toString()
      const end = data.indexOf('\r\n\r\n')
      if (end < 0) return
      // 101 has no body; a refusal has a JSON body of content-length bytes.
      const length = Number(/content-length: (\d+)/i.exec(data)?.[1] ?? 0)
      if (data.startsWith('HTTP/1.1 101') || data.length >= end + 4 + length) resolve(data)
    })
    socket.on('error', reject)
  })
  socket.destroy()
  const [head, body = ''] = text.split('\r\n\r\n')
  const [statusLine, ...lines] = head!.split('\r\n')
  return {
    status: Number(statusLine!.split(' ')[1]),
    headers: Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()])),
    body,
  }
}

describe('a gateway whose PostgreSQL refused it at start (it never loaded its signing keys)', () => {
  test('a flood of connect frames is answered `unavailable` with at most one load attempt every few seconds; once PostgreSQL is back the keys load by themselves and a real client connects', async () => {
    const real = await token([{ name: 'chat:a', ops: ['subscribe'] }])
    const refusedBefore = coldCounter.refused
    const started = Date.now()
    const floodMs = 2.5 * KEY_SET_RETRY_MS
    const answers = new Map<string, number>()
    // 20 clients, each sending a connect frame every 10 ms or so for the whole flood (over a thousand a second):
    // `unavailable` keeps a socket open until the protocol's connect deadline (5 s without a successful connect) closes
    // it; then the client opens another.
    await Promise.all(Array.from({ length: 20 }, async (_, i) => {
      for (let n = 0; Date.now() - started < floodMs; ) {
        const client = await WsClient.open(cold.wsUrl)
        const closed = client.closed.then(({ code, reason }) => ({ type: 'closed', code: `${code} ${reason}` }))
        for (; Date.now() - started < floodMs; n++) {
          const frame = await Promise.race([client.request({ type: 'connect', token: (i + n) % 4 ? forged(randomUUID()) : real }), closed])
          if (frame.type === 'closed') {
            if (frame.code !== '4001 invalid token: no connect frame in time') answers.set(frame.code, (answers.get(frame.code) ?? 0) + 1)
            break
          }
          const answer = frame.type === 'error' ? String(frame.code) : frame.type
          answers.set(answer, (answers.get(answer) ?? 0) + 1)
          await Bun.sleep(10)
        }
        client.close()
      }
    }))
    const elapsed = Date.now() - started
    const attempts = coldCounter.refused - refusedBefore
    expect([...answers.keys()]).toEqual(['unavailable'])
    expect(answers.get('unavailable')!).toBeGreaterThanOrEqual(1000)
    // One attempt when the last failure is KEY_SET_RETRY_MS old, at most one more from the periodic re-read.
    expect(attempts).toBeGreaterThanOrEqual(1)
    expect(attempts).toBeLessThanOrEqual(Math.ceil(elapsed / KEY_SET_RETRY_MS) + 1)
    expect(coldCounter.executed).toEqual([])

    // Back: with no frame to prompt it, the gateway reads its key set at its next periodic re-read.
    coldCounter.startingUp = false
    expect(await until(() => coldCounter.executed.some((q) => q.includes('realtime_signing_keys')), COLD_KEY_SET_REFRESH_MS + 10_000, 100)).toBe(true)
    const client = await connected(cold, real)
    expect(await client.request({ type: 'ping' })).toMatchObject({ type: 'reply', to: 'ping' })
    client.close()
  }, COLD_KEY_SET_REFRESH_MS + 40_000)
})

describe('forged key ids', () => {
  test('a flood of connect frames with unknown, malformed and over-long kids is refused 4001 with no database query; a real client still connects', async () => {
    // The counter sees the gateway's queries: its key set was read through it at start (ready does not wait for it).
    expect(await until(() => counter.executed.some((q) => q.includes('realtime_signing_keys')), 10_000)).toBe(true)
    const before = counter.executed.length
    const kids: unknown[] = []
    for (let i = 0; i < 100; i++) kids.push(randomUUID())
    for (let i = 0; i < 40; i++) kids.push(`${randomUUID()}x`, `../${i}`, 'A'.repeat(8000 + i), i, null)
    for (let i = 0; i < 20; i++) kids.push(randomUUID().toUpperCase(), '')
    const reasons = new Map<string, number>()
    for (let i = 0; i < kids.length; i += 40) {
      await Promise.all(kids.slice(i, i + 40).map(async (kid) => {
        const client = await WsClient.open(guarded.wsUrl)
        client.send({ type: 'connect', id: 1, token: forged(kid) })
        const { code, reason } = await client.closed
        expect(code).toBe(4001)
        reasons.set(reason, (reasons.get(reason) ?? 0) + 1)
      }))
    }
    expect([...reasons.keys()].sort()).toEqual(['invalid token: malformed', 'invalid token: unknown_key'])
    expect(reasons.get('invalid token: unknown_key')).toBe(100)
    // 360 refused frames, and not one statement for them. The only statement allowed meanwhile is the periodic re-read
    // of the key set (every 30 s, whatever the traffic), or the gateway's own usage flush.
    const during = counter.executed.slice(before)
    expect(during.filter((q) => !q.includes('realtime_signing_keys') && !q.includes('realtime_usage') && !q.includes('realtime_connection'))).toEqual([])
    expect(during.filter((q) => q.includes('realtime_signing_keys')).length).toBeLessThanOrEqual(1)
    const client = await connected(guarded, await token([{ name: 'chat:a', ops: ['subscribe'] }]))
    expect(await client.request({ type: 'ping' })).toMatchObject({ type: 'reply', to: 'ping' })
    client.close()
  }, 60_000)

  test('a key added and announced verifies at once; keys retired longer ago than a token lives stop verifying, the others verify until then', async () => {
    const now = Date.now()
    // `expiring` reaches its deadline this long after `now`: time enough to check it still verifies, on a loaded machine.
    const marginMs = 15_000
    const keys = { recent: randomUUID(), expiring: randomUUID(), old: randomUUID(), fresh: randomUUID() }
    const secrets = Object.fromEntries(Object.entries(keys).map(([name]) => [name, randomBytes(32)])) as Record<keyof typeof keys, Buffer>
    // Created long ago, so none of them ever becomes the key that signs.
    const insert = (kid: string, secret: Buffer, retiredMsAgo: number | null) => sql`
      insert into realtime_signing_keys (kid, secret_sealed, created_at, retired_at)
      values (${kid}, ${sealSecret(kid, secret)}, now() - interval '3 days', ${retiredMsAgo === null ? null : new Date(now - retiredMsAgo)})`
    await insert(keys.recent, secrets.recent, 120_000)
    await insert(keys.expiring, secrets.expiring, RETIRED_KEY_VERIFIES_SECONDS * 1000 - marginMs)
    await insert(keys.old, secrets.old, RETIRED_KEY_VERIFIES_SECONDS * 1000 + 10_000)
    await insert(keys.fresh, secrets.fresh, null)
    try {
      await publishInvalidation({ kind: 'signing_keys' })
      const as = (kid: keyof typeof keys) => outcome(guarded, signedWith(keys[kid], secrets[kid]))
      // The gateway re-reads its key set on the announcement: well within 5 s, long before its next periodic re-read.
      expect(await until(async () => (await as('fresh')) === 'connected', 5000, 100)).toBe(true)
      expect(await as('recent')).toBe('connected')
      expect(await as('expiring')).toBe('connected')
      expect(await as('old')).toBe('invalid token: unknown_key')
      // Past the deadline (waiting at least that long; the gateway reads the same clock), the key no longer verifies.
      // To the second, with no re-read: 'the verifier in process' below.
      await Bun.sleep(Math.max(0, now + marginMs - Date.now()) + 500)
      expect(await as('expiring')).toBe('invalid token: unknown_key')
      expect(await as('recent')).toBe('connected')
    } finally {
      await sql`delete from realtime_signing_keys where kid in ${sql(Object.values(keys))}`
    }
  }, 60_000)
})

test('addSigningKey announces the new key: the gateway verifies its tokens at once, not at its next periodic re-read; retired, they still verify', async () => {
  const kid = await addSigningKey()
  // Inserted unannounced: it verifies once the gateway has re-read its set on the retirement's announcement.
  const marker = { kid: randomUUID(), secret: randomBytes(32) }
  try {
    const [row] = await sql`select secret_sealed from realtime_signing_keys where kid = ${kid}`
    const secret = open(Buffer.from(row!.secret_sealed), aadOf('realtime_signing_keys', kid))
    // Well within 5 s of the announcement; the periodic re-read comes every 30 s.
    expect(await until(async () => (await outcome(guarded, signedWith(kid, secret))) === 'connected', 5000, 100)).toBe(true)
    await sql`insert into realtime_signing_keys (kid, secret_sealed, created_at) values (${marker.kid}, ${sealSecret(marker.kid, marker.secret)}, now() - interval '3 days')`
    await retireSigningKey(kid)
    expect(await until(async () => (await outcome(guarded, signedWith(marker.kid, marker.secret))) === 'connected', 5000, 100)).toBe(true)
    expect(await outcome(guarded, signedWith(kid, secret))).toBe('connected')
  } finally {
    await sql`delete from realtime_signing_keys where kid in ${sql([kid, marker.kid])}`
  }
}, 30_000)

describe('per client IP (TRUST_PROXY: the last X-Forwarded-For address)', () => {
  test(`past ${IP_UPGRADES} upgrades a minute an address gets 429 with Retry-After; other addresses are not affected`, async () => {
    await awayFromWindowEdge(60, 10_000)
    const ip = uniqueIp()
    // Earlier entries are the client's own claims: only the one the proxy appended counts.
    for (let i = 0; i < IP_UPGRADES; i++) expect((await upgrade(proxied.port, { 'x-forwarded-for': `${uniqueIp()}, ${ip}` })).status).toBe(101)
    const refused = await upgrade(proxied.port, { 'x-forwarded-for': `${uniqueIp()}, ${ip}` })
    expect(refused.status).toBe(429)
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1)
    expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(60)
    expect(JSON.parse(refused.body)).toMatchObject({ error: 'rate_limited', message: expect.stringContaining('upgrades a minute') })
    expect((await upgrade(proxied.port, { 'x-forwarded-for': uniqueIp() })).status).toBe(101)
  })

  test(`past ${IP_CONNECTS} connect frames a minute an address is closed 4300; other addresses still connect`, async () => {
    await awayFromWindowEdge(60, 10_000)
    const ip = uniqueIp()
    const channels = [{ name: 'chat:a', ops: ['subscribe'] as const }].map((c) => ({ ...c, ops: [...c.ops] }))
    const open: WsClient[] = []
    for (let i = 0; i < IP_CONNECTS; i++) open.push(await connected(proxied, await token(channels), { 'x-forwarded-for': ip }))
    const over = await WsClient.open(proxied.wsUrl, { 'x-forwarded-for': ip })
    over.send({ type: 'connect', id: 1, token: await token(channels) })
    expect(await over.closed).toEqual({ code: 4300, reason: 'rate limited: too many connect frames from this address' })
    open.push(await connected(proxied, await token(channels), { 'x-forwarded-for': uniqueIp() }))
    for (const client of open) client.close()
  })
})

describe('per token subject', () => {
  test(`past ${SUBJECT_LIMIT} open connections a subject's next connect is closed 4300; another subject connects; a closed one frees its place`, async () => {
    const subject = `user-${randomUUID().slice(0, 8)}`
    const channels = [{ name: 'chat:a', ops: ['subscribe' as const] }]
    const open: WsClient[] = []
    for (let i = 0; i < SUBJECT_LIMIT; i++) open.push(await connected(guarded, await token(channels, subject)))
    const over = await WsClient.open(guarded.wsUrl)
    over.send({ type: 'connect', id: 1, token: await token(channels, subject) })
    expect(await over.closed).toEqual({ code: 4300, reason: 'rate limited: too many connections for this subject' })
    const other = await connected(guarded, await token(channels))
    open[0]!.close()
    await open[0]!.closed
    // The place is freed once the gateway has seen the close: until then a connect is still refused 4300.
    let again: WsClient | undefined
    expect(await until(async () => {
      const client = await WsClient.open(guarded.wsUrl)
      const frame = await Promise.race([client.request({ type: 'connect', token: await token(channels, subject) }), client.closed])
      if ('to' in frame) return Boolean((again = client))
      expect(frame).toEqual({ code: 4300, reason: 'rate limited: too many connections for this subject' })
      return false
    }, 5000)).toBe(true)
    open[0] = again!
    for (const client of [...open, other]) client.close()
  })

  test('the reference client waits at least 5 s after a 4300, and backs off further on each one in a row', () => {
    expect(reconnectDelay(LIMITED_CLOSE_CODE, 0, 500, 20_000, () => 0)).toBe(LIMITED_MIN_DELAY_MS)
    expect(reconnectDelay(LIMITED_CLOSE_CODE, 3, 500, 20_000, () => 0.5)).toBe(LIMITED_MIN_DELAY_MS + 2000)
    expect(reconnectDelay(4001, 0, 500, 20_000, () => 0.5)).toBe(0)
  })
})

describe(`Redis-costly reads per connection (1 a second, burst ${READ_BURST})`, () => {
  /** Sends every frame at once; their answers in order ('reply' or the error code), and how long the flood took. */
  const flood = async (client: WsClient, frames: Record<string, unknown>[]) => {
    const started = Date.now()
    const ids = frames.map((frame, i) => {
      const id = `f${i}-${randomUUID().slice(0, 4)}`
      client.send({ ...frame, id })
      return id
    })
    const answers: Frame[] = []
    for (const id of ids) answers.push(await client.next((f) => f.id === id && (f.type === 'reply' || f.type === 'error')))
    return { answers, seconds: (Date.now() - started) / 1000 }
  }
  /**
   * A full bucket answers the first READ_BURST frames; the rest are `rate_limited`, but for the tokens that refilled
   * while the flood was handled: at most one per whole second it took (usually none). Measured, not assumed.
   */
  const expectBucket = ({ answers, seconds }: { answers: Frame[]; seconds: number }) => {
    const kinds = answers.map((f) => (f.type === 'reply' ? 'reply' : f.code))
    const replies = kinds.filter((k) => k === 'reply').length
    expect(kinds.slice(0, READ_BURST)).toEqual(Array(READ_BURST).fill('reply'))
    expect(replies).toBeLessThanOrEqual(READ_BURST + Math.floor(seconds))
    expect(kinds.filter((k) => k === 'rate_limited').length).toBe(answers.length - replies)
    for (const f of answers.filter((f) => f.type === 'error')) expect(f).toMatchObject({ type: 'error', code: 'rate_limited', temporary: true })
    return answers.length - replies
  }

  test('history, presence.read and subscribe with a cursor beyond the bucket are `rate_limited`; the connection stays usable and refills', async () => {
    const names = Array.from({ length: 14 }, (_, i) => `chat:r${i}-${randomUUID().slice(0, 6)}`)
    const client = await connected(guarded, await token(names.map((name) => ({ name, ops: ['subscribe', 'history', 'presence'] }))))

    // history draws from the bucket; presence.read draws from the same one (sent after the history frames emptied it).
    const first = await flood(client, [...Array.from({ length: 20 }, () => ({ type: 'history', channel: names[0], last_n: 5 })), { type: 'presence.read', channel: names[0] }])
    expect(expectBucket(first)).toBeGreaterThanOrEqual(1)
    // Not a costly read: answered whatever the bucket holds.
    expect(await client.request({ type: 'ping' })).toMatchObject({ type: 'reply', to: 'ping' })
    expect(await client.request({ type: 'subscribe', channel: names[13] })).toMatchObject({ type: 'reply', to: 'subscribe' })

    await Bun.sleep(READ_BURST * 1000 + 200) // refilled: waiting at least this long, whatever the load
    expect(expectBucket(await flood(client, Array.from({ length: 12 }, () => ({ type: 'presence.read', channel: names[0] }))))).toBeGreaterThanOrEqual(1)

    await Bun.sleep(READ_BURST * 1000 + 200)
    const cursors = await flood(client, names.slice(0, 12).map((channel) => ({ type: 'subscribe', channel, offset: 0, epoch: 'e' })))
    expect(expectBucket(cursors)).toBeGreaterThanOrEqual(1)
    // A refused subscribe left nothing behind: after a refill the same cursor subscribes.
    const refused = names[cursors.answers.findLastIndex((f) => f.type === 'error')]
    await Bun.sleep(1100)
    expect(await client.request({ type: 'subscribe', channel: refused, offset: 0, epoch: 'e' })).toMatchObject({ type: 'reply', to: 'subscribe', recovered: false })
    client.close()
  }, 30_000)
})

describe('the verifier in process', () => {
  test('a retired key verifies until the second before its deadline (retired_at + RETIRED_KEY_VERIFIES_SECONDS) and not from that second on, judged at verifyToken\'s `now`', async () => {
    const kid = randomUUID()
    const secret = randomBytes(32)
    const retiredAt = Math.floor(Date.now() / 1000) - 60
    await sql`insert into realtime_signing_keys (kid, secret_sealed, created_at, retired_at)
              values (${kid}, ${sealSecret(kid, secret)}, now() - interval '3 days', ${new Date(retiredAt * 1000)})`
    try {
      await refreshSigningKeys()
      const deadline = retiredAt + RETIRED_KEY_VERIFIES_SECONDS
      const at = (now: number) => verifyToken(signedWith(kid, secret, now), { now }).then(() => 'verified', (e) => (e instanceof TokenError ? e.reason : String(e)))
      expect(await at(retiredAt + 60)).toBe('verified')
      expect(await at(deadline - 1)).toBe('verified')
      expect(await at(deadline)).toBe('unknown_key')
      expect(await at(deadline + TOKEN_TTL_MAX)).toBe('unknown_key')
    } finally {
      await sql`delete from realtime_signing_keys where kid = ${kid}`
    }
  })

  test('after its key set is loaded, 5 000 unknown kids never touch the database (one that failed every query) and evict nothing: a real token still verifies', async () => {
    const { token: real } = await signToken({ productId: product.productId, apiKeyId: product.keyId, subject: 'x', channels: [] })
    await refreshSigningKeys()
    const broken = (() => Promise.reject(new Error('no database'))) as unknown as typeof sql
    const reasons = new Set<string>()
    for (let i = 0; i < 5000; i++) {
      await verifyToken(forged(i % 2 ? randomUUID() : `x${i}`), { sql: broken }).catch((error) => reasons.add(error instanceof TokenError ? error.reason : String(error)))
    }
    expect([...reasons].sort()).toEqual(['malformed', 'unknown_key'])
    expect((await verifyToken(real, { sql: broken })).sub).toBe('ext:x')
  })
})

describe('a fresh deployment (its first signing key is being created)', () => {
  test('a gateway that holds no signing key reads the set again for an unknown kid, at most once per KEY_SET_RETRY_MS whatever a flood sends, so the first tokens verify before the key is announced', async () => {
    // A database of its own with no signing key, as a new deployment starts; the gateway loads its (empty) set first.
    const name = `platform_fresh_${randomUUID().replaceAll('-', '').slice(0, 12)}`
    // Without the statement deadline: CREATE and DROP DATABASE write the whole template through the WAL and wait for a
    // checkpoint, which on a loaded machine outlasted the 2 s deadline (a 503 from the setup, not from the gateway).
    const admin = unboundedSql()
    await admin.unsafe(`create database ${name}`)
    const url = new URL(process.env.DATABASE_URL ?? config.databaseUrl)
    url.pathname = `/${name}`
    const fresh = postgres(url.toString(), { max: 2, onnotice: () => {} })
    let gateway: GatewayProcess | undefined
    const counted = await startQueryCounter({ host: url.hostname, port: Number(url.port) })
    try {
      await migrate(fresh)
      gateway = await startGateway({ DATABASE_URL: counted.url(url.toString()) })
      // Forged kids against the empty set: one read of the set per KEY_SET_RETRY_MS at most, not one per frame.
      const reads = () => counted.executed.filter((text) => text.includes('from realtime_signing_keys')).length
      const before = reads()
      const started = Date.now()
      const flood = await Promise.all(Array.from({ length: 40 }, () => WsClient.open(gateway!.wsUrl)))
      for (const socket of flood) socket.send({ type: 'connect', id: 1, token: forged(randomUUID()) })
      const refusals = await Promise.all(flood.map((socket) => socket.closed))
      expect(refusals.every((closed) => closed.code === 4001)).toBe(true)
      expect(reads() - before).toBeLessThanOrEqual(Math.ceil((Date.now() - started) / KEY_SET_RETRY_MS) + 1)
      await Bun.sleep(KEY_SET_RETRY_MS + 100) // the flood spent this interval's read; the next token may start one
      // The first key, inserted as the first token issue inserts it, but not announced: the gateway cannot have heard of it.
      const kid = randomUUID()
      const secret = randomBytes(32)
      await fresh`insert into realtime_signing_keys (kid, secret_sealed) values (${kid}, ${sealSecret(kid, secret)})`
      resetTokenKeyCache() // this process signs with the fresh database's key below
      const { token } = await signToken({ productId: randomUUID(), apiKeyId: randomUUID(), subject: 'first', channels: [] }, fresh)
      expect(JSON.parse(Buffer.from(token.split('.')[0]!, 'base64url').toString()).kid).toBe(kid)
      const client = await WsClient.open(gateway.wsUrl)
      client.send({ type: 'connect', id: 1, token })
      // The signature verified (no `unknown_key`); the token's API key is not one of this database's, so it counts as
      // revoked: a check that only runs on a verified token.
      expect(await client.closed).toEqual({ code: 4001, reason: 'invalid token: api key revoked' })
    } finally {
      resetTokenKeyCache() // the rest of the suite signs with the test database's keys again
      await gateway?.stop()
      await counted.close()
      await fresh.end()
      await admin.unsafe(`drop database if exists ${name} with (force)`)
      await admin.end()
    }
  }, 30_000)
})
