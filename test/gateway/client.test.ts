// The reference client (shared/realtime-client) against real gateways: typed handlers and cursors, failover to
// another gateway on 4100 and after a SIGKILL with recovery and no gap, reconnecting at once with a fresh token after
// 4001, token refresh.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { config } from '../../shared/config'
import { publish } from '../../shared/realtime/broker'
import { listPresence } from '../../shared/realtime/presence'
import { signToken } from '../../shared/realtime/tokens'
import { backoffDelay, type Publication, RealtimeClient, type SubscribedContext } from '../../shared/realtime-client/client'
import { startFaultProxy } from '../faults/proxy'
import { freePort, needsOneRedis } from '../helpers'
import { realtimeProduct, type RealtimeProduct } from '../realtime/public-helpers'
import { startGateway, type GatewayProcess } from './ws-helpers'

let product: RealtimeProduct
const HISTORY = { historyTtlSeconds: 300, historySize: 1000 }

beforeAll(async () => {
  product = await realtimeProduct([{ name: 'chat', presence: true, history: { ttlSeconds: 300, size: 1000 } }])
})

const tokenFor = async (channel: string, ttlSeconds = 3600, now?: number) =>
  (await signToken({ productId: product.productId, apiKeyId: product.keyId, subject: 'client-test', channels: [{ name: channel, ops: ['subscribe', 'presence'] }], ttlSeconds, now })).token

const until = async (what: () => boolean, ms = 10_000) => {
  for (const deadline = Date.now() + ms; !what() && Date.now() < deadline; ) await Bun.sleep(20)
  return what()
}

/** Publishes {i: 1}, {i: 2}, … to `channel` every `pauseMs` until stopped; `stop` answers how many. */
function pacedPublisher(channel: string, pauseMs: number) {
  let i = 0
  let running = true
  const loop = (async () => {
    while (running) {
      await publish({ productId: product.productId, channel, policy: HISTORY, data: JSON.stringify({ i: ++i }) })
      await Bun.sleep(pauseMs)
    }
  })()
  return {
    async stop() {
      running = false
      await loop
      return i
    },
  }
}

test('full-jitter backoff stays within [0, min(max, base × 2^attempt))', () => {
  expect(backoffDelay(0, 500, 20_000, () => 0.999)).toBe(499)
  expect(backoffDelay(3, 500, 20_000, () => 0.5)).toBe(2000)
  expect(backoffDelay(10, 500, 20_000, () => 0.999)).toBe(19_980)
  expect(backoffDelay(10, 500, 20_000, () => 0)).toBe(0)
})

let first: GatewayProcess | undefined
let second: GatewayProcess | undefined
afterAll(async () => {
  await Promise.all([first?.stop(), second?.stop()])
})

test('a gateway draining (4100) sends the client to another at once; it resubscribes with its cursor and misses nothing', async () => {
  const port = await freePort()
  first = await startGateway({}, port)
  const channel = `chat:client-${randomUUID().slice(0, 8)}`
  const received: Publication<{ i: number }>[] = []
  const subscribed: SubscribedContext[] = []
  const states: { state: string; code?: number; at: number }[] = []
  const client = new RealtimeClient({
    url: first.wsUrl, getToken: () => tokenFor(channel),
    onState: (state, detail) => states.push({ state, code: detail?.code, at: performance.now() }),
  })
  const subscription = client.subscribe<{ i: number }>(channel, { publication: (p) => received.push(p), subscribed: (c) => subscribed.push(c) })
  client.connect()
  expect(await until(() => subscription.active)).toBe(true)

  second = await startGateway({}, port) // the same port: the next connection can only reach it once the first is gone
  const publisher = pacedPublisher(channel, 5)
  await Bun.sleep(200)
  expect(await first.stop('SIGTERM')).toBe(0)
  first = undefined
  expect(await until(() => subscribed.length >= 2 && subscription.active)).toBe(true)
  await Bun.sleep(200)
  const i = await publisher.stop()
  expect(await until(() => received.length >= i)).toBe(true)
  await Bun.sleep(100)
  // Closed 4100, then a new attempt at once (no backoff). If that attempt races the draining gateway's listener going
  // away (the kernel may still hand it over), it fails and the next one, after a backoff, reaches the other gateway.
  const drained = states.findIndex((s) => s.state === 'disconnected')
  expect(states[drained]!.code).toBe(4100)
  expect(states[drained + 1]!.state).toBe('connecting')
  expect(states[drained + 1]!.at - states[drained]!.at).toBeLessThan(50)
  expect(states.at(-1)!.state).toBe('connected')
  expect(subscribed.at(-1)).toMatchObject({ wasRecovering: true, recovered: true })
  expect(received.map((p) => p.offset)).toEqual(Array.from({ length: i }, (_, k) => k + 1))
  expect(received.map((p) => p.data!.i)).toEqual(Array.from({ length: i }, (_, k) => k + 1))
  expect(subscription.offset).toBe(i)
  client.disconnect()
}, 30_000)

