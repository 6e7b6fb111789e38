// The WebSocket gateway with two real gateway processes, real Redis and real WebSocket clients: the connect handshake
// and 4001, subscribe and cross-gateway delivery once and in order, error frames that never close, revocation, draining.
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { config } from '../../shared/config'
import { publish, readHistory } from '../../shared/realtime/broker'
import { channelKeys } from '../../shared/realtime/keys'
import { closeCodeOf } from '../../shared/realtime/close-codes'
import { enterPresence, listPresence } from '../../shared/realtime/presence'
import { redis } from '../../shared/redis/client'
import { signToken, type TokenChannel } from '../../shared/realtime/tokens'
import { call, needsOneRedis } from '../helpers'
import { startFaultProxy, type FaultProxy } from '../faults/proxy'
import { realtimeProduct, type RealtimeProduct } from '../realtime/public-helpers'
import { RawWsClient, replied, startGateway, type GatewayProcess, WsClient } from './ws-helpers'

let a: GatewayProcess
let b: GatewayProcess
let product: RealtimeProduct
const HISTORY = { historyTtlSeconds: 300, historySize: 100 }

beforeAll(async () => {
  // The per-connection read bucket (test/security/gateway-abuse.test.ts) is out of the way here: the frame-queue bound
  // below floods roster reads, and must meet the queue, not the bucket.
  const env = { GATEWAY_CONNECT_TIMEOUT_MS: '500', GATEWAY_READ_BURST: '100000' }
  ;[a, b, product] = await Promise.all([
    startGateway(env),
    startGateway(env),
    realtimeProduct([
      { name: 'chat', presence: true, history: { ttlSeconds: 300, size: 100 } }, { name: 'live' },
      { name: 'events', clientEvents: true, history: { ttlSeconds: 300, size: 100 } },
    ]),
  ])
}, 30_000)

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()])
})

const channel = () => `chat:room-${randomUUID().slice(0, 8)}`

async function token(channels: TokenChannel[], options: { apiKeyId?: string; ttlSeconds?: number; productId?: string } = {}) {
  return (await signToken({
    productId: options.productId ?? product.productId, apiKeyId: options.apiKeyId ?? product.keyId,
    subject: `user-${randomUUID().slice(0, 8)}`, channels, ttlSeconds: options.ttlSeconds,
  })).token
}

/** A connected client whose token reaches `channels` with subscribe. */
async function connected(gateway: GatewayProcess, channels: string[], options: { apiKeyId?: string } = {}): Promise<WsClient> {
  const client = await WsClient.open(gateway.wsUrl)
  const reply = await client.request({ type: 'connect', token: await token(channels.map((name) => ({ name, ops: ['subscribe'] })), options) })
  expect(reply).toMatchObject({ type: 'reply', to: 'connect', subject: expect.stringMatching(/^ext:user-/) })
  return client
}

describe('connect', () => {
  test('no connect frame in time: closed 4001', async () => {
    const client = await WsClient.open(a.wsUrl)
    expect(await client.closed).toEqual({ code: 4001, reason: 'invalid token: no connect frame in time' })
  })

  test('a malformed or forged token: closed 4001 naming why', async () => {
    const client = await WsClient.open(a.wsUrl)
    client.send({ type: 'connect', id: 1, token: 'not.a.token' })
    expect(await client.closed).toMatchObject({ code: 4001, reason: expect.stringContaining('invalid token') })
    const good = await token([{ name: 'chat:x', ops: ['subscribe'] }])
    const [h, p] = good.split('.')
    const forged = await WsClient.open(a.wsUrl)
    forged.send({ type: 'connect', id: 1, token: `${h}.${p}.${'A'.repeat(43)}` })
    expect(await forged.closed).toEqual({ code: 4001, reason: 'invalid token: bad_signature' })
  })

  test('a valid token: the reply names the client, the subject and the expiry, with the seconds left by the gateway\'s clock; ping answers', async () => {
    const raw = await WsClient.open(a.wsUrl)
    const reply = await raw.request({ type: 'connect', token: await token([{ name: 'chat:x', ops: ['subscribe'] }], { ttlSeconds: 600 }) })
    const ttl = reply.ttl // read before toMatchObject, which writes its matchers into the received object
    expect(ttl).toBeGreaterThan(590)
    expect(ttl).toBeLessThanOrEqual(600)
    expect(reply).toMatchObject({ to: 'connect', expiresAt: expect.any(String) })
    raw.close()
    const client = await connected(a, ['chat:x'])
    expect(await client.request({ type: 'ping' })).toMatchObject({ type: 'reply', to: 'ping' })
    client.close()
  })

  test('a token of a revoked API key is refused, and live connections holding one are closed 4001; a scope change closes nothing', async () => {
    const owner = await realtimeProduct([{ name: 'chat' }])
    const live = await connected(a, ['chat:x'], { apiKeyId: owner.keyId })
    const rescoped = await call('PUT', `/governance/api/v1/products/${owner.productId}/public-keys/${owner.keyId}/scope`, { token: owner.token, body: { scope: ['messages:publish'] } })
    expect(rescoped.status).toBe(200)
    await Bun.sleep(300) // the invalidation has reached the gateways
    expect(await live.request({ type: 'ping' })).toMatchObject({ type: 'reply', to: 'ping' })
    const revoked = await call('DELETE', `/governance/api/v1/products/${owner.productId}/public-keys/${owner.keyId}`, { token: owner.token })
    expect(revoked.status).toBe(200)
    expect(await live.closed).toEqual({ code: 4001, reason: 'invalid token: api key revoked' })
    const late = await WsClient.open(b.wsUrl)
    late.send({ type: 'connect', id: 1, token: await token([{ name: 'chat:x', ops: ['subscribe'] }], { apiKeyId: owner.keyId, productId: owner.productId }) })
    expect(await late.closed).toEqual({ code: 4001, reason: 'invalid token: api key revoked' })
  })
})

