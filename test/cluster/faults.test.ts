// A master of a real three-master Redis Cluster (no replicas) killed under a paced publish, then started again empty:
// only the channels whose shards it serves answer 503 meanwhile; the others keep being accepted and delivered, once and
// in order; once it is back, its channels publish again in a new epoch, their subscribers get `recovered: false` with
// that epoch, and nothing else was disturbed. The invalidation link, whose first seed node is the killed one, moves on.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { fanKey } from '../../shared/realtime/keys'
import { shardOf } from '../../shared/realtime/shards'
import { signToken } from '../../shared/realtime/tokens'
import { keySlot } from '../../shared/redis'
import { type Publication, RealtimeClient, type SubscribedContext } from '../../shared/realtime-client/client'
import { startGateway, type GatewayProcess } from '../gateway/ws-helpers'
import { startProcess, type Worker } from '../helpers'
import { pub, realtimeProduct, type RealtimeProduct } from '../realtime/public-helpers'
import { RedisCluster } from './redis-cluster'

const cluster = new RedisCluster()
let publicWorker: Worker
let gateway: GatewayProcess
let p: RealtimeProduct
/** What a publish must be answered within, outage or not (the command timeout is 500 ms). */
const ANSWER_MS = 1500

beforeAll(async () => {
  await cluster.start()
  const env = { REDIS_URL: cluster.url, REDIS_COMMAND_TIMEOUT_MS: '500' }
  ;[publicWorker, gateway, p] = await Promise.all([
    startProcess('public', { ...env, PUBLIC_IP_RATE_LIMIT: '1000000', REALTIME_QUOTA_BURST: '1000000' }),
    startGateway(env),
    realtimeProduct([{ name: 'chat', history: { ttlSeconds: 300, size: 1000 } }]),
  ])
}, 60_000)
afterAll(async () => {
  await Promise.all([publicWorker?.stop(), gateway?.stop()])
  await cluster.stop()
})

/** `count` channels whose shard streams the node `port` serves (`on`) or does not (`!on`). */
async function channelsServedBy(port: number, on: boolean, count: number): Promise<string[]> {
  const found: string[] = []
  for (let i = 0; found.length < count; i++) {
    const channel = `chat:fault-${i}`
    if (((await cluster.ownerOf(keySlot(fanKey(shardOf(p.productId, channel))))) === port) === on) found.push(channel)
  }
  return found
}

interface Sent { n: number; channel: string; status: number; offset?: number; epoch?: string; retryAfter: string | null; ms: number; at: number }