test('closed 4001 (a token refused) the client reconnects at once with a fresh token; a token near expiry is refreshed with auth', async () => {
  second ??= await startGateway()
  const channel = `chat:client-${randomUUID().slice(0, 8)}`
  const tokens: string[] = []
  const closes: (number | undefined)[] = []
  let calls = 0
  const client = new RealtimeClient({
    url: second.wsUrl, refreshAheadMs: 1000,
    getToken: async () => {
      calls++
      // first a token that is refused, then one that expires in 2 s (to be refreshed), then normal ones
      const token = calls === 1 ? 'not-a-token' : calls === 2 ? await tokenFor(channel, 60, Math.floor(Date.now() / 1000) - 58) : await tokenFor(channel)
      tokens.push(token)
      return token
    },
    onState: (state, detail) => state === 'disconnected' && closes.push(detail?.code),
  })
  const subscription = client.subscribe(channel)
  const started = Date.now()
  client.connect()
  expect(await until(() => subscription.active)).toBe(true)
  expect(closes).toEqual([4001])
  expect(Date.now() - started).toBeLessThan(2000) // at once, not after a backoff
  await Bun.sleep(3000) // past the second token's expiry: refreshed with auth, still connected
  expect(calls).toBeGreaterThanOrEqual(3)
  expect(closes).toEqual([4001])
  expect(client.connected).toBe(true)
  expect((await client.presence(channel).enter({ name: 'c' })).to).toBe('presence.enter')
  client.disconnect()
}, 30_000)

test('one of two gateways killed with SIGKILL under a paced publish: its client reconnects to the other and recovers through its cursor, nothing lost or duplicated; its presence entry expires within one lifetime', async () => {
  const port = await freePort()
  const doomed = await startGateway({}, port)
  const channel = `chat:client-${randomUUID().slice(0, 8)}`
  const received: Publication<{ i: number }>[] = []
  const subscribed: SubscribedContext[] = []
  const client = new RealtimeClient({ url: doomed.wsUrl, getToken: () => tokenFor(channel), minReconnectDelayMs: 100, maxReconnectDelayMs: 500 })
  const subscription = client.subscribe<{ i: number }>(channel, { publication: (p) => received.push(p), subscribed: (c) => subscribed.push(c) })
  client.connect()
  expect(await until(() => subscription.active)).toBe(true)
  await client.presence(channel).enter({ tab: 1 }, 2)
  const survivor = await startGateway({}, port)
  try {
    const publisher = pacedPublisher(channel, 10)
    await Bun.sleep(200)
    doomed.proc.kill('SIGKILL')
    await doomed.proc.exited
    expect(await until(() => subscribed.length >= 2 && subscription.active)).toBe(true)
    await Bun.sleep(200)
    const i = await publisher.stop()
    expect(await until(() => received.length >= i)).toBe(true)
    await Bun.sleep(100)
    expect(subscribed.at(-1)).toMatchObject({ wasRecovering: true, recovered: true })
    expect(received.map((p) => p.offset)).toEqual(Array.from({ length: i }, (_, k) => k + 1))
    // The killed gateway could not take its entry off the roster: it is gone within its 2 s lifetime.
    await Bun.sleep(2500)
    expect(await listPresence(product.productId, channel)).toEqual([])
  } finally {
    client.disconnect()
    await survivor.stop()
  }
}, 30_000)