describe('errors answer one request and never close the connection', () => {
  test('malformed frames get `invalid`; a request before connect gets `invalid`', async () => {
    const client = await WsClient.open(a.wsUrl)
    expect(await client.request({ type: 'subscribe', channel: 'chat:x' })).toMatchObject({ type: 'error', code: 'invalid' })
    const bad: (string | Uint8Array)[] = [
      'not json', '[]', '{"type":"nope","id":1}', '{"type":"subscribe","id":2}', '{"type":"subscribe","id":3,"channel":"nonamespace"}',
      JSON.stringify({ type: 'ping', id: 'x'.repeat(100) }), JSON.stringify({ type: 'ping', id: 1, extra: true }),
      new Uint8Array([1, 2, 3]), JSON.stringify({ type: 'ping', id: 1, pad: 'x'.repeat(70_000) }),
    ]
    for (const frame of bad) {
      client.ws.send(frame)
      expect(await client.next((f) => f.type === 'error')).toMatchObject({ code: 'invalid', message: expect.any(String), temporary: false })
    }
    replied(await client.request({ type: 'connect', token: await token([{ name: 'chat:x', ops: ['subscribe'] }]) }), 'connect')
    expect(await client.request({ type: 'ping' })).toMatchObject({ type: 'reply' })
    // The same battery once connected, and frames that are only wrong in this state: the connection lives on.
    const connectedBad = [...bad, JSON.stringify({ type: 'connect', id: 9, token: 'x' }), JSON.stringify({ type: 'unsubscribe', id: 10, channel: 'chat:x' }),
      JSON.stringify({ type: 'presence.update', id: 11, channel: 'chat:x', info: {} })]
    for (const frame of connectedBad) {
      client.ws.send(frame)
      expect(await client.next((f) => f.type === 'error')).toMatchObject({ code: expect.stringMatching(/^(invalid|forbidden)$/), message: expect.any(String), temporary: false })
    }
    expect(await client.request({ type: 'ping' })).toMatchObject({ type: 'reply' })
    client.close()
  })

  test('a client sending frames faster than they are handled gets `rate_limited` for the excess, never an unbounded queue', async () => {
    const client = await WsClient.open(a.wsUrl)
    replied(await client.request({ type: 'connect', token: await token([{ name: 'chat:x', ops: ['presence'] }]) }), 'connect')
    // 1 500 roster reads at once (each waits on Redis): past 1 000 waiting, frames are refused at once.
    for (let i = 0; i < 1500; i++) client.send({ type: 'presence.read', id: i, channel: 'chat:x' })
    const answered = new Map<number, string>()
    for (const deadline = Date.now() + 15_000; answered.size < 1500 && Date.now() < deadline; ) {
      const frame = await client.next((f) => f.type === 'reply' || f.type === 'error', 5000)
      answered.set(Number(frame.id), frame.type === 'error' ? frame.code : 'reply')
    }
    const codes = [...answered.values()]
    expect(answered.size).toBe(1500) // every frame answered once
    expect(codes.filter((c) => c === 'rate_limited').length).toBeGreaterThan(0)
    expect(codes.filter((c) => c === 'rate_limited').length).toBeLessThanOrEqual(500)
    expect(await client.request({ type: 'ping' })).toMatchObject({ type: 'reply' })
    client.close()
  }, 30_000)

  test('a frame of exactly 1 MiB is answered `invalid`; one byte more and the runtime closes with 1009 before the gateway reads it, as docs/errors.md lists', async () => {
    const client = await connected(a, ['chat:x'])
    const frameOf = (bytes: number) => {
      const head = JSON.stringify({ type: 'ping', id: 1, pad: '' })
      return `${head.slice(0, -2)}${'x'.repeat(bytes - head.length)}"}`
    }
    expect(frameOf(1024 * 1024).length).toBe(1024 * 1024)
    client.send(frameOf(1024 * 1024))
    expect(await client.next((f) => f.type === 'error', 5000)).toMatchObject({ code: 'invalid' })
    client.send(frameOf(1024 * 1024 + 1))
    expect(await client.closed).toEqual({ code: 1009, reason: 'Received too big message' })
    expect(closeCodeOf(1009)?.reason).toBe('Received too big message') // the row docs/errors.md shows
  })

  test('a channel the token does not reach, or a namespace removed since: `forbidden`, and the connection lives on', async () => {
    const client = await connected(a, ['chat:x', 'gone:x'])
    expect(await client.request({ type: 'subscribe', channel: 'chat:other' })).toMatchObject({ type: 'error', code: 'forbidden' })
    expect(await client.request({ type: 'subscribe', channel: 'gone:x' })).toMatchObject({ type: 'error', code: 'forbidden', message: expect.stringContaining('not registered') })
    expect(await client.request({ type: 'subscribe', channel: 'chat:x' })).toMatchObject({ type: 'reply', to: 'subscribe', channel: 'chat:x' })
    expect(await client.request({ type: 'subscribe', channel: 'chat:x' })).toMatchObject({ type: 'error', code: 'invalid' })
    client.close()
  })
})

