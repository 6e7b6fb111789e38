// A hostile tenant against Redis memory: per-product byte budgets on each shard (fan-out in flight, history), the
// product-wide client-event budget, and another product's subscribers on the same shard keeping continuity. Real public
// and gateway processes (small budgets through env), real Redis, real WebSocket clients.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { FAN_ENTRY_OVERHEAD_BYTES, HISTORY_ENTRY_OVERHEAD_BYTES, historyChannelBytes, type PublishBudgets, publish } from '../../shared/realtime/broker'
import { channelKeys, fanKey, fanSeqKey } from '../../shared/realtime/keys'
import { shardOf } from '../../shared/realtime/shards'
import { signToken, type TokenChannel } from '../../shared/realtime/tokens'
import { redis } from '../../shared/redis/client'
import { eventually, startProcess, type Worker } from '../helpers'
import { awayFromWindowEdge, pub, realtimeProduct, type RealtimeProduct } from '../realtime/public-helpers'
import { type Frame, startGateway, type GatewayProcess, WsClient } from '../gateway/ws-helpers'

const FANOUT_MAX = 128 * 1024
// Long enough that a test filling the budget on a loaded machine stays within one window.
const FANOUT_WINDOW_MS = 30_000
const HISTORY_MAX = 48 * 1024
const EVENTS_PER_SECOND = 8
/** The retention of namespace `brief`: long enough to fill a budget before its channels expire, even on a loaded machine. */
const BRIEF_TTL_SECONDS = 5
const PRESENCE_WRITES_PER_SECOND = 1
const PRESENCE_WRITE_BURST = 5
const ENV = {
  GATEWAY_PRESENCE_WRITES_PER_SECOND: String(PRESENCE_WRITES_PER_SECOND),
  GATEWAY_PRESENCE_WRITE_BURST: String(PRESENCE_WRITE_BURST),
  REALTIME_PRODUCT_FANOUT_MAX_BYTES: String(FANOUT_MAX),
  REALTIME_FANOUT_RETENTION_MS: String(FANOUT_WINDOW_MS),
  REALTIME_PRODUCT_HISTORY_MAX_BYTES: String(HISTORY_MAX),
  REALTIME_PRODUCT_CLIENT_EVENTS_PER_SECOND: String(EVENTS_PER_SECOND),
}
const NAMESPACES = [
  { name: 'chat', history: { ttlSeconds: 300, size: 100 } },
  { name: 'short', history: { ttlSeconds: 300, size: 4 } },
  { name: 'brief', history: { ttlSeconds: BRIEF_TTL_SECONDS, size: 100 } },
  { name: 'live' },
  { name: 'events', clientEvents: true },
  { name: 'lobby', presence: true },
]

let g1: GatewayProcess
let g2: GatewayProcess
let api: Worker
let A: RealtimeProduct
let B: RealtimeProduct

beforeAll(async () => {
  ;[g1, g2, api, A, B] = await Promise.all([
    startGateway(ENV), startGateway(ENV),
    startProcess('public', { TRUST_PROXY: '1', ...ENV }),
    realtimeProduct(NAMESPACES), realtimeProduct(NAMESPACES),
  ])
}, 30_000)

afterAll(async () => {
  await Promise.all([g1?.stop(), g2?.stop(), api?.stop()])
})

/** Shards already used by a test here: each test takes its own, so budgets (per product and shard) never mix. */
const taken = new Set<number>()

/** For each `[product, namespace, count]`, `count` channel names, all on one shard no other test here uses. */
function sameShard<const W extends readonly (readonly [RealtimeProduct, string, number?])[]>(...wants: W): { [K in keyof W]: string[] } {
  for (let i = 0; ; i++) {
    const shard = shardOf(wants[0]![0].productId, `seed:${i}`)
    if (taken.has(shard)) continue
    taken.add(shard)
    return wants.map(([product, namespace, count = 1]) => {
      const names: string[] = []
      for (let j = 0; names.length < count; j++) {
        const name = `${namespace}:${randomUUID().slice(0, 8)}-${j}`
        if (shardOf(product.productId, name) === shard) names.push(name)
      }
      return names
    }) as { [K in keyof W]: string[] }
  }
}