test('unsubscribing while the subscribe is unanswered, then subscribing again: the new subscription is live and nothing of the old one is left', async () => {
  const gateway = await startGateway({})
  const channel = `chat:client-${randomUUID().slice(0, 8)}`
  const client = new RealtimeClient({ url: gateway.wsUrl, getToken: () => tokenFor(channel) })
  try {
    client.connect()
    expect(await until(() => client.connected)).toBe(true)
    const reasons: string[] = []
    const gone = client.subscribe(channel, { unsubscribed: (reason) => reasons.push(reason) })
    gone.unsubscribe() // its subscribe frame is out and not yet answered
    const received: Publication[] = []
    const again = client.subscribe(channel, { publication: (p) => received.push(p), unsubscribed: (reason) => reasons.push(reason) })
    expect(again).not.toBe(gone)
    expect(await until(() => again.active)).toBe(true)
    await publish({ productId: product.productId, channel, policy: HISTORY, data: JSON.stringify({ i: 1 }) })
    expect(await until(() => received.length === 1)).toBe(true)
    await Bun.sleep(100)
    expect([received.length, reasons]).toEqual([1, []])
  } finally {
    client.disconnect()
    await gateway.stop()
  }
})

test.skipIf(needsOneRedis)('a subscribe answered `unavailable` (Redis unreachable) is retried on the same connection with backoff, and succeeds once Redis is back', async () => {
  const url = new URL(config.redisUrl)
  const link = await startFaultProxy({ host: url.hostname, port: Number(url.port) })
  const gateway = await startGateway({ REDIS_URL: link.url(config.redisUrl), REDIS_COMMAND_TIMEOUT_MS: '500' })
  const channel = `chat:client-${randomUUID().slice(0, 8)}`
  const states: string[] = []
  const client = new RealtimeClient({ url: gateway.wsUrl, getToken: () => tokenFor(channel), minReconnectDelayMs: 100, maxReconnectDelayMs: 1000, onState: (state) => states.push(state) })
  try {
    client.connect()
    expect(await until(() => client.connected)).toBe(true)
    link.cut()
    const received: Publication[] = []
    const subscription = client.subscribe(channel, { publication: (p) => received.push(p) })
    await Bun.sleep(1500) // answered `unavailable`, perhaps more than once
    expect(subscription.active).toBe(false)
    await link.restore()
    expect(await until(() => subscription.active, 15_000)).toBe(true)
    await publish({ productId: product.productId, channel, policy: HISTORY, data: JSON.stringify({ i: 1 }) })
    expect(await until(() => received.length === 1)).toBe(true)
    expect(states).toEqual(['connecting', 'connected']) // on the same connection throughout
  } finally {
    client.disconnect()
    await gateway.stop()
    await link.close()
  }
}, 40_000)

test('a connection that stops answering (the gateway frozen, TCP still open) is found dead by its unanswered ping and replaced', async () => {
  const gateway = await startGateway({})
  const channel = `chat:client-${randomUUID().slice(0, 8)}`
  const states: { state: string; code?: number }[] = []
  const client = new RealtimeClient({
    url: gateway.wsUrl, getToken: () => tokenFor(channel), pingIntervalMs: 200, pongTimeoutMs: 400, minReconnectDelayMs: 50, maxReconnectDelayMs: 200,
    onState: (state, detail) => states.push({ state, code: detail?.code }),
  })
  try {
    client.connect()
    expect(await until(() => client.connected)).toBe(true)
    gateway.proc.kill('SIGSTOP') // no close, no reply: as a half-open connection behaves
    expect(await until(() => !client.connected, 3000)).toBe(true)
    expect(states).toContainEqual({ state: 'disconnected', code: 4000 }) // closed by the client for want of a reply
    gateway.proc.kill('SIGCONT')
    expect(await until(() => client.connected, 10_000)).toBe(true)
  } finally {
    gateway.proc.kill('SIGCONT')
    client.disconnect()
    await gateway.stop()
  }
}, 30_000)

test('4001 reconnects at once only the first time: a token provider whose tokens keep being refused meets backoff, not a loop', async () => {
  const gateway = await startGateway({})
  let calls = 0
  const client = new RealtimeClient({ url: gateway.wsUrl, getToken: async () => (calls++, 'not-a-token') })
  try {
    client.connect()
    await Bun.sleep(2000)
    // At once, then full-jitter backoff from 0.5 s doubling: a handful of attempts in 2 s (a loop makes hundreds).
    expect(calls).toBeGreaterThanOrEqual(2)
    expect(calls).toBeLessThanOrEqual(8)
  } finally {
    client.disconnect()
    await gateway.stop()
  }
})
