// The channel inspector's operations on the platform API: a console token that works on a real gateway, and the public
// routes' publish, history, presence and status, scoped to the caller's product and its realtime area.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { sql } from '../../shared/db/client'
import { INLINE_CAP_BYTES, s3 } from '../../shared/realtime/payloads'
import { type Publication, RealtimeClient } from '../../shared/realtime-client/client'
import { quotaWindow } from '../../shared/realtime/publish-quota'
import { revokedAmong } from '../../shared/realtime/revocations'
import { signToken } from '../../shared/realtime/tokens'
import { redis } from '../../shared/redis/client'
import { publishInvalidation } from '../../shared/cache/invalidation'
import { listenForInvalidations } from '../../shared/cache/invalidation-listener'
import { endSession } from '../../services/api/accounts/users'
import { buildPublicApp } from '../../services/public/app'
import { call, callApp, eventually, failingFields, newPlatformKey, newProduct, ok } from '../helpers'
import { startGateway, type GatewayProcess, WsClient } from '../gateway/ws-helpers'
import { createKey, manage } from './public-helpers'

type Owner = Awaited<ReturnType<typeof newProduct>>
const as = (who: { token: string; productId?: string }, method: string, path: string, body?: unknown) =>
  call(method, path, { token: who.token, productId: who.productId, body })

let owner: Owner
let gateway: GatewayProcess
/** Sweeps its live connections against PostgreSQL every 10 minutes: what it closes sooner, an announcement made it close. */
let slowSweep: GatewayProcess
beforeAll(async () => {
  owner = await newProduct('Realtime console')
  await manage(owner, 'POST', '/realtime/namespaces', { name: 'chat', presence: true, history: { ttlSeconds: 300, size: 100 } })
  await manage(owner, 'POST', '/realtime/namespaces', { name: 'quiet' }) // no presence, no history, no client events
  // A short revocation sweep: what no announcement carries (a session's expiry) closes live connections within it.
  ;[gateway, slowSweep] = await Promise.all([
    startGateway({ GATEWAY_REVOCATION_SWEEP_MS: '200' }),
    startGateway({ GATEWAY_REVOCATION_SWEEP_MS: '600000' }),
  ])
}, 30_000)
afterAll(() => Promise.all([gateway?.stop(), slowSweep?.stop()]))

/** A console token of `who` (a session or platform key) for `name`, subscribe only. */
const consoleToken = async (who: { token: string; productId?: string }, name: string) =>
  ok(await as(who, 'POST', '/realtime/tokens', { channels: [{ name, ops: ['subscribe'] }] }), 'issue').body.token as string

/** A raw connection of `token` on `on`, connected (its `closed` resolves with the close code and reason). */
async function connectedWith(on: GatewayProcess, token: string): Promise<WsClient> {
  const client = await WsClient.open(on.wsUrl)
  expect(await client.request({ type: 'connect', token })).toMatchObject({ type: 'reply', to: 'connect' })
  return client
}

/** What a fresh connect with `token` gets: the reply's type, or the close that refused it. */
async function tryConnect(on: GatewayProcess, token: string): Promise<{ reply: string } | { code: number; reason: string }> {
  const client = await WsClient.open(on.wsUrl)
  try {
    const replied = await client.request({ type: 'connect', token }).then((frame) => ({ reply: String(frame.type) }), () => null)
    return replied ?? (await client.closed)
  } finally {
    client.close()
  }
}

const ENDED = { code: 4001, reason: 'invalid token: console access ended' }

const channel = () => `chat:room-${randomUUID().slice(0, 8)}`