describe('delivery', () => {
  test('every subscriber on both gateways gets each message exactly once, in offset order', async () => {
    const room = channel()
    const clients = await Promise.all([connected(a, [room]), connected(a, [room]), connected(b, [room]), connected(b, [room])])
    for (const client of clients) expect(await client.request({ type: 'subscribe', channel: room })).toMatchObject({ type: 'reply' })
    const count = 200
    for (let i = 1; i <= count; i++) await publish({ productId: product.productId, channel: room, policy: HISTORY, data: JSON.stringify({ i }) })
    for (const client of clients) {
      const deadline = Date.now() + 5000
      let got: any[] = []
      while (got.length < count && Date.now() < deadline) {
        got = got.concat(client.publications(room))
        if (got.length < count) await client.next((f) => f.type === 'publication' && f.channel === room, 5000).then((f) => got.push(f), () => {})
      }
      await Bun.sleep(100)
      got = got.concat(client.publications(room)) // nothing more may arrive
      expect(got.map((f) => f.offset)).toEqual(Array.from({ length: count }, (_, i) => i + 1))
      expect(got.map((f) => f.data.i)).toEqual(Array.from({ length: count }, (_, i) => i + 1))
      expect(got[0]).toMatchObject({ type: 'publication', channel: room, id: expect.any(String), epoch: expect.any(String) })
    }
    for (const client of clients) client.close()
  })

  test('a channel without history delivers without offset or epoch; another product\'s channel of the same name is not delivered', async () => {
    const client = await connected(b, ['live:feed'])
    replied(await client.request({ type: 'subscribe', channel: 'live:feed' }), 'subscribe')
    const other = await realtimeProduct([{ name: 'live' }])
    await publish({ productId: other.productId, channel: 'live:feed', policy: { historyTtlSeconds: 0, historySize: 0 }, data: '"theirs"' })
    await publish({ productId: product.productId, channel: 'live:feed', policy: { historyTtlSeconds: 0, historySize: 0 }, data: '"ours"' })
    const frame = await client.next((f) => f.type === 'publication')
    expect(frame).toEqual({ type: 'publication', channel: 'live:feed', id: expect.any(String), data: 'ours' })
    await Bun.sleep(100)
    expect(client.publications('live:feed')).toEqual([])
    client.close()
  })

  test('a payload stored over the inline cap is delivered as `ref`, with its position', async () => {
    const room = channel()
    const client = await connected(b, [room])
    replied(await client.request({ type: 'subscribe', channel: room }), 'subscribe')
    const ref = { bucket_key: `${product.productId}/${room}/m1`, size: 300_000, content_type: 'application/json' }
    await publish({ productId: product.productId, channel: room, policy: HISTORY, ref })
    expect(await client.next((f) => f.type === 'publication')).toEqual({
      type: 'publication', channel: room, id: expect.any(String), offset: 1, epoch: expect.any(String), ref,
    })
    client.close()
  })

  test('after unsubscribe nothing more arrives', async () => {
    const room = channel()
    const client = await connected(a, [room])
    replied(await client.request({ type: 'subscribe', channel: room }), 'subscribe')
    await publish({ productId: product.productId, channel: room, policy: HISTORY, data: '1' })
    expect((await client.next((f) => f.type === 'publication')).data).toBe(1)
    expect(await client.request({ type: 'unsubscribe', channel: room })).toMatchObject({ type: 'reply', to: 'unsubscribe' })
    await publish({ productId: product.productId, channel: room, policy: HISTORY, data: '2' })
    await Bun.sleep(200)
    expect(client.publications(room)).toEqual([])
    expect(await client.request({ type: 'unsubscribe', channel: room })).toMatchObject({ type: 'error', code: 'invalid' })
    client.close()
  })
})

test('SIGTERM closes every connection with 4100, then the gateway exits 0', async () => {
  const gateway = await startGateway()
  const clients = await Promise.all([connected(gateway, ['chat:x']), connected(gateway, ['chat:y'])])
  const exit = gateway.stop('SIGTERM')
  for (const client of clients) expect(await client.closed).toEqual({ code: 4100, reason: 'draining' })
  expect(await exit).toBe(0)
}, 20_000)