const post = (product: RealtimeProduct, channel: string, data: unknown) =>
  pub(api, 'POST', `/${product.productId}/realtime/messages`, { key: product.key, body: { channel, data } })

async function connected(gateway: GatewayProcess, product: RealtimeProduct, channels: TokenChannel[]): Promise<WsClient> {
  const { token } = await signToken({ productId: product.productId, apiKeyId: product.keyId, subject: `u-${randomUUID().slice(0, 8)}`, channels })
  const client = await WsClient.open(gateway.wsUrl)
  expect(await client.request({ type: 'connect', token })).toMatchObject({ type: 'reply', to: 'connect' })
  return client
}

/** What the publish script charges a fan-out entry of an HTTP publish (no sender). */
const fanCost = (product: RealtimeProduct, channel: string, data: unknown) =>
  product.productId.length + channel.length + 36 + Buffer.byteLength(JSON.stringify(data)) + FAN_ENTRY_OVERHEAD_BYTES

describe('fan-out bytes in flight, per product and shard', () => {
  test('A publishing past its budget gets 429 fanout_budget_exceeded with Retry-After, while B on the same shard keeps every message in order on two gateways', async () => {
    const [[aChannel], [bRoom]] = sameShard([A, 'live'], [B, 'chat'])
    expect(shardOf(B.productId, bRoom!)).toBe(shardOf(A.productId, aChannel!))
    const subscribers = await Promise.all([g1, g2].map(async (gateway) => {
      const client = await connected(gateway, B, [{ name: bRoom!, ops: ['subscribe'] }])
      expect(await client.request({ type: 'subscribe', channel: bRoom! })).toMatchObject({ type: 'reply', offset: 0 })
      return client
    }))
    const big = { blob: 'a'.repeat(8 * 1024) }
    const fits = Math.floor(FANOUT_MAX / fanCost(A, aChannel!, big))
    const statuses: number[] = []
    let refusal: Awaited<ReturnType<typeof post>> | undefined
    const rounds = fits + 10
    for (let i = 1; i <= rounds; i++) {
      const a = await post(A, aChannel!, big)
      statuses.push(a.status)
      if (a.status === 429) refusal ??= a
      const b = await post(B, bRoom!, { i })
      expect(b.status).toBe(200)
      expect(b.body.offset).toBe(i)
    }
    // Exactly at the bound: every publish that fits is taken, the next is refused (all within one window).
    expect(statuses.slice(0, fits)).toEqual(Array(fits).fill(200))
    expect(statuses.slice(fits)).toEqual(Array(rounds - fits).fill(429))
    expect(refusal!.body).toMatchObject({ error: 'fanout_budget_exceeded', limitBytes: FANOUT_MAX, windowMs: FANOUT_WINDOW_MS })
    const retryAfter = Number(refusal!.headers.get('retry-after'))
    expect(retryAfter).toBeGreaterThanOrEqual(1)
    expect(retryAfter).toBeLessThanOrEqual(Math.ceil((FANOUT_WINDOW_MS + FANOUT_WINDOW_MS / 10) / 1000)) // the window plus its current slice
    for (const client of subscribers) {
      const got: Frame[] = []
      for (const deadline = Date.now() + 10_000; got.length < rounds && Date.now() < deadline; ) {
        got.push(...client.publications(bRoom!))
        if (got.length < rounds) await client.next((f) => f.type === 'publication', 2000).then((f) => got.push(f), () => {})
      }
      expect(got.map((f) => f.offset)).toEqual(Array.from({ length: rounds }, (_, i) => i + 1))
      expect(got.map((f) => f.data.i)).toEqual(Array.from({ length: rounds }, (_, i) => i + 1))
      expect(client.frames.filter((f) => f.type === 'unsubscribe')).toEqual([])
      client.close()
    }
  }, 60_000)

  test('a flood from A of more than 10 000 entries, up to its budget and past it, never trims entries a lagging reader of B on the same shard has not read', async () => {
    const [[aChannel], [bChannel]] = sameShard([A, 'live'], [B, 'live'])
    const shard = shardOf(A.productId, aChannel!)
    // A budget that holds 12 000 of A's entries: more than the length cap of 10 000 the streams once had, so that a
    // stream trimmed by length would lose the reader's first entries here; the 500 past it are refused.
    const cost = A.productId.length + aChannel!.length + 36 + '"flood"'.length + FAN_ENTRY_OVERHEAD_BYTES
    const budgets: PublishBudgets = { fanoutRetentionMs: 60_000, fanoutMaxBytes: 12_000 * cost, historyMaxBytes: HISTORY_MAX }
    // The reader stands here and reads nothing until the flood is over (a gateway stalled that long).
    const [[cursor], n] = await Promise.all([redis().xrevrange(fanKey(shard), '+', '-', 'COUNT', 1), redis().get(fanSeqKey(shard))])
    const policy = { historyTtlSeconds: 0, historySize: 0 }
    await publish({ productId: B.productId, channel: bChannel!, policy, data: '"b1"' }, budgets)
    let accepted = 0
    let refused = 0
    for (let round = 0; round < 125; round++) {
      const results = await Promise.allSettled(Array.from({ length: 100 }, () =>
        publish({ productId: A.productId, channel: aChannel!, policy, data: '"flood"' }, budgets)))
      for (const r of results) {
        if (r.status === 'fulfilled') accepted++
        else {
          expect(r.reason).toMatchObject({ status: 429, code: 'fanout_budget_exceeded' })
          refused++
        }
      }
    }
    await publish({ productId: B.productId, channel: bChannel!, policy, data: '"b2"' }, budgets)
    expect(accepted).toBe(12_000)
    expect(refused).toBe(500)
    const rows = await redis().xrange(fanKey(shard), cursor ? `(${cursor[0]}` : '-', '+')
    const entries = rows.map(([, f]) => Object.fromEntries(Array.from({ length: f.length / 2 }, (_, i) => [f[2 * i]!, f[2 * i + 1]!])))
    // Continuous: numbered from the reader's position on, without a hole, B's messages (the first one included) there.
    expect(entries.length).toBeGreaterThanOrEqual(12_002)
    expect(entries.map((e) => Number(e.n))).toEqual(Array.from({ length: entries.length }, (_, i) => Number(n ?? 0) + 1 + i))
    expect(entries.filter((e) => e.product === B.productId).map((e) => e.d)).toEqual(['"b1"', '"b2"'])
  }, 120_000)
})