describe('realtime_tokens_issue', () => {
  test('the subject is the caller\'s, the ops are narrowed as the public issue narrows them, the lifetime is short', async () => {
    const name = channel()
    const issued = ok(await as(owner, 'POST', '/realtime/tokens', {
      channels: [{ name, ops: ['subscribe', 'history', 'presence', 'publish'] }, { name: 'quiet:x', ops: ['subscribe', 'presence'] }, { name: 'nope:x', ops: ['subscribe'] }],
    }), 'issue').body
    expect(issued.subject).toBe(`ext:console:${owner.userId}`)
    expect(issued.gatewayUrl).toEqual(expect.any(String))
    expect(issued.channels).toEqual([{ name, ops: ['subscribe', 'presence', 'history'] }, { name: 'quiet:x', ops: ['subscribe'] }])
    expect(issued.dropped).toEqual([
      { name, ops: ['publish'], reason: 'not_allowed' }, // chat has no client events
      { name: 'quiet:x', ops: ['presence'], reason: 'not_allowed' },
      { name: 'nope:x', ops: ['subscribe'], reason: 'namespace_not_registered' },
    ])
    const claims = JSON.parse(Buffer.from(issued.token.split('.')[1], 'base64url').toString())
    expect([claims.sub, claims.exp - claims.iat]).toEqual([issued.subject, 300])
    // The credential the gateway checks for revocation is the caller's login session.
    expect((await sql`select user_id from sessions where id = ${claims.akid}`)[0]?.user_id).toBe(owner.userId)
    expect(Date.parse(issued.expiresAt)).toBe(claims.exp * 1000)
  })

  test('bad requests are 4xx naming the field; a subject cannot be chosen', async () => {
    const many = Array.from({ length: 11 }, (_, i) => ({ name: `chat:c${i}`, ops: ['subscribe'] }))
    for (const [body, path] of [
      [{ channels: many }, '/body/channels'],
      [{ channels: [] }, '/body/channels'],
      [{ channels: [{ name: 'chat:a', ops: ['subscribe'] }], ttlSeconds: 3600 }, '/body/ttlSeconds'],
      [{ channels: [{ name: 'chat:a', ops: ['subscribe'] }], ttlSeconds: 10 }, '/body/ttlSeconds'],
      [{ channels: [{ name: 'chat:a', ops: ['fly'] }] }, '/body/channels/0/ops/0'],
      [{ channels: [{ name: 'no namespace', ops: ['subscribe'] }] }, '/body/channels/0/name'],
      [{ channels: [{ name: 'chat:a', ops: ['subscribe'] }], subject: 'alice' }, '/body/subject'],
    ] as [unknown, string][]) {
      const result = await as(owner, 'POST', '/realtime/tokens', body)
      expect([path, result.status]).toEqual([path, 400])
      expect(failingFields(result)).toContain(path)
    }
    const nothing = await as(owner, 'POST', '/realtime/tokens', { channels: [{ name: 'nope:x', ops: ['subscribe'] }] })
    expect([nothing.status, nothing.body.fields.map((f: any) => f.path)]).toEqual([422, ['/body/channels/0']])
  })
})