describe('recovery', () => {
  const send = (room: string, i: number) => publish({ productId: product.productId, channel: room, policy: HISTORY, data: JSON.stringify({ i }) })

  /** Collects publications of `room` until `count` arrived (or 5 s passed), then waits a moment for extras. */
  async function collect(client: WsClient, room: string, count: number) {
    const got: any[] = []
    const deadline = Date.now() + 5000
    while (got.length < count && Date.now() < deadline) {
      got.push(...client.publications(room))
      if (got.length < count) await client.next((f) => f.type === 'publication' && f.channel === room, 1000).then((f) => got.push(f), () => {})
    }
    await Bun.sleep(100)
    got.push(...client.publications(room))
    return got
  }

  test('a subscription starts at the channel top; reconnecting with that cursor to the other gateway replays what was missed, once, then goes live', async () => {
    const room = channel()
    for (let i = 1; i <= 3; i++) await send(room, i)
    const first = await connected(a, [room])
    const reply = await first.request({ type: 'subscribe', channel: room })
    const epoch = reply.epoch as string // read before toMatchObject: Bun's matcher writes asymmetric matchers into the received object
    expect(epoch).toBeString()
    expect(reply).toMatchObject({ to: 'subscribe', offset: 3 })
    await send(room, 4)
    const [live] = await collect(first, room, 1)
    expect(live).toMatchObject({ offset: 4, epoch, data: { i: 4 } })
    first.close()
    for (let i = 5; i <= 9; i++) await send(room, i)

    const again = await connected(b, [room])
    const resumed = await again.request({ type: 'subscribe', channel: room, offset: 4, epoch })
    expect(resumed).toMatchObject({ to: 'subscribe', recovered: true, offset: 9, epoch })
    await send(room, 10)
    const got = await collect(again, room, 6)
    expect(got.map((f) => f.offset)).toEqual([5, 6, 7, 8, 9, 10])
    expect(got.map((f) => f.data.i)).toEqual([5, 6, 7, 8, 9, 10])
    again.close()
  })

  test('recovering while messages keep arriving: no gap and no duplicate across the switch to live', async () => {
    const room = channel()
    await send(room, 1)
    const { epoch } = await (async () => {
      const c = await connected(a, [room])
      const r = await c.request({ type: 'subscribe', channel: room })
      c.close()
      return r
    })()
    let i = 1
    let publishing = true
    const publisher = (async () => {
      // Paced and bounded: the channel keeps 100 entries, and a gap older than that is rightly not recoverable.
      while (publishing && i < 80) {
        await send(room, ++i)
        await Bun.sleep(2)
      }
    })()
    await Bun.sleep(50)
    const client = await connected(b, [room])
    const reply = await client.request({ type: 'subscribe', channel: room, offset: 1, epoch })
    expect(reply).toMatchObject({ recovered: true })
    await Bun.sleep(100)
    publishing = false
    await publisher
    const got = await collect(client, room, i - 1)
    expect(got.map((f) => f.offset)).toEqual(Array.from({ length: i - 1 }, (_, k) => k + 2))
    client.close()
  })

  test('a channel with no message yet: the subscription gets a real epoch at offset 0, and that cursor recovers the first messages after a reconnect', async () => {
    const room = channel()
    const first = await connected(a, [room])
    const reply = await first.request({ type: 'subscribe', channel: room })
    const epoch = reply.epoch as string
    expect(reply).toMatchObject({ to: 'subscribe', offset: 0 })
    expect(epoch).toMatch(/^[0-9a-f]{16}$/)
    first.close()
    for (let i = 1; i <= 2; i++) await send(room, i)
    const again = await connected(b, [room])
    expect(await again.request({ type: 'subscribe', channel: room, offset: 0, epoch })).toMatchObject({ recovered: true, offset: 2, epoch })
    expect((await collect(again, room, 2)).map((f) => f.data.i)).toEqual([1, 2])
    again.close()
  })

  test('a cursor of another epoch: `recovered: false` with the current position, nothing replayed, live delivery continues', async () => {
    const room = channel()
    for (let i = 1; i <= 3; i++) await send(room, i)
    const client = await connected(a, [room])
    const reply = await client.request({ type: 'subscribe', channel: room, offset: 1, epoch: 'not-the-epoch' })
    expect(reply).toMatchObject({ recovered: false, offset: 3, epoch: expect.any(String) })
    await send(room, 4)
    expect((await collect(client, room, 1)).map((f) => f.offset)).toEqual([4])
    expect(await client.request({ type: 'subscribe', channel: 'chat:other', offset: 1 })).toMatchObject({ type: 'error', code: 'invalid' })
    client.close()
  })

  test('a cursor of a channel whose history Redis lost: `recovered: false` in a new epoch at offset 0, which the next cursor recovers', async () => {
    const room = channel()
    for (let i = 1; i <= 2; i++) await send(room, i)
    const keys = channelKeys(product.productId, room)
    const [old] = await redis().hmget(keys.meta, 'e')
    await redis().del(keys.hist, keys.meta) // as a Redis restarted without persistence
    const client = await connected(a, [room])
    const reply = await client.request({ type: 'subscribe', channel: room, offset: 2, epoch: old! })
    expect(reply).toMatchObject({ recovered: false, offset: 0 })
    expect(reply.epoch).toMatch(/^[0-9a-f]{16}$/)
    expect(reply.epoch).not.toBe(old)
    client.close()
    await send(room, 3)
    const again = await connected(b, [room])
    expect(await again.request({ type: 'subscribe', channel: room, offset: 0, epoch: reply.epoch })).toMatchObject({ recovered: true, offset: 1, epoch: reply.epoch })
    expect((await collect(again, room, 1)).map((f) => f.data.i)).toEqual([3])
    again.close()
  })
})

describe('token lifetime', () => {
  /** A token that expires `seconds` from now (the lifetime is at least 60 s, so it is issued in the past). */
  async function expiringIn(seconds: number, channels: TokenChannel[], subject = 'user-expiring') {
    const now = Math.floor(Date.now() / 1000)
    return (await signToken({ productId: product.productId, apiKeyId: product.keyId, subject, channels, ttlSeconds: 60, now: now - 60 + seconds })).token
  }
  const sub = (name: string): TokenChannel => ({ name, ops: ['subscribe'] })

  test('at expiresAt the connection is closed 4001', async () => {
    const client = await WsClient.open(a.wsUrl)
    replied(await client.request({ type: 'connect', token: await expiringIn(2, [sub('chat:x')]) }), 'connect')
    expect(await client.closed).toEqual({ code: 4001, reason: 'invalid token: token expired' })
  })

  test('`auth` with a newer token of the same subject keeps the connection past the old expiry; channels it no longer reaches are ended by the server', async () => {
    const client = await WsClient.open(b.wsUrl)
    replied(await client.request({ type: 'connect', token: await expiringIn(2, [sub('chat:x'), sub('chat:y')]) }), 'connect')
    replied(await client.request({ type: 'subscribe', channel: 'chat:x' }), 'subscribe')
    replied(await client.request({ type: 'subscribe', channel: 'chat:y' }), 'subscribe')
    const reply = await client.request({ type: 'auth', token: await expiringIn(60, [sub('chat:x')]) })
    expect(reply).toMatchObject({ type: 'reply', to: 'auth', expiresAt: expect.any(String) })
    expect(await client.next((f) => f.type === 'unsubscribe')).toMatchObject({ channel: 'chat:y', reason: expect.any(String) })
    await Bun.sleep(2500)
    expect(await client.request({ type: 'ping' })).toMatchObject({ type: 'reply' })
    client.close()
  })

  test('`auth` with a token for another subject, or an invalid one, is refused with an error frame; the old token still governs', async () => {
    const client = await WsClient.open(a.wsUrl)
    replied(await client.request({ type: 'connect', token: await expiringIn(2, [sub('chat:x')]) }), 'connect')
    expect(await client.request({ type: 'auth', token: await expiringIn(60, [sub('chat:x')], 'someone-else') }))
      .toMatchObject({ type: 'error', code: 'invalid', message: expect.stringContaining('another subject') })
    expect(await client.request({ type: 'auth', token: 'not.a.token' })).toMatchObject({ type: 'error', code: 'invalid' })
    expect(await client.closed).toEqual({ code: 4001, reason: 'invalid token: token expired' })
  })
})