test('a master killed under a paced publish: its channels answer 503 and the others keep delivering; back empty, its channels restart in a new epoch and their subscribers are told `recovered: false`', async () => {
  const victim = cluster.ports[0]! // also the first seed node of REDIS_URL: the invalidation link must move on
  const [doomed, spared] = await Promise.all([channelsServedBy(victim, true, 2), channelsServedBy(victim, false, 2)])
  const channels = [...doomed, ...spared]
  const token = (await signToken({ productId: p.productId, apiKeyId: p.keyId, subject: 'fault', channels: channels.map((name) => ({ name, ops: ['subscribe'] as const })) })).token
  const received = new Map(channels.map((c) => [c, [] as Publication<{ n: number }>[]]))
  const subscribed = new Map(channels.map((c) => [c, [] as SubscribedContext[]]))
  const client = new RealtimeClient({ url: gateway.wsUrl, getToken: async () => token, minReconnectDelayMs: 100, maxReconnectDelayMs: 500 })
  const subscriptions = channels.map((channel) => client.subscribe<{ n: number }>(channel, {
    publication: (publication) => received.get(channel)!.push(publication),
    subscribed: (context) => subscribed.get(channel)!.push(context),
  }))
  client.connect()
  for (const deadline = Date.now() + 10_000; !subscriptions.every((s) => s.active) && Date.now() < deadline; ) await Bun.sleep(20)
  expect(subscriptions.every((s) => s.active)).toBe(true)

  const sent: Sent[] = []
  let running = true
  const publisher = (async () => {
    for (let n = 1; running; n++) {
      const channel = channels[n % channels.length]!
      const started = Date.now()
      const answer = await pub(publicWorker, 'POST', `/${p.productId}/realtime/messages`, { key: p.key, body: { channel, data: { n } } })
      sent.push({ n, channel, status: answer.status, offset: answer.body.offset, epoch: answer.body.epoch, retryAfter: answer.headers.get('retry-after'), ms: Date.now() - started, at: started })
      await Bun.sleep(10)
    }
  })()
  try {
    await Bun.sleep(500)
    const killedAt = Date.now()
    await cluster.kill(victim)
    await Bun.sleep(1000)
    // The invalidation link moved to a node that is up, and the nodes up still serve: ready, Redis degraded.
    let ready = await fetch(`${publicWorker.url}/readyz`)
    for (const deadline = Date.now() + 1500; ready.status !== 200 && Date.now() < deadline; await Bun.sleep(100)) ready = await fetch(`${publicWorker.url}/readyz`)
    expect([ready.status, await ready.json()]).toEqual([200, expect.objectContaining({ redis: 'degraded', invalidations: 'ok' })])
    await Bun.sleep(1000)
    const restartedAt = Date.now()
    await cluster.restart(victim)
    // Published again on every channel after the return, and delivered.
    for (const deadline = Date.now() + 10_000; Date.now() < deadline; await Bun.sleep(50)) {
      const back = channels.every((c) => sent.some((s) => s.channel === c && s.at > restartedAt && s.status === 200))
      if (back) break
    }
    await Bun.sleep(500)
    running = false
    await publisher

    expect(sent.filter((s) => s.ms > ANSWER_MS)).toEqual([])
    expect(sent.filter((s) => s.status !== 200 && s.status !== 503)).toEqual([])
    const during = sent.filter((s) => s.at > killedAt + 200 && s.at < restartedAt)
    // Only the killed node's channels were refused, with Retry-After; the others never were.
    expect(during.filter((s) => doomed.includes(s.channel)).length).toBeGreaterThan(5)
    expect(during.filter((s) => doomed.includes(s.channel)).every((s) => s.status === 503 && Number(s.retryAfter) >= 1)).toBe(true)
    expect(sent.filter((s) => spared.includes(s.channel) && s.status !== 200)).toEqual([])
    expect(during.filter((s) => spared.includes(s.channel)).length).toBeGreaterThan(5)

    const accepted = (channel: string) => sent.filter((s) => s.channel === channel && s.status === 200)
    const deliveredOf = async (channel: string, count: number) => {
      for (const deadline = Date.now() + 5000; received.get(channel)!.length < count && Date.now() < deadline; ) await Bun.sleep(20)
      await Bun.sleep(100) // and nothing more
      return received.get(channel)!.map((publication) => publication.data!.n)
    }
    for (const channel of spared) {
      // Every accepted publication delivered once, in order, on the one subscription it started with.
      const offsets = accepted(channel).map((s) => s.offset)
      expect(offsets).toEqual(offsets.map((_, i) => i + 1))
      expect(await deliveredOf(channel, offsets.length)).toEqual(accepted(channel).map((s) => s.n))
      expect(subscribed.get(channel)!.length).toBe(1)
    }
    for (const channel of doomed) {
      const before = accepted(channel).filter((s) => s.at < killedAt)
      const after = accepted(channel).filter((s) => s.at > restartedAt)
      // The node came back empty: a new epoch, offsets from 1 again.
      expect(after.map((s) => s.offset)).toEqual(after.map((_, i) => i + 1))
      expect(after[0]!.epoch).not.toBe(before[0]!.epoch)
      // Its subscriber was told it could not recover, with the new epoch, and then got what was published in it.
      const contexts = subscribed.get(channel)!
      for (const deadline = Date.now() + 5000; contexts.length < 2 && Date.now() < deadline; ) await Bun.sleep(20)
      expect(contexts.at(-1)).toMatchObject({ wasRecovering: true, recovered: false, epoch: after[0]!.epoch })
      // Before the loss: everything, once, in order. In the new epoch: from where the new subscription started (what was
      // published before it is not replayed: the client was told to resync), every publication once, in order.
      const { offset: startedAt } = contexts.at(-1)!
      const inNewEpoch = after.filter((s) => s.offset! > startedAt!).map((s) => s.n)
      const got = await deliveredOf(channel, before.length + inNewEpoch.length)
      expect(got).toEqual([...before.map((s) => s.n), ...inNewEpoch])
      expect(inNewEpoch.length).toBeGreaterThan(0)
    }
    expect(await (await fetch(`${publicWorker.url}/readyz`)).json()).toMatchObject({ status: 'ready', redis: 'ok', invalidations: 'ok' })
  } finally {
    running = false
    await publisher
    client.disconnect()
  }
}, 60_000)