describe('the console token on a real gateway', () => {
  test('subscribes, receives what realtime_messages_publish sends, sees an end user join; reads presence but cannot enter it', async () => {
    const name = channel()
    const issued = ok(await as(owner, 'POST', '/realtime/tokens', { channels: [{ name, ops: ['subscribe', 'presence', 'history'] }] }), 'issue').body
    const received: Publication[] = []
    const joined: string[] = []
    const client = new RealtimeClient({ url: gateway.wsUrl, getToken: async () => issued.token })
    const subscription = client.subscribe(name, { publication: (p) => received.push(p), join: (event) => joined.push(event.identity) })
    client.connect()
    const { key } = await createKey(owner)
    const user = await WsClient.open(gateway.wsUrl)
    try {
      await eventually(() => subscription.active, 10_000, 'subscription.active')
      const published = ok(await as(owner, 'POST', '/realtime/messages', { channel: name, data: { hello: 'console' } }), 'publish').body
      expect(published).toMatchObject({ channel: name, offset: 1, epoch: expect.any(String), id: expect.any(String) })
      await eventually(() => received.length === 1, 10_000, 'received.length === 1')
      expect(received[0]).toMatchObject({ data: { hello: 'console' }, offset: 1 })

      // The console watches: its token carries presence, which reads the roster, but it never joins one.
      await expect(client.presence(name).enter()).rejects.toMatchObject({ code: 'forbidden' })
      // An end user of the product, whose backend issues the token, enters.
      const userToken = await callApp(buildPublicApp(), 'http://public.test', 'POST', `/${owner.productId}/realtime/tokens/issue`, {
        headers: { 'x-api-key': key }, body: { subject: 'alice', channels: [{ name, ops: ['presence'] }] },
      })
      expect(await user.request({ type: 'connect', token: ok(userToken, 'user token').body.token })).toMatchObject({ type: 'reply' })
      expect(await user.request({ type: 'presence.enter', channel: name })).toMatchObject({ type: 'reply', to: 'presence.enter' })
      await eventually(() => joined.length === 1, 10_000, 'joined.length === 1')
      expect(joined).toEqual(['ext:alice'])
      expect(await client.presence(name).read()).toMatchObject({ members: [{ identity: 'ext:alice', connections: 1 }] })
      const roster = ok(await as(owner, 'GET', `/realtime/channels/${name}/presence`), 'presence').body
      expect(roster).toEqual({ channel: name, members: [{ identity: 'ext:alice', connections: 1, info: null }] })
      const status = ok(await as(owner, 'GET', `/realtime/channels/${name}`), 'status').body
      expect(status).toEqual({ channel: name, namespace: 'chat', presence: { members: 1, connections: 1 }, history: { offset: 1, epoch: published.epoch } })
    } finally {
      user.close()
      client.disconnect()
    }
  }, 30_000)

  test('after logout the gateway refuses the token the session asked for', async () => {
    const user = await newProduct('Logged out')
    await manage(user, 'POST', '/realtime/namespaces', { name: 'chat' })
    const name = channel()
    const issued = ok(await as(user, 'POST', '/realtime/tokens', { channels: [{ name, ops: ['subscribe'] }] }), 'issue').body
    ok(await as(user, 'POST', '/auth/logout'), 'logout')
    const closes: (number | undefined)[] = []
    const client = new RealtimeClient({ url: gateway.wsUrl, getToken: async () => issued.token, onState: (state, detail) => state === 'disconnected' && closes.push(detail?.code) })
    client.connect()
    try {
      await eventually(() => closes.length > 0, 10_000, 'closes.length > 0')
      expect(closes[0]).toBe(4001)
    } finally {
      client.disconnect()
    }
  }, 30_000)
  test('a platform key\'s token works until the key is revoked; then the gateway closes it (4001)', async () => {
    const key = await newPlatformKey(owner, ['realtime'])
    const name = channel()
    const issued = ok(await call('POST', '/realtime/tokens', { token: key.key, body: { channels: [{ name, ops: ['subscribe'] }] } }), 'key issue').body
    const closes: (number | undefined)[] = []
    const client = new RealtimeClient({ url: gateway.wsUrl, getToken: async () => issued.token, onState: (state, detail) => state === 'disconnected' && closes.push(detail?.code) })
    const subscription = client.subscribe(name)
    client.connect()
    try {
      await eventually(() => subscription.active, 10_000, 'subscription.active')
      expect(closes).toEqual([])
      ok(await as(owner, 'DELETE', `/products/${owner.productId}/platform-keys/${key.id}`), 'revoke')
      await eventually(() => closes.length > 0, 10_000, 'closes.length > 0')
      expect(closes[0]).toBe(4001)
    } finally {
      client.disconnect()
    }
  }, 30_000)
})