test('a history reply or recovery larger than the socket buffer limit is truncated or not recovered, never a 4200 for a client that reads', async () => {
  const gateway = await startGateway({ GATEWAY_MAX_BUFFERED_BYTES: String(1024 * 1024) })
  try {
    const room = channel()
    const big = 'x'.repeat(512 * 1024)
    for (let i = 1; i <= 24; i++) await publish({ productId: product.productId, channel: room, policy: HISTORY, data: JSON.stringify({ i, big }) }) // 12 MiB
    const { epoch } = await readHistory(product.productId, room, HISTORY, { last_n: 1 })
    const client = await WsClient.open(gateway.wsUrl)
    replied(await client.request({ type: 'connect', token: await token([{ name: room, ops: ['subscribe', 'history'] }]) }), 'connect')
    const window = await client.request({ type: 'history', channel: room, last_n: 24 })
    expect(window).toMatchObject({ type: 'reply', truncated: true, offset: 24 })
    expect(window.entries.length).toBeLessThan(2) // at most half the 1 MiB limit of entries
    const recovery = await client.request({ type: 'subscribe', channel: room, offset: 0, epoch })
    expect(recovery).toMatchObject({ type: 'reply', recovered: false, offset: 24, epoch })
    expect(await client.request({ type: 'ping' })).toMatchObject({ type: 'reply', to: 'ping' })
    expect(client.frames.filter((f) => f.type === 'publication')).toEqual([])
    client.close()
  } finally {
    await gateway.stop()
  }
}, 40_000)

test('a subscriber that stops reading is closed 4200 once its buffer overflows, while the others keep receiving everything', async () => {
  const gateway = await startGateway({ GATEWAY_MAX_BUFFERED_BYTES: String(256 * 1024) })
  try {
    const room = channel()
    const slow = await RawWsClient.open(gateway.port)
    slow.sendText(JSON.stringify({ type: 'connect', id: 1, token: await token([{ name: room, ops: ['subscribe'] }]) }))
    slow.sendText(JSON.stringify({ type: 'subscribe', id: 2, channel: room }))
    const fast = await connected(gateway, [room])
    replied(await fast.request({ type: 'subscribe', channel: room }), 'subscribe')
    for (const deadline = Date.now() + 5000; !slow.texts.some((t) => t.includes('"to":"subscribe"')) && Date.now() < deadline; ) await Bun.sleep(20)
    slow.pause()
    const big = 'x'.repeat(60_000)
    const count = 150 // 9 MB: far past the 256 KiB buffer plus what the kernel's socket buffers hold
    for (let i = 1; i <= count; i++) {
      await publish({ productId: product.productId, channel: room, policy: { historyTtlSeconds: 0, historySize: 0 }, data: JSON.stringify({ i, big }) })
    }
    let received = 0
    for (const deadline = Date.now() + 15_000; received < count && Date.now() < deadline; ) {
      received += fast.publications(room).length
      if (received < count) await fast.next((f) => f.type === 'publication', 2000).then(() => received++, () => {})
    }
    expect(received).toBe(count)
    slow.resume()
    for (const deadline = Date.now() + 10_000; slow.closeCode === null && Date.now() < deadline; ) await Bun.sleep(50)
    expect(slow.closeCode).toBe(4200)
    fast.close()
  } finally {
    await gateway.stop()
  }
}, 40_000)