test('a gateway stalled while A floods the shard with more than 10 000 entries, past its budget, delivers every message of B once it resumes, without a resubscribe', async () => {
  const [[aChannel], [bRoom]] = sameShard([A, 'live'], [B, 'chat'])
  const gateway = await startGateway(ENV)
  try {
    const client = await connected(gateway, B, [{ name: bRoom!, ops: ['subscribe'] }])
    expect(await client.request({ type: 'subscribe', channel: bRoom })).toMatchObject({ type: 'reply', offset: 0 })
    // 12 000 of A's entries fit its budget: more than the former length cap of 10 000, which would have trimmed B's
    // first messages before the stalled gateway read them. Every write here keeps entries a minute, so that none ages
    // out on a slow machine (which would be by design, and not this test's point).
    const cost = A.productId.length + aChannel!.length + 36 + '"flood"'.length + FAN_ENTRY_OVERHEAD_BYTES
    const budgets: PublishBudgets = { fanoutRetentionMs: 60_000, fanoutMaxBytes: 12_000 * cost, historyMaxBytes: HISTORY_MAX }
    const policy = { historyTtlSeconds: 0, historySize: 0 }
    const chat = { historyTtlSeconds: 300, historySize: 100 }
    const sendB = async (i: number) => expect(await publish({ productId: B.productId, channel: bRoom!, policy: chat, data: JSON.stringify({ i }) }, budgets)).toMatchObject({ offset: i })
    let accepted = 0
    gateway.proc.kill('SIGSTOP') // it reads nothing until the flood is over
    try {
      for (let i = 1; i <= 3; i++) await sendB(i)
      for (let round = 0; round < 125; round++) {
        const results = await Promise.allSettled(Array.from({ length: 100 }, () =>
          publish({ productId: A.productId, channel: aChannel!, policy, data: '"flood"' }, budgets)))
        accepted += results.filter((r) => r.status === 'fulfilled').length
      }
      for (let i = 4; i <= 6; i++) await sendB(i)
    } finally {
      gateway.proc.kill('SIGCONT')
    }
    expect(accepted).toBe(12_000)
    const got: Frame[] = []
    for (const deadline = Date.now() + 20_000; got.length < 6 && Date.now() < deadline; ) {
      got.push(...client.publications(bRoom!))
      if (got.length < 6) await client.next((f) => f.type === 'publication', 2000).then((f) => got.push(f), () => {})
    }
    expect(got.map((f) => [f.offset, f.data.i])).toEqual([1, 2, 3, 4, 5, 6].map((i) => [i, i]))
    expect(client.frames.filter((f) => f.type === 'unsubscribe')).toEqual([])
    client.close()
  } finally {
    await gateway.stop()
  }
}, 120_000)