describe('a console token ends with the access it was issued on, announced to the gateways', () => {
  // Each live connection is on the gateway whose sweep is 10 minutes away: only the announcement can close it.
  test('logout closes the session\'s live console connections at once (4001), and the token is refused after', async () => {
    const user = await newProduct('Logs out')
    await manage(user, 'POST', '/realtime/namespaces', { name: 'chat' })
    const token = await consoleToken(user, channel())
    const live = await connectedWith(slowSweep, token)
    ok(await as(user, 'POST', '/auth/logout'), 'logout')
    expect(await live.closed).toEqual(ENDED)
    expect(await tryConnect(slowSweep, token)).toEqual(ENDED)
    expect(await tryConnect(gateway, token)).toEqual(ENDED)
  }, 30_000)

  test('revoking a platform key closes its live console connections at once (4001)', async () => {
    const key = await newPlatformKey(owner, ['realtime'])
    const token = await consoleToken({ token: key.key }, channel())
    const live = await connectedWith(slowSweep, token)
    ok(await as(owner, 'DELETE', `/products/${owner.productId}/platform-keys/${key.id}`), 'revoke')
    expect(await live.closed).toEqual(ENDED)
    expect(await tryConnect(slowSweep, token)).toEqual(ENDED)
  }, 30_000)

  test('a member removed from the organization: their console connections to its products close at once; their session and its tokens for their own product live on', async () => {
    const team = await newProduct('Team')
    await manage(team, 'POST', '/realtime/namespaces', { name: 'chat' })
    const member = await newProduct('Own product') // signed in, with a product of their own organization
    await manage(member, 'POST', '/realtime/namespaces', { name: 'chat' })
    ok(await call('POST', `/organizations/${team.organizationId}/members`, { token: team.token, body: { email: member.email } }), 'add member')
    const teamToken = await consoleToken({ token: member.token, productId: team.productId }, channel())
    const ownToken = await consoleToken(member, channel())
    const onTeam = await connectedWith(slowSweep, teamToken)
    const onOwn = await connectedWith(slowSweep, ownToken)
    const onTeamElsewhere = await connectedWith(gateway, teamToken)
    try {
      ok(await call('DELETE', `/organizations/${team.organizationId}/members/${member.userId}`, { token: team.token }), 'remove member')
      expect(await onTeam.closed).toEqual(ENDED)
      expect(await onTeamElsewhere.closed).toEqual(ENDED)
      expect(await tryConnect(slowSweep, teamToken)).toEqual(ENDED)
      expect(await tryConnect(gateway, teamToken)).toEqual(ENDED)
      // The session is still theirs: the connection to their own product stays, and its token still connects.
      expect(await onOwn.request({ type: 'ping' })).toMatchObject({ type: 'reply' })
      expect(await tryConnect(slowSweep, ownToken)).toEqual({ reply: 'reply' })
      // Added back, the same session reaches the team's product again (a lost product is not remembered for good).
      ok(await call('POST', `/organizations/${team.organizationId}/members`, { token: team.token, body: { email: member.email } }), 'add again')
      const again = await consoleToken({ token: member.token, productId: team.productId }, channel())
      await eventually(async () => 'reply' in (await tryConnect(gateway, again)), 10_000, 'the token connects again')
    } finally {
      onOwn.close()
    }
  }, 30_000)

  test('a member removed: platform-key console connections, rtk_ connections and other users\' stay open, and their tokens still connect', async () => {
    const team = await newProduct('Team of two')
    await manage(team, 'POST', '/realtime/namespaces', { name: 'chat' })
    const member = await newProduct('Leaves')
    ok(await call('POST', `/organizations/${team.organizationId}/members`, { token: team.token, body: { email: member.email } }), 'add member')
    const key = await newPlatformKey(team, ['realtime'])
    const rtk = await createKey(team)
    const rtkToken = (await signToken({ productId: team.productId, apiKeyId: rtk.id, subject: 'u', channels: [{ name: 'chat:x', ops: ['subscribe'] }] })).token
    const tokens = {
      member: await consoleToken({ token: member.token, productId: team.productId }, channel()),
      platformKey: await consoleToken({ token: key.key }, channel()),
      owner: await consoleToken(team, channel()),
      rtk: rtkToken,
    }
    // All on the gateway whose sweep is 10 minutes away: only the announcement acts on them.
    const live = {
      member: await connectedWith(slowSweep, tokens.member),
      platformKey: await connectedWith(slowSweep, tokens.platformKey),
      owner: await connectedWith(slowSweep, tokens.owner),
      rtk: await connectedWith(slowSweep, tokens.rtk),
    }
    try {
      ok(await call('DELETE', `/organizations/${team.organizationId}/members/${member.userId}`, { token: team.token }), 'remove member')
      expect(await live.member.closed).toEqual(ENDED)
      for (const [name, client] of Object.entries(live).filter(([name]) => name !== 'member')) {
        expect([name, await client.request({ type: 'ping' })]).toEqual([name, expect.objectContaining({ type: 'reply' })])
      }
      for (const name of ['platformKey', 'owner', 'rtk'] as const) expect([name, await tryConnect(slowSweep, tokens[name])]).toEqual([name, { reply: 'reply' }])
    } finally {
      for (const client of Object.values(live)) client.close()
    }
  }, 30_000)

  test('a session ended twice is announced once: a logout of an ended session has nothing left to tell the gateways', async () => {
    const user = await newProduct('Ends once')
    await manage(user, 'POST', '/realtime/namespaces', { name: 'chat' })
    const token = await consoleToken(user, channel())
    const akid = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()).akid as string
    const heard: string[] = []
    const listener = listenForInvalidations({ caches: [], onMessage: (message) => void (message.kind === 'credential_ended' && heard.push(message.keyId)) })
    try {
      await eventually(() => listener.live(), 10_000, 'listener.live()')
      const sentinel = randomUUID()
      await endSession(akid)
      await endSession(akid)
      await publishInvalidation({ kind: 'credential_ended', keyId: sentinel }) // published after both: heard after both
      await eventually(() => heard.includes(sentinel), 10_000, 'heard.includes(sentinel)')
      expect(heard.filter((id) => id === akid)).toEqual([akid])
    } finally {
      await listener.stop()
    }
  }, 30_000)

  test('PostgreSQL\'s answer about a session names its user and its expiry (what bounds a cached answer); a key\'s names none', async () => {
    const token = await consoleToken(owner, channel())
    const akid = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()).akid as string
    const [row] = await sql`select expires_at from sessions where id = ${akid}`
    const key = await createKey(owner)
    const answer = await revokedAmong([{ akid, pid: owner.productId }, { akid: key.id, pid: owner.productId }])
    expect([...answer.ended, ...answer.denied]).toEqual([])
    expect([...answer.sessions]).toEqual([[akid, { userId: owner.userId, expiresAt: new Date(row!.expires_at).getTime() }]])
  })

  test('a session that expires: the sweep closes its live console connections (4001) and the gateway refuses its token', async () => {
    const user = await newProduct('Expires')
    await manage(user, 'POST', '/realtime/namespaces', { name: 'chat' })
    const token = await consoleToken(user, channel())
    const live = await connectedWith(gateway, token)
    const akid = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()).akid
    // Nothing announces an expiry: the session's row says it, and the gateway's 200 ms sweep reads it.
    await sql`update sessions set expires_at = now() - interval '1 second' where id = ${akid}`
    expect(await live.closed).toEqual(ENDED)
    expect(await tryConnect(gateway, token)).toEqual(ENDED)
  }, 30_000)

  test('a revoked rtk_ key\'s tokens are still refused; an active key\'s are not', async () => {
    const product = await newProduct('Keys')
    await manage(product, 'POST', '/realtime/namespaces', { name: 'chat' })
    const [active, revoked] = [await createKey(product), await createKey(product)]
    await manage(product, 'DELETE', `/governance/api/v1/products/${product.productId}/public-keys/${revoked.id}`)
    const tokenOf = async (productId: string, apiKeyId: string) =>
      (await signToken({ productId, apiKeyId, subject: 'u', channels: [{ name: 'chat:x', ops: ['subscribe'] }] })).token
    expect(await tryConnect(gateway, await tokenOf(product.productId, active.id))).toEqual({ reply: 'reply' })
    const REVOKED = { code: 4001, reason: 'invalid token: api key revoked' }
    expect(await tryConnect(gateway, await tokenOf(product.productId, revoked.id))).toEqual(REVOKED)
  }, 30_000)
})