describe.skipIf(needsOneRedis)('Redis outage under live subscriptions', () => {
  let link: FaultProxy
  let gateway: GatewayProcess

  beforeAll(async () => {
    const url = new URL(config.redisUrl)
    link = await startFaultProxy({ host: url.hostname, port: Number(url.port) })
    gateway = await startGateway({ REDIS_URL: link.url(config.redisUrl), REDIS_COMMAND_TIMEOUT_MS: '500' })
  }, 30_000)

  afterAll(async () => {
    await gateway?.stop()
    await link?.close()
  })

  // Each test starts once the gateway is over the previous test's outage. Its command connection comes back on its own
  // backoff, which may end after the revocation test already saw its 4001 close; until then a subscribe is
  // `unavailable` (temporary), and a client would retry, as this does.
  beforeEach(async () => {
    const room = channel()
    const probe = await connected(gateway, [room])
    try {
      let answer: Record<string, unknown> = {}
      for (const deadline = Date.now() + 10_000; answer.type !== 'reply' && Date.now() < deadline; await Bun.sleep(100)) {
        answer = await probe.request({ type: 'subscribe', channel: room })
      }
      expect(answer).toMatchObject({ type: 'reply', to: 'subscribe' })
    } finally {
      probe.close()
    }
  }, 15_000)

  const send = (room: string, i: number) => publish({ productId: product.productId, channel: room, policy: HISTORY, data: JSON.stringify({ i }) })

  async function subscribed(room: string, more: string[] = []) {
    const client = await connected(gateway, [room, ...more])
    expect(await client.request({ type: 'subscribe', channel: room })).toMatchObject({ type: 'reply' })
    await send(room, 1)
    expect((await client.next((f) => f.type === 'publication')).offset).toBe(1)
    return client
  }

  test('while Redis is cut requests answer `unavailable` and the connection stays; when it returns the gateway reads on by itself, losing nothing', async () => {
    const room = channel()
    const client = await subscribed(room, [`${room}-b`])
    link.cut()
    // A new channel's position needs Redis: `unavailable`, and nothing is closed. A new connection does not: its key's
    // revocation is checked in PostgreSQL, the authority (test/security/revocation.test.ts).
    expect(await client.request({ type: 'subscribe', channel: `${room}-b` })).toMatchObject({ type: 'error', code: 'unavailable', temporary: true })
    const late = await WsClient.open(gateway.wsUrl)
    expect(await late.request({ type: 'connect', token: await token([{ name: room, ops: ['subscribe'] }]) })).toMatchObject({ type: 'reply', to: 'connect' })
    expect(await client.request({ type: 'ping' })).toMatchObject({ type: 'reply' })
    late.close()
    for (let i = 2; i <= 4; i++) await send(room, i) // published meanwhile (the test reaches Redis directly)
    await link.restore()
    const got: number[] = []
    for (const deadline = Date.now() + 8000; got.length < 3 && Date.now() < deadline; ) {
      await client.next((f) => f.type === 'publication', 1000).then((f) => got.push(f.offset), () => {})
    }
    expect(got).toEqual([2, 3, 4])
    expect(client.frames.filter((f) => f.type === 'unsubscribe')).toEqual([])
    client.close()
  }, 30_000)

  test('an API key revoked while the gateway could not hear it: its live connections are closed 4001 once Redis is back', async () => {
    const owner = await realtimeProduct([{ name: 'chat' }])
    const client = await WsClient.open(gateway.wsUrl)
    expect(await client.request({ type: 'connect', token: await token([{ name: 'chat:x', ops: ['subscribe'] }], { apiKeyId: owner.keyId, productId: owner.productId }) })).toMatchObject({ type: 'reply' })
    link.cut()
    const revoked = await call('DELETE', `/governance/api/v1/products/${owner.productId}/public-keys/${owner.keyId}`, { token: owner.token })
    expect(revoked.status).toBe(200)
    await Bun.sleep(500) // the announcement has come and gone; this gateway missed it
    await link.restore()
    expect(await Promise.race([client.closed, Bun.sleep(10_000).then(() => 'still open')])).toEqual({ code: 4001, reason: 'invalid token: api key revoked' })
  }, 30_000)

  test('entries trimmed from the fan-out stream while the gateway was cut off: the subscription is ended with `resubscribe`, and recovering through the cursor loses nothing', async () => {
    const room = channel()
    const client = await subscribed(room)
    const { epoch } = (await readHistory(product.productId, room, HISTORY, { last_n: 1 }))
    link.cut()
    for (let i = 2; i <= 4; i++) await send(room, i)
    await redis().xtrim(channelKeys(product.productId, room).fan, 'MAXLEN', 0) // as a long outage under load would
    await link.restore()
    const ended = await client.next((f) => f.type === 'unsubscribe', 10_000)
    expect(ended).toMatchObject({ channel: room, resubscribe: true })
    const reply = await client.request({ type: 'subscribe', channel: room, offset: 1, epoch })
    expect(reply).toMatchObject({ recovered: true, offset: 4 })
    const got: number[] = []
    for (const deadline = Date.now() + 5000; got.length < 3 && Date.now() < deadline; ) {
      await client.next((f) => f.type === 'publication', 1000).then((f) => got.push(f.offset), () => {})
    }
    expect(got).toEqual([2, 3, 4])
    client.close()
  }, 30_000)

  test('the link to Redis dies without a reset (blackholed): the gateway replaces its connections by itself and delivers what was published meanwhile, in order', async () => {
    const room = channel()
    const client = await subscribed(room, [`${room}-b`])
    link.blackhole() // every connection the gateway has goes silent; no close ever reaches it
    for (let i = 2; i <= 4; i++) await send(room, i)
    const got: number[] = []
    for (const deadline = Date.now() + 25_000; got.length < 3 && Date.now() < deadline; ) {
      await client.next((f) => f.type === 'publication', 1000).then((f) => got.push(f.offset), () => {})
    }
    expect(got).toEqual([2, 3, 4])
    let answer: Record<string, unknown> = {}
    for (const deadline = Date.now() + 10_000; answer.type !== 'reply' && Date.now() < deadline; await Bun.sleep(200)) {
      answer = await client.request({ type: 'subscribe', channel: `${room}-b` }) // needs the command connection back
    }
    expect(answer).toMatchObject({ type: 'reply', to: 'subscribe' })
    client.close()
  }, 45_000)
})

