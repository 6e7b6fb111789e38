// A master of a real three-master Redis Cluster gone silent under a paced publish: its process stopped (SIGSTOP), so its
// clients get no reset and no close, only no answers, as from a hung host or a dropped path. What users see: the
// channels on its slots answer 503 with Retry-After within the bound the command timeout sets; the channels on the other
// masters keep publishing, and a WebSocket subscriber through a gateway gets each of them once and in order; once the
// node runs again (SIGCONT, its data intact), its channels publish again in the same epoch and their subscribers recover.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { startGateway, type GatewayProcess } from '../gateway/ws-helpers'
import { startProcess, type Worker } from '../helpers'
import { realtimeProduct, type RealtimeProduct } from '../realtime/public-helpers'
import { channelsServedBy, pacedPublisher, subscriber } from './fault-helpers'
import { RedisCluster } from './redis-cluster'

const cluster = new RedisCluster()
let worker: Worker
let gateway: GatewayProcess
let p: RealtimeProduct

/** REDIS_COMMAND_TIMEOUT_MS of the worker and the gateway: each Redis command is answered or failed within it. */
const COMMAND_TIMEOUT_MS = 500
/**
 * What a publish must be answered within while a node is silent. On a cluster a publish makes three Redis steps in a
 * row (IP limit, quota, publish: shared/realtime/publish-message.ts); the counters' slots move with their windows, so
 * all three may land on the silent node, and each is answered within the command timeout (shared/redis/client.ts). Plus
 * 500 ms for the HTTP round trip and the worker's own work on a loaded machine.
 */
const ANSWER_MS = 3 * COMMAND_TIMEOUT_MS + 500
/**
 * How long the node stays silent: past the cluster's node timeout (2 s in redis-cluster.ts: the other masters mark it
 * failed), many of its breaker's cool-downs (one command timeout each) and three timeouts in a row (the worker replaces
 * its connection to the node, shared/redis/guard.ts), and past the gateway's read watchdog (8 s, gateway/fanout.ts: its
 * reader reconnects to the silent node and checks continuity when it answers).
 */
const SILENT_MS = 10_000

beforeAll(async () => {
  await cluster.start()
  const env = { REDIS_URL: cluster.url, REDIS_COMMAND_TIMEOUT_MS: String(COMMAND_TIMEOUT_MS) }
  ;[worker, gateway, p] = await Promise.all([
    startProcess('public', { ...env, PUBLIC_IP_RATE_LIMIT: '1000000', REALTIME_QUOTA_BURST: '1000000' }),
    startGateway(env),
    realtimeProduct([{ name: 'chat', history: { ttlSeconds: 300, size: 1000 } }]),
  ])
}, 60_000)
afterAll(async () => {
  await Promise.all([worker?.stop(), gateway?.stop()])
  await cluster.stop() // SIGKILL ends a stopped process too
})

test('a master gone silent (no reset, no close) under a paced publish: its channels answer 503 with Retry-After within the command timeout bound, the others keep delivering once and in order; awake again, its channels go on in the same epoch and their subscribers recover', async () => {
  const victim = cluster.ports[1]!
  const [silent, spared] = await Promise.all([channelsServedBy(cluster, p, victim, true, 2), channelsServedBy(cluster, p, victim, false, 2)])
  const channels = [...silent, ...spared]
  const { client, subscribed, received } = await subscriber(gateway, p, channels)
  const publisher = pacedPublisher(worker, p, channels)
  const { sent, accepted } = publisher
  let stopped = false
  try {
    await publisher.untilAccepted(3)
    let silencedAt = 0
    await publisher.pause(async () => {
      silencedAt = Date.now()
      cluster.silence(victim)
      stopped = true
    })
    await Bun.sleep(SILENT_MS)
    const resumedAt = Date.now()
    cluster.resume(victim)
    stopped = false
    // Accepted again on the node's channels once it runs, then a moment of publishing.
    for (const deadline = Date.now() + 15_000; Date.now() < deadline; await Bun.sleep(50)) {
      if (silent.every((c) => accepted(c).filter((s) => s.at > resumedAt).length >= 3)) break
    }
    await publisher.stop()

    expect(sent.filter((s) => s.ms > ANSWER_MS)).toEqual([])
    expect(sent.filter((s) => s.status !== 200 && s.status !== 503)).toEqual([])
    // Answered while the node was silent: its channels refused with Retry-After, the others accepted.
    const whileSilent = sent.filter((s) => s.at > silencedAt && s.at + s.ms < resumedAt)
    expect(whileSilent.filter((s) => silent.includes(s.channel) && !(s.status === 503 && Number(s.retryAfter) >= 1))).toEqual([])
    expect(whileSilent.filter((s) => silent.includes(s.channel)).length).toBeGreaterThan(3)
    // The node's breaker refuses while it is silent: only its probes wait out the timeout, most answers are quick.
    const refusals = whileSilent.filter((s) => silent.includes(s.channel))
    expect(refusals.filter((s) => s.ms < COMMAND_TIMEOUT_MS / 2).length).toBeGreaterThanOrEqual(refusals.length / 2)
    expect(sent.filter((s) => spared.includes(s.channel) && s.status !== 200)).toEqual([])
    expect(whileSilent.filter((s) => spared.includes(s.channel)).length).toBeGreaterThan(5)
    for (const channel of silent) expect(accepted(channel).filter((s) => s.at > resumedAt).length).toBeGreaterThan(0)

    for (const channel of channels) {
      const answers = accepted(channel)
      // Nothing was lost: one epoch before, during and after.
      expect(new Set(answers.map((s) => s.epoch)).size).toBe(1)
      for (const deadline = Date.now() + 5000; Date.now() < deadline && !answers.every((s) => received.get(channel)!.some((r) => r.data!.n === s.n)); ) await Bun.sleep(20)
      await Bun.sleep(100)
      const got = received.get(channel)!
      // Once and in order, with no gap: the offsets delivered follow one another, in the epoch the publishes were told.
      expect(got.map((r) => r.offset)).toEqual(got.map((_, i) => got[0]!.offset! + i))
      expect(got.filter((r) => r.epoch !== answers[0]!.epoch)).toEqual([])
      // Every accepted publication among them, where its answer placed it. A publish answered 503 may be there too: it
      // timed out on the silent link, but the node had been sent it and ran it when it woke (a 503 says the publish is
      // not known to have happened, never that it did not).
      expect(answers.filter((s) => !got.some((r) => r.data!.n === s.n && r.offset === s.offset))).toEqual([])
      const refused = new Set(sent.filter((s) => s.channel === channel && s.status === 503).map((s) => s.n))
      expect(got.filter((r) => !answers.some((s) => s.n === r.data!.n) && !refused.has(r.data!.n))).toEqual([])
      // A resubscription, if the gateway lost its reader for a while, recovered everything.
      expect(subscribed.get(channel)!.slice(1).filter((context) => !context.recovered)).toEqual([])
    }
    for (const channel of spared) {
      expect(received.get(channel)!.map((r) => r.data!.n)).toEqual(accepted(channel).map((s) => s.n))
      expect(subscribed.get(channel)!.length).toBe(1)
    }
  } finally {
    if (stopped) cluster.resume(victim)
    await publisher.stop()
    client.disconnect()
  }
}, 60_000)