describe('publish and reads', () => {
  test('history by window and by cursor, as the public route answers; its validation names the field', async () => {
    const name = channel()
    for (let i = 1; i <= 3; i++) ok(await as(owner, 'POST', '/realtime/messages', { channel: name, data: { i } }), 'publish')
    const last = ok(await as(owner, 'GET', `/realtime/channels/${name}/history?last_n=2`), 'history').body
    expect(last).toMatchObject({ channel: name, offset: 3, recovered: true })
    expect(last.entries.map((e: any) => e.data)).toEqual([{ i: 2 }, { i: 3 }])
    const after = ok(await as(owner, 'GET', `/realtime/channels/${name}/history?offset=1&epoch=${last.epoch}`), 'cursor').body
    expect(after.entries.map((e: any) => e.offset)).toEqual([2, 3])
    for (const [query, path] of [['last_n=0', '/query/last_n'], ['last_n=2.5', '/query/last_n'], ['offset=1', '/query/epoch'],
      ['last_n=1&last_ms=100', '/query/last_ms'], ['', '/query/last_n'], ['colour=red', '/query/colour']] as [string, string][]) {
      const result = await as(owner, 'GET', `/realtime/channels/${name}/history?${query}`)
      expect([query, result.status]).toEqual([query, 400])
      expect(failingFields(result)).toContain(path)
    }
  })

  test('history validates its query exactly as the public route does: numbers written as plain decimals only', async () => {
    const { key } = await createKey(owner)
    const publicApp = buildPublicApp()
    const name = channel()
    for (const value of ['0x10', '0b11', '+7', ' 5', '1e3', '.5', '1e300', '', '0', '-5', 'Infinity', '60000', '0.5']) {
      const query = `last_ms=${encodeURIComponent(value)}`
      const viaApi = await as(owner, 'GET', `/realtime/channels/${name}/history?${query}`)
      const viaPublic = await callApp(publicApp, 'http://public.test', 'GET', `/${owner.productId}/realtime/channels/${name}/history?${query}`, { headers: { 'x-api-key': key } })
      expect([value, viaApi.status, viaApi.body.fields]).toEqual([value, viaPublic.status, viaPublic.body.fields])
      if (['60000', '0.5'].includes(value)) expect([value, viaApi.status]).toEqual([value, 200])
      else expect([value, failingFields(viaApi)]).toEqual([value, ['/query/last_ms']])
    }
  })

  test('publish spends the product\'s publish quota, the one the public route spends: past it, 429 quota_exceeded with Retry-After', async () => {
    const spender = await newProduct('Quota')
    await manage(spender, 'POST', '/realtime/namespaces', { name: 'chat' })
    const { key } = await createKey(spender)
    const name = channel()
    const { window, limit } = quotaWindow(spender.productId)
    ok(await as(spender, 'POST', '/realtime/messages', { channel: name, data: 1 }), 'publish')
    expect(Number(await redis().get(window.key))).toBe(1)
    // Full, in this window and the next (the window may roll between here and the publish).
    for (const full of [window, quotaWindow(spender.productId, Date.now() + 120_000).window]) await redis().set(full.key, String(limit), 'EX', 300)
    const refused = await as(spender, 'POST', '/realtime/messages', { channel: name, data: 2 })
    expect([refused.status, refused.body.error]).toEqual([429, 'quota_exceeded'])
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0)
    const viaPublic = await callApp(buildPublicApp(), 'http://public.test', 'POST', `/${spender.productId}/realtime/messages`, { headers: { 'x-api-key': key }, body: { channel: name, data: 3 } })
    expect([viaPublic.status, viaPublic.body.error]).toEqual([429, 'quota_exceeded'])
  })

  test('publish validates its body, refuses unregistered namespaces, and needs payload storage above the inline cap', async () => {
    const missing = await as(owner, 'POST', '/realtime/messages', { channel: channel() })
    expect([missing.status, failingFields(missing)]).toEqual([400, ['/body/data']])
    const bad = await as(owner, 'POST', '/realtime/messages', { channel: 'nocolon', data: 1 })
    expect([bad.status, failingFields(bad)]).toEqual([400, ['/body/channel']])
    const unregistered = await as(owner, 'POST', '/realtime/messages', { channel: 'nope:x', data: 1 })
    expect([unregistered.status, unregistered.body.error, unregistered.body.fields.map((f: any) => f.path)]).toEqual([404, 'namespace_not_registered', ['/body/channel']])
    const other = await newProduct('Over the cap')
    await manage(other, 'POST', '/realtime/namespaces', { name: 'chat', history: { ttlSeconds: 300, size: 100 } })
    const overCap = 'x'.repeat(INLINE_CAP_BYTES) // two bytes of quotes more than the cap once serialized
    const big = await as(other, 'POST', '/realtime/messages', { channel: channel(), data: overCap })
    expect([big.status, big.body.error]).toEqual([503, 'payload_storage_not_provisioned'])
    const storage = await manage(other, 'PUT', '/realtime/payload-storage', {})
    const name = channel()
    const stored = ok(await as(other, 'POST', '/realtime/messages', { channel: name, data: overCap }), 'over-cap publish').body
    expect(stored.ref).toEqual({ bucket_key: `${other.productId}/${name}/${stored.id}`, size: INLINE_CAP_BYTES + 2, content_type: 'application/json' })
    expect((await (await s3()).statObject(storage.bucket, stored.ref.bucket_key)).size).toBe(INLINE_CAP_BYTES + 2)
    const quiet = await as(owner, 'GET', '/realtime/channels/quiet:x/presence')
    expect([quiet.status, quiet.body.error]).toEqual([403, 'presence_disabled'])
  })
})