describe.skipIf(needsOneRedis)('a Redis link that dies without a reset', () => {
  test('an API key revoked meanwhile: the gateway notices the dead link itself, and closes the key\'s live connections 4001 in seconds, before its periodic sweep', async () => {
    const url = new URL(config.redisUrl)
    const link = await startFaultProxy({ host: url.hostname, port: Number(url.port) })
    const gateway = await startGateway({ REDIS_URL: link.url(config.redisUrl), REDIS_COMMAND_TIMEOUT_MS: '500', GATEWAY_REVOCATION_SWEEP_MS: '30000' })
    const sweepDue = Date.now() + 30_000 // the gateway's first periodic revocation sweep comes no sooner
    try {
      const owner = await realtimeProduct([{ name: 'chat' }])
      const client = await WsClient.open(gateway.wsUrl)
      expect(await client.request({ type: 'connect', token: await token([{ name: 'chat:x', ops: ['subscribe'] }], { apiKeyId: owner.keyId, productId: owner.productId }) })).toMatchObject({ type: 'reply' })
      link.blackhole() // every connection the gateway has goes silent: the announcement below never reaches it
      expect((await call('DELETE', `/governance/api/v1/products/${owner.productId}/public-keys/${owner.keyId}`, { token: owner.token })).status).toBe(200)
      const closed = await Promise.race([client.closed, Bun.sleep(sweepDue - 3000 - Date.now()).then(() => 'still open')])
      expect(closed).toEqual({ code: 4001, reason: 'invalid token: api key revoked' })
    } finally {
      await gateway.stop()
      await link.close()
    }
  }, 45_000)
})

describe('client events and history over the socket', () => {
  async function withOps(gateway: GatewayProcess, name: string, ops: TokenChannel['ops']) {
    const client = await WsClient.open(gateway.wsUrl)
    replied(await client.request({ type: 'connect', token: await token([{ name, ops }]) }), 'connect')
    return client
  }

  test('a client event reaches the other subscribers on every gateway once, without offset or epoch, not the sender; it is acknowledged and never stored', async () => {
    const room = `events:${randomUUID().slice(0, 8)}`
    const sender = await withOps(a, room, ['subscribe', 'publish'])
    const here = await withOps(a, room, ['subscribe'])
    const there = await withOps(b, room, ['subscribe'])
    for (const client of [sender, here, there]) await client.request({ type: 'subscribe', channel: room })
    const ack = await sender.request({ type: 'publish', channel: room, data: { typing: true } })
    expect(ack).toMatchObject({ type: 'reply', to: 'publish', channel: room, messageId: expect.any(String) })
    for (const client of [here, there]) {
      expect(await client.next((f) => f.type === 'publication')).toEqual({ type: 'publication', channel: room, id: ack.messageId, data: { typing: true } })
    }
    await Bun.sleep(200)
    expect(sender.publications(room)).toEqual([])
    expect([...here.publications(room), ...there.publications(room)]).toEqual([])
    expect((await readHistory(product.productId, room, HISTORY, { last_n: 10 })).entries).toEqual([])
    for (const client of [sender, here, there]) client.close()
  })

  test('over 32 KiB is `invalid`, past 5 a second (burst 10) is `rate_limited`, without the operation or the namespace switch `forbidden`; the connection stays', async () => {
    const room = `events:${randomUUID().slice(0, 8)}`
    const client = await withOps(a, room, ['subscribe', 'publish'])
    expect(await client.request({ type: 'publish', channel: room, data: 'x'.repeat(32_767) })).toMatchObject({ type: 'error', code: 'invalid' })
    const answers = []
    for (let i = 0; i < 12; i++) answers.push(await client.request({ type: 'publish', channel: room, data: i }))
    expect(answers.filter((f) => f.type === 'reply').length).toBeGreaterThanOrEqual(10)
    expect(answers.filter((f) => f.type === 'error').length).toBeGreaterThanOrEqual(1)
    expect(answers.find((f) => f.type === 'error')).toMatchObject({ code: 'rate_limited', temporary: true })
    const reader = await withOps(a, room, ['subscribe'])
    expect(await reader.request({ type: 'publish', channel: room, data: 1 })).toMatchObject({ type: 'error', code: 'forbidden' })
    const chat = await withOps(a, 'chat:x', ['subscribe', 'publish']) // a token claiming more than the namespace allows
    expect(await chat.request({ type: 'publish', channel: 'chat:x', data: 1 })).toMatchObject({ type: 'error', code: 'forbidden', message: expect.stringContaining('client events') })
    expect(await client.request({ type: 'ping' })).toMatchObject({ type: 'reply' })
    for (const c of [client, reader, chat]) c.close()
  })

  test('history: a window or a cursor with the `history` operation; anything else `invalid` or `forbidden`', async () => {
    const room = channel()
    for (let i = 1; i <= 3; i++) await publish({ productId: product.productId, channel: room, policy: HISTORY, data: JSON.stringify({ i }) })
    const client = await withOps(b, room, ['subscribe', 'history'])
    const last = await client.request({ type: 'history', channel: room, last_n: 2 })
    expect(last).toMatchObject({ type: 'reply', to: 'history', channel: room, offset: 3, recovered: true })
    expect(last.entries.map((e: any) => [e.offset, e.data.i])).toEqual([[2, 2], [3, 3]])
    const since = await client.request({ type: 'history', channel: room, offset: 1, epoch: last.epoch })
    expect(since.entries.map((e: any) => e.offset)).toEqual([2, 3])
    for (const bad of [{}, { last_n: 1, last_ms: 10 }, { offset: 1 }, { last_n: 1, offset: 1, epoch: 'e' }, { last_n: 0 }]) {
      expect(await client.request({ type: 'history', channel: room, ...bad })).toMatchObject({ type: 'error', code: 'invalid' })
    }
    const plain = await withOps(b, room, ['subscribe'])
    expect(await plain.request({ type: 'history', channel: room, last_n: 1 })).toMatchObject({ type: 'error', code: 'forbidden' })
    client.close()
    plain.close()
  })
})