describe('history bytes, per product and shard', () => {
  test('A\'s history over several channels of one shard stays within its byte budget: past it 429 history_budget_exceeded; B on that shard still publishes', async () => {
    const [aChannels, [bChannel]] = sameShard([A, 'chat', 3], [B, 'chat'])
    const data = { blob: 'h'.repeat(2000) }
    const cost = 36 + JSON.stringify(data).length + HISTORY_ENTRY_OVERHEAD_BYTES
    // Each channel costs its own overhead from its first publish on (all three start within the first three).
    const channelsCost = aChannels!.reduce((sum, channel) => sum + historyChannelBytes(channel), 0)
    const fits = Math.floor((HISTORY_MAX - channelsCost) / cost)
    const statuses: number[] = []
    let refusal: Awaited<ReturnType<typeof post>> | undefined
    for (let i = 0; i < fits + 6; i++) {
      const result = await post(A, aChannels![i % 3]!, data)
      statuses.push(result.status)
      if (result.status === 429) refusal ??= result
    }
    expect(statuses.slice(0, fits)).toEqual(Array(fits).fill(200))
    expect(statuses.slice(fits)).toEqual(Array(6).fill(429))
    expect(refusal!.body).toMatchObject({ error: 'history_budget_exceeded', limitBytes: HISTORY_MAX })
    expect(Number(refusal!.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    // What history holds for A on that shard: within the budget, and no refused message was stored.
    let stored = 0
    for (const channel of aChannels!) {
      const history = await pub(api, 'GET', `/${A.productId}/realtime/channels/${channel}/history?last_n=100`, { key: A.key })
      expect(history.status).toBe(200)
      stored += history.body.entries.length
    }
    expect(stored).toBe(fits)
    expect(stored * cost + channelsCost).toBeLessThanOrEqual(HISTORY_MAX)
    // Another product on the same shard has its own budget.
    expect((await post(B, bChannel!, data)).status).toBe(200)
  }, 30_000)

  test('a channel trimmed by its size frees what it trimmed: publishing far more than the budget to one capped channel is never refused', async () => {
    const [[channel]] = sameShard([A, 'short'])
    const data = { blob: 's'.repeat(2000) }
    // 30 x 2 KB = 60 KB through a channel that keeps 4 entries (8 KB): more than the 48 KiB budget, never held at once.
    for (let i = 1; i <= 30; i++) {
      const result = await post(A, channel!, data)
      expect(result.status).toBe(200)
      expect(result.body.offset).toBe(i)
    }
    const history = await pub(api, 'GET', `/${A.productId}/realtime/channels/${channel}/history?last_n=100`, { key: A.key })
    expect(history.body.entries.map((e: { offset: number }) => e.offset)).toEqual([27, 28, 29, 30])
  }, 30_000)
  test('channels whose history expired leave the product\'s total: a product at its budget publishes again once they are gone, to a new channel', async () => {
    const [channels, [fresh]] = sameShard([A, 'brief', 2], [A, 'brief'])
    const data = { blob: 'x'.repeat(4000) }
    let refusal: Awaited<ReturnType<typeof post>> | undefined
    for (let i = 0; i < 40 && !refusal; i++) {
      const result = await post(A, channels![i % 2]!, data)
      if (result.status === 429) refusal = result
      else expect(result.status).toBe(200)
    }
    expect(refusal!.body).toMatchObject({ error: 'history_budget_exceeded' })
    // Seconds until the first of its channels expires: within their retention window and the eighth of it their keys'
    // expiry may run ahead (docs/realtime-data-plane.md, "Publish", step 6).
    const retryAfter = Number(refusal!.headers.get('retry-after'))
    expect(retryAfter).toBeGreaterThanOrEqual(1)
    expect(retryAfter).toBeLessThanOrEqual(Math.ceil(BRIEF_TTL_SECONDS * 9 / 8))
    expect((await post(A, fresh!, data)).status).toBe(429)
    // Nothing touches the expired channels: the publish itself takes them off the product's total, once they expired.
    // Both are waited for: their keys expire up to a publish apart, and a publish between the two would fit with the
    // second still counted (as it must: it still holds its history).
    const metas = channels!.map((channel) => channelKeys(A.productId, channel).meta)
    await eventually(async () => (await redis().exists(...metas)) === 0, 20_000, 'both channels expired')
    let again = await post(A, fresh!, data)
    for (const deadline = Date.now() + 20_000; again.status === 429 && Date.now() < deadline; again = await post(A, fresh!, data)) await Bun.sleep(100)
    expect(again.status).toBe(200)
    expect(again.body.offset).toBe(1)
    // Both expired channels were released whole, their channel cost included: the total is the new channel alone.
    const total = await redis().hget(channelKeys(A.productId, fresh!).histBytes, '#')
    expect(Number(total)).toBe(historyChannelBytes(fresh!) + 36 + JSON.stringify(data).length + HISTORY_ENTRY_OVERHEAD_BYTES)
  }, 40_000)
})

describe('client events', () => {
  test('the product-wide budget holds across connections on two gateways: beyond it rate_limited, and the next second it sends again', async () => {
    const [[room]] = sameShard([A, 'events'])
    const ops: TokenChannel[] = [{ name: room!, ops: ['subscribe', 'publish'] }]
    const [c1, c2] = await Promise.all([connected(g1, A, ops), connected(g2, A, ops)])
    await awayFromWindowEdge(1, 900)
    // 5 each: within every connection's own bucket (burst 10), 10 together: past the product's 8 a second. Sent at
    // once, so that all are counted in one second even on a slow machine (the gateways count with the same clock).
    const started = Date.now()
    const answers = await Promise.all([c1, c2].flatMap((c) => Array.from({ length: 5 }, (_, i) => c.request({ type: 'publish', channel: room, data: i }))))
    expect(Math.floor(Date.now() / 1000)).toBe(Math.floor(started / 1000)) // else the events were counted in two seconds
    expect(answers.filter((f) => f.type === 'reply').length).toBe(EVENTS_PER_SECOND)
    const limited = answers.filter((f) => f.type === 'error')
    expect(limited.length).toBe(10 - EVENTS_PER_SECOND)
    for (const f of limited) expect(f).toMatchObject({ code: 'rate_limited', temporary: true, message: expect.stringContaining('across this product') })
    await awayFromWindowEdge(1, 999) // the next second
    expect(await c1.request({ type: 'publish', channel: room, data: 'again' })).toMatchObject({ type: 'reply', to: 'publish' })
    c1.close()
    c2.close()
  }, 30_000)

  test('client events past the product\'s fan-out byte budget on the shard are rate_limited', async () => {
    const [[room]] = sameShard([B, 'events'])
    const client = await connected(g1, B, [{ name: room!, ops: ['subscribe', 'publish'] }])
    await awayFromWindowEdge(1, 700)
    const data = 'e'.repeat(30_000)
    const cost = B.productId.length + room!.length + 36 + data.length + 2 + 36 + FAN_ENTRY_OVERHEAD_BYTES // sender: a UUID
    const fits = Math.floor(FANOUT_MAX / cost)
    const answers: Frame[] = []
    for (let i = 0; i <= fits; i++) answers.push(await client.request({ type: 'publish', channel: room, data }))
    expect(answers.slice(0, fits).map((f) => f.type)).toEqual(Array(fits).fill('reply'))
    expect(answers[fits]).toMatchObject({ type: 'error', code: 'rate_limited', message: expect.stringContaining('in flight') })
    client.close()
  }, 30_000)
})

describe('presence writes', () => {
  test('an enter/leave loop with the largest info is rate_limited past the connection\'s presence bucket; the connection stays', async () => {
    const [[room]] = sameShard([A, 'lobby'])
    const client = await connected(g1, A, [{ name: room!, ops: ['presence'] }])
    const info = { blob: 'i'.repeat(10_000) }
    const started = Date.now()
    const enters: Frame[] = []
    for (let i = 0; i < 12; i++) {
      const entered = await client.request({ type: 'presence.enter', channel: room, info })
      enters.push(entered)
      if (entered.type === 'reply') expect(await client.request({ type: 'presence.leave', channel: room })).toMatchObject({ type: 'reply', to: 'presence.leave' })
    }
    const elapsed = (Date.now() - started) / 1000
    const taken = enters.filter((f) => f.type === 'reply').length
    // The burst, plus what the bucket refilled while the loop ran (1 a second): far fewer than the 12 tried.
    expect(enters.slice(0, PRESENCE_WRITE_BURST).map((f) => f.type)).toEqual(Array(PRESENCE_WRITE_BURST).fill('reply'))
    expect(taken).toBeLessThanOrEqual(PRESENCE_WRITE_BURST + Math.ceil(elapsed * PRESENCE_WRITES_PER_SECOND))
    for (const f of enters.filter((f) => f.type === 'error')) {
      expect(f).toMatchObject({ code: 'rate_limited', temporary: true, message: expect.stringContaining('presence writes') })
    }
    expect(await client.request({ type: 'ping' })).toMatchObject({ type: 'reply', to: 'ping' })
    client.close()
  }, 30_000)

  test('a join past the product\'s fan-out byte budget on the shard is rate_limited and announced to no one; a leave still goes out', async () => {
    const [[room], [live]] = sameShard([B, 'lobby'], [B, 'live'])
    const ops: TokenChannel[] = [{ name: room!, ops: ['subscribe', 'presence'] }]
    const [observer, member, newcomer] = await Promise.all([connected(g1, B, ops), connected(g2, B, ops), connected(g2, B, ops)])
    expect(await observer.request({ type: 'subscribe', channel: room })).toMatchObject({ type: 'reply', to: 'subscribe' })
    expect(await member.request({ type: 'presence.enter', channel: room, info: { n: 1 } })).toMatchObject({ type: 'reply' })
    const joined = await observer.next((f) => f.type === 'join')
    // B spends its fan-out budget on that shard with publications until one is refused.
    let status = 200
    for (let i = 0; i < 100 && status === 200; i++) {
      status = (await post(B, live!, { blob: 'f'.repeat(8 * 1024) })).status
      if (status !== 200) expect(status).toBe(429)
    }
    expect(status).toBe(429)
    // Less than 8 KiB is left: a join carrying 10 KB of info does not fit.
    expect(await newcomer.request({ type: 'presence.enter', channel: room, info: { blob: 'i'.repeat(10_000) } }))
      .toMatchObject({ type: 'error', code: 'rate_limited', temporary: true, message: expect.stringContaining('in flight') })
    expect(await member.request({ type: 'presence.leave', channel: room })).toMatchObject({ type: 'reply', to: 'presence.leave' })
    const left = await observer.next((f) => f.type === 'leave')
    expect(left.identity).toBe(joined.identity)
    expect(await member.request({ type: 'presence.read', channel: room })).toMatchObject({ type: 'reply', members: [] })
    expect(observer.frames.filter((f) => f.type === 'join' || f.type === 'leave')).toEqual([])
    for (const c of [observer, member, newcomer]) c.close()
  }, 30_000)
})