describe('who may use them', () => {
  test('another product never sees this product\'s channel: its namespace is its own (404 when it has none)', async () => {
    const name = channel()
    ok(await as(owner, 'POST', '/realtime/messages', { channel: name, data: { mine: true } }), 'publish')
    const other = await newProduct()
    for (const path of [`/realtime/channels/${name}`, `/realtime/channels/${name}/presence`, `/realtime/channels/${name}/history?last_n=5`]) {
      const result = await as(other, 'GET', path)
      expect([path, result.status, result.body.error]).toEqual([path, 404, 'namespace_not_registered'])
    }
    expect((await as(other, 'POST', '/realtime/messages', { channel: name, data: 1 })).status).toBe(404)
    expect((await call('GET', `/realtime/channels/${name}`, { token: other.token, productId: owner.productId })).status).toBe(404)
    await manage(other, 'POST', '/realtime/namespaces', { name: 'chat', history: { ttlSeconds: 300, size: 100 } })
    const theirs = ok(await as(other, 'GET', `/realtime/channels/${name}/history?last_n=5`), 'their history').body
    expect([theirs.entries, theirs.offset]).toEqual([[], 0])
  })

  test('a platform key with the realtime area gets a token of its own subject; one without the area is refused (403)', async () => {
    const key = await newPlatformKey(owner, ['realtime'])
    const issued = ok(await call('POST', '/realtime/tokens', { token: key.key, body: { channels: [{ name: channel(), ops: ['subscribe'] }] } }), 'key issue').body
    expect(issued.subject).toBe(`ext:console:${key.id}`)
    const mailKey = await newPlatformKey(owner, ['mail'])
    for (const [method, path, body] of [
      ['POST', '/realtime/tokens', { channels: [{ name: 'chat:a', ops: ['subscribe'] }] }], ['POST', '/realtime/messages', { channel: 'chat:a', data: 1 }],
      ['GET', '/realtime/channels/chat:a', undefined], ['GET', '/realtime/channels/chat:a/presence', undefined],
      ['GET', '/realtime/channels/chat:a/history?last_n=1', undefined],
    ] as [string, string, unknown][]) {
      const refused = await call(method, path, { token: mailKey.key, body })
      expect([path, refused.status]).toEqual([path, 403])
    }
  })

  test('the operations are MCP tools of the same name', async () => {
    const mcp = (id: number, method: string, params?: unknown) => call('POST', '/mcp', {
      token: owner.token, productId: owner.productId, headers: { accept: 'application/json, text/event-stream' },
      body: { jsonrpc: '2.0', id, method, ...(params ? { params } : {}) },
    })
    const names = (ok(await mcp(1, 'tools/list'), 'tools/list').body.result.tools as { name: string }[]).map((t) => t.name)
    expect(names).toEqual(expect.arrayContaining(['realtime_tokens_issue', 'realtime_messages_publish', 'realtime_history_read', 'realtime_presence_read', 'realtime_channel_get']))
    const name = channel()
    const published = ok(await mcp(2, 'tools/call', { name: 'realtime_messages_publish', arguments: { body: { channel: name, data: { via: 'mcp' } } } }), 'MCP publish')
    expect(JSON.parse(published.body.result.content[0].text)).toMatchObject({ channel: name, offset: 1 })
    const read = ok(await mcp(3, 'tools/call', { name: 'realtime_history_read', arguments: { path: { channel: name }, query: { last_n: 1 } } }), 'MCP history')
    expect(JSON.parse(read.body.result.content[0].text).entries.map((e: any) => e.data)).toEqual([{ via: 'mcp' }])
  })
})