describe('presence over the socket', () => {
  async function as(gateway: GatewayProcess, subject: string, name: string, ops: TokenChannel['ops']) {
    const client = await WsClient.open(gateway.wsUrl)
    const signed = await signToken({ productId: product.productId, apiKeyId: product.keyId, subject, channels: [{ name, ops }] })
    replied(await client.request({ type: 'connect', token: signed.token }), 'connect')
    return client
  }

  test('one join per identity however many tabs and gateways, one leave with its last connection; the roster counts connections', async () => {
    const room = channel()
    const watcher = await as(a, 'watcher', room, ['subscribe'])
    replied(await watcher.request({ type: 'subscribe', channel: room }), 'subscribe')
    const tab1 = await as(a, 'alice', room, ['presence'])
    const tab2 = await as(b, 'alice', room, ['presence'])
    expect(await tab1.request({ type: 'presence.enter', channel: room, info: { name: 'Alice' } })).toMatchObject({ type: 'reply', to: 'presence.enter' })
    expect(await watcher.next((f) => f.type === 'join')).toEqual({ type: 'join', channel: room, identity: 'ext:alice', info: { name: 'Alice' } })
    expect(await tab2.request({ type: 'presence.enter', channel: room })).toMatchObject({ type: 'reply' })
    const roster = await tab2.request({ type: 'presence.read', channel: room })
    expect(roster.members).toEqual([{ identity: 'ext:alice', connections: 2, info: { name: 'Alice' } }])
    tab1.close() // leaving with one of two connections: no leave
    await Bun.sleep(300)
    expect(await tab2.request({ type: 'presence.leave', channel: room })).toMatchObject({ type: 'reply', to: 'presence.leave' })
    expect(await watcher.next((f) => f.type === 'leave')).toEqual({ type: 'leave', channel: room, identity: 'ext:alice', info: null })
    await Bun.sleep(200)
    expect(watcher.frames.filter((f) => f.type === 'join' || f.type === 'leave')).toEqual([])
    expect(await listPresence(product.productId, room)).toEqual([])
    for (const c of [watcher, tab2]) c.close()
  })

  test('an entry nobody refreshes (its gateway died) expires, and subscribers get its `leave` with no other roster change', async () => {
    const room = channel()
    const watcher = await as(a, 'watcher', room, ['subscribe'])
    replied(await watcher.request({ type: 'subscribe', channel: room }), 'subscribe')
    // As a gateway killed with SIGKILL leaves it: entered, then never refreshed nor left.
    await enterPresence({ productId: product.productId, channel: room, identity: 'ext:ghost', connectionId: 'dead-gateway-conn', ttlSeconds: 1 })
    expect(await watcher.next((f) => f.type === 'join')).toMatchObject({ identity: 'ext:ghost' })
    expect(await watcher.next((f) => f.type === 'leave', 8000)).toEqual({ type: 'leave', channel: room, identity: 'ext:ghost', info: null })
    watcher.close()
  }, 15_000)

  test('update needs an entry, info is at most 10 240 bytes, the operation and the namespace switch are required, a full roster refuses', async () => {
    const room = channel()
    const client = await as(a, 'bob', room, ['presence'])
    expect(await client.request({ type: 'presence.update', channel: room, info: 1 })).toMatchObject({ type: 'error', code: 'invalid' })
    expect(await client.request({ type: 'presence.enter', channel: room, info: 'x'.repeat(10_239) })).toMatchObject({ type: 'error', code: 'invalid' })
    expect(await client.request({ type: 'presence.enter', channel: room, info: { v: 1 } })).toMatchObject({ type: 'reply' })
    expect(await client.request({ type: 'presence.update', channel: room, info: { v: 2 } })).toMatchObject({ type: 'reply', to: 'presence.update' })
    expect((await listPresence(product.productId, room))[0]!.info).toEqual({ v: 2 })
    const without = await as(a, 'carol', room, ['subscribe'])
    expect(await without.request({ type: 'presence.enter', channel: room })).toMatchObject({ type: 'error', code: 'forbidden' })
    const live = await as(a, 'dave', 'live:x', ['subscribe', 'presence'])
    expect(await live.request({ type: 'presence.read', channel: 'live:x' })).toMatchObject({ type: 'error', code: 'forbidden' })
    const full = channel()
    for (let i = 0; i < 100; i++) await enterPresence({ productId: product.productId, channel: full, identity: `ext:m${i}`, connectionId: `c${i}` })
    const late = await as(b, 'late', full, ['presence'])
    expect(await late.request({ type: 'presence.enter', channel: full })).toMatchObject({ type: 'error', code: 'rate_limited', temporary: true })
    expect(await late.request({ type: 'ping' })).toMatchObject({ type: 'reply' })
    for (const c of [client, without, live, late]) c.close()
  })

  test('the gateway keeps an entry alive past its lifetime while the connection lives, and takes it off the roster when it closes', async () => {
    const room = channel()
    const client = await as(b, 'erin', room, ['presence'])
    replied(await client.request({ type: 'presence.enter', channel: room, ttlSeconds: 1 }), 'presence.enter')
    await Bun.sleep(2500)
    expect((await listPresence(product.productId, room)).map((m) => m.identity)).toEqual(['ext:erin'])
    client.close()
    await client.closed
    for (const deadline = Date.now() + 3000; (await listPresence(product.productId, room)).length && Date.now() < deadline; ) await Bun.sleep(100)
    expect(await listPresence(product.productId, room)).toEqual([])
  })
})
