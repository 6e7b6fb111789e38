// A master of a real three-master Redis Cluster killed under a paced publish. Without a replica, then started again
// empty: only the channels whose shards it serves answer 503 meanwhile; the others keep being accepted and delivered,
// once and in order; once it is back, its channels publish again in a new epoch, their subscribers get
// `recovered: false` with that epoch, and nothing else was disturbed. The invalidation link, whose first seed node is
// the killed one, moves on. With a replica: the cluster promotes it, and its channels go on in a new epoch (a promoted
// replica's generation), every publication delivered once and in order. With a replica made to miss acknowledged
// publications before the master dies: their offsets are never numbered again, and a subscriber that had them resyncs.
// First, on the cluster with replicas: an invalidation is published on every node, the replicas a process never used
// included, each followed by its fence.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { Cluster, Redis } from 'ioredis'
import { fanKey } from '../../shared/realtime/keys'
import { shardOf } from '../../shared/realtime/shards'
import { keySlot } from '../../shared/redis/key-slot'
import { startGateway, type GatewayProcess } from '../gateway/ws-helpers'
import { startProcess, watchFences, type Worker } from '../helpers'
import { createKey, pub, realtimeProduct, type RealtimeProduct } from '../realtime/public-helpers'
import { channelsServedBy as servedBy, pacedPublisher as publisherOf, subscriber as subscriberOf } from './fault-helpers'
import { RedisCluster } from './redis-cluster'

const cluster = new RedisCluster()
const replicated = new RedisCluster()
let publicWorker: Worker
let api: Worker
let gateway: GatewayProcess
let p: RealtimeProduct
/** What a publish must be answered within, outage or not (the command timeout is 500 ms). */
const ANSWER_MS = 1500

/** A public worker and a gateway on `on`. */
async function platformOn(on: RedisCluster) {
  const env = { REDIS_URL: on.url, REDIS_COMMAND_TIMEOUT_MS: '500' }
  const [worker, gw] = await Promise.all([
    startProcess('public', { ...env, PUBLIC_IP_RATE_LIMIT: '1000000', REALTIME_QUOTA_BURST: '1000000' }),
    startGateway(env),
  ])
  return { worker, gateway: gw }
}

beforeAll(async () => {
  await Promise.all([cluster.start(), replicated.start(3, 1)])
  ;[{ worker: publicWorker, gateway }, api, p] = await Promise.all([
    platformOn(cluster),
    startProcess('api', { REDIS_URL: cluster.url, REDIS_COMMAND_TIMEOUT_MS: '500' }),
    realtimeProduct([{ name: 'chat', history: { ttlSeconds: 300, size: 1000 } }]),
  ])
}, 60_000)
afterAll(async () => {
  await Promise.all([publicWorker?.stop(), api?.stop(), gateway?.stop()])
  await Promise.all([cluster.stop(), replicated.stop()])
})

const channelsServedBy = (on: RedisCluster, port: number, served: boolean, count: number) => servedBy(on, p, port, served, count)
const subscriber = (gw: GatewayProcess, channels: string[]) => subscriberOf(gw, p, channels)
const pacedPublisher = (worker: Worker, channels: string[]) => publisherOf(worker, p, channels)

test('an API on the cluster with replicas tells every node of an invalidation, the replicas it never used included, each PUBLISH followed by a PING', async () => {
  // A node's CLUSTER SLOTS names a replica only once it knows (by gossip) that the replica has replicated something:
  // written to every master first, until every node lists every replica, so the API's slot map (read at its start
  // from any node) holds all six nodes.
  const writer = new Cluster([{ host: '127.0.0.1', port: replicated.ports[0]! }])
  const nodes = replicated.ports.map((port) => new Redis({ host: '127.0.0.1', port }))
  try {
    for (const deadline = Date.now() + 15_000; ; await Bun.sleep(100)) {
      await Promise.all(Array.from({ length: 30 }, (_, i) => writer.set(`warm:{${i}}`, '1')))
      const views = await Promise.all(nodes.map((node) => node.call('CLUSTER', 'SLOTS') as Promise<unknown[][]>))
      if (views.every((ranges) => ranges.every((range) => range.length >= 4))) break
      if (Date.now() > deadline) throw new Error('the replicas were never listed in every node\'s CLUSTER SLOTS')
    }
  } finally {
    writer.disconnect()
    for (const node of nodes) node.disconnect()
  }
  // Waited for on /healthz: /readyz asks every node, which would connect the replicas before the publish does.
  const apiOnReplicated = await startProcess('api', { REDIS_URL: replicated.url, REDIS_COMMAND_TIMEOUT_MS: '500' }, { waitFor: '/healthz' })
  expect(replicated.ports).toHaveLength(6) // three masters and their replicas
  const fences = await watchFences(replicated.ports.map((port) => new Redis({ host: '127.0.0.1', port, lazyConnect: true })))
  try {
    const created = await createKey(p)
    const revoked = await fetch(`${apiOnReplicated.url}/governance/api/v1/products/${p.productId}/public-keys/${created.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${p.token}` } })
    expect(revoked.status).toBe(200)
    expect((await fences.unfenced(created.id)).map((i) => replicated.ports[i])).toEqual([])
  } finally {
    fences.stop()
    await apiOnReplicated.stop()
  }
})

test('a master killed under a paced publish: its channels answer 503 and the others keep delivering; back empty, its channels restart in a new epoch and their subscribers are told `recovered: false`', async () => {
  const victim = cluster.ports[0]! // also the first seed node of REDIS_URL: the invalidation link must move on
  const [doomed, spared] = await Promise.all([channelsServedBy(cluster, victim, true, 2), channelsServedBy(cluster, victim, false, 2)])
  const channels = [...doomed, ...spared]
  const { client, subscribed, delivered: deliveredOf } = await subscriber(gateway, channels)
  const publisher = pacedPublisher(publicWorker, channels)
  const { sent, accepted } = publisher
  try {
    await publisher.untilAccepted(3)
    // A crash without persistence loses what the node acknowledged but no reader had taken yet: the kill comes once the
    // subscriber holds every publication accepted on the doomed channels, so "everything before the loss" is exact.
    let killedAt = 0
    await publisher.pause(async () => {
      for (const channel of doomed) await deliveredOf(channel, accepted(channel).length)
      killedAt = Date.now()
      await cluster.kill(victim)
    })
    await Bun.sleep(1000)
    // The invalidation link moved to a node that is up, and the nodes up still serve: ready, Redis degraded.
    let ready = await fetch(`${publicWorker.url}/readyz`)
    for (const deadline = Date.now() + 1500; ready.status !== 200 && Date.now() < deadline; await Bun.sleep(100)) ready = await fetch(`${publicWorker.url}/readyz`)
    expect([ready.status, await ready.json()]).toEqual([200, expect.objectContaining({ redis: 'degraded', invalidations: 'ok' })])
    // A key revoked meanwhile is refused at once: the API's invalidation goes out through a master that is up.
    for (let i = 0; i < 3; i++) {
      const created = await createKey(p)
      const path = `/${p.productId}/realtime/channels/${spared[0]}`
      expect((await pub(publicWorker, 'GET', path, { key: created.key })).status).toBe(200) // now cached by the worker
      const revoked = await fetch(`${api.url}/governance/api/v1/products/${p.productId}/public-keys/${created.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${p.token}` } })
      expect(revoked.status).toBe(200)
      await Bun.sleep(100)
      expect((await pub(publicWorker, 'GET', path, { key: created.key })).status).toBe(401)
    }
    await Bun.sleep(1000)
    const restartedAt = Date.now()
    await cluster.restart(victim)
    // Published again on every channel after the return, and delivered.
    for (const deadline = Date.now() + 10_000; Date.now() < deadline; await Bun.sleep(50)) {
      const back = channels.every((c) => sent.some((s) => s.channel === c && s.at > restartedAt && s.status === 200))
      if (back) break
    }
    // and their subscribers told to resync, then a moment of publishing in the new epoch.
    for (const deadline = Date.now() + 10_000; Date.now() < deadline && !doomed.every((c) => subscribed.get(c)!.length >= 2); ) await Bun.sleep(50)
    await Bun.sleep(500)
    await publisher.stop()

    expect(sent.filter((s) => s.ms > ANSWER_MS)).toEqual([])
    expect(sent.filter((s) => s.status !== 200 && s.status !== 503)).toEqual([])
    // Answered while the node was down: a publish sent just before the restart may reach it once it is back.
    const during = sent.filter((s) => s.at > killedAt + 200 && s.at + s.ms < restartedAt)
    // Only the killed node's channels were refused, with Retry-After; the others never were.
    expect(during.filter((s) => doomed.includes(s.channel)).length).toBeGreaterThan(5)
    expect(during.filter((s) => doomed.includes(s.channel)).every((s) => s.status === 503 && Number(s.retryAfter) >= 1)).toBe(true)
    expect(sent.filter((s) => spared.includes(s.channel) && s.status !== 200)).toEqual([])
    expect(during.filter((s) => spared.includes(s.channel)).length).toBeGreaterThan(5)

    for (const channel of spared) {
      // Every accepted publication delivered once, in order, on the one subscription it started with.
      const offsets = accepted(channel).map((s) => s.offset)
      expect(offsets).toEqual(offsets.map((_, i) => i + 1))
      expect(await deliveredOf(channel, offsets.length)).toEqual(accepted(channel).map((s) => s.n))
      expect(subscribed.get(channel)!.length).toBe(1)
    }
    for (const channel of doomed) {
      const before = accepted(channel).filter((s) => s.at < killedAt)
      // Nothing was in flight at the kill, and the node served nothing until it was back: all it accepted since, it
      // accepted back (a publish sent just before the restart too).
      const after = accepted(channel).filter((s) => s.at > killedAt)
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
    await publisher.stop()
    client.disconnect()
  }
}, 60_000)

test('a master with a replica killed under a paced publish: the cluster promotes the replica, and its channels go on in a new epoch, every publication delivered once and in order', async () => {
  const { worker, gateway: gw } = await platformOn(replicated)
  const [victim] = await replicated.masters(replicated.ports[0]!)
  const [doomed, spared] = await Promise.all([channelsServedBy(replicated, victim!, true, 1), channelsServedBy(replicated, victim!, false, 1)])
  const channels = [...doomed, ...spared]
  const { client, subscribed, delivered } = await subscriber(gw, channels)
  const publisher = pacedPublisher(worker, channels)
  const { sent, accepted } = publisher
  try {
    await publisher.untilAccepted(3)
    // Async replication may lose a write acknowledged just before a crash: the kill comes once the replica has every
    // acknowledged one, so what the test holds the failover to is exact.
    let killedAt = 0
    await publisher.pause(async () => {
      await replicated.synced(victim!)
      killedAt = Date.now()
      await replicated.kill(victim!)
    })
    // Accepted again on the promoted replica, the killed master never coming back.
    for (const deadline = Date.now() + 15_000; Date.now() < deadline; await Bun.sleep(50)) {
      if (sent.some((s) => s.channel === doomed[0] && s.at > killedAt + 500 && s.status === 200)) break
    }
    await Bun.sleep(500)
    await publisher.stop()
    const promoted = await replicated.ownerOf(keySlot(fanKey(shardOf(p.productId, doomed[0]!))))
    expect(promoted).not.toBe(victim)

    expect(sent.filter((s) => s.ms > ANSWER_MS)).toEqual([])
    expect(sent.filter((s) => s.status !== 200 && s.status !== 503)).toEqual([])
    expect(sent.filter((s) => spared.includes(s.channel) && s.status !== 200)).toEqual([])
    const resumed = accepted(doomed[0]!).filter((s) => s.at > killedAt)
    expect(resumed.length).toBeGreaterThan(0)
    for (const channel of channels) {
      // Offsets 1, 2, 3… with no hole, in one epoch per master: the promoted replica cannot know whether its master
      // acknowledged publications it never received, so it numbers the doomed channel's next ones in a new epoch
      // (docs/realtime-data-plane.md, "Failover"). Each publication is delivered once, in order, across the failover.
      const answers = accepted(channel)
      const runs = channel === doomed[0] ? [answers.filter((s) => s.at < killedAt), resumed] : [answers]
      expect(runs.flat()).toEqual(answers)
      for (const run of runs) {
        expect(new Set(run.map((s) => s.epoch)).size).toBe(1)
        expect(run.map((s) => s.offset)).toEqual(run.map((_, i) => i + 1))
      }
      if (runs.length === 2) expect(runs[1]![0]!.epoch).not.toBe(runs[0]![0]!.epoch)
      expect(await delivered(channel, answers.length)).toEqual(answers.map((s) => s.n))
      // A resubscription of the spared channel, if the gateway lost its reader for a moment, recovered everything.
      if (channel !== doomed[0]) expect(subscribed.get(channel)!.slice(1).every((context) => context.recovered)).toBe(true)
    }
  } finally {
    await publisher.stop()
    client.disconnect()
    await Promise.all([worker.stop(), gw.stop()])
  }
}, 60_000)

test('a replica that missed acknowledged publications is promoted: their numbers are never given again, and a subscriber that received them is told `recovered: false`', async () => {
  // A master that still has its replica (the test above killed one master, maybe the first node: ask a live one).
  // Found before any process starts, so that nothing is left running if there is none.
  let victim = 0
  let replica = 0
  let masters: number[] | undefined
  for (const port of replicated.ports) masters ??= await replicated.masters(port).catch(() => undefined)
  for (const port of masters ?? []) {
    const link = /slave0:ip=[^,]+,port=(\d+)/.exec(await replicated.cli(port, 'INFO', 'replication'))
    if (link) [victim, replica] = [port, Number(link[1])]
  }
  expect(replica).toBeGreaterThan(0)
  const [doomed] = await channelsServedBy(replicated, victim, true, 1)
  const { worker, gateway: gw } = await platformOn(replicated)
  const subscribing = subscriber(gw, [doomed!]).catch(async (error) => {
    await Promise.all([worker.stop(), gw.stop()])
    throw error
  })
  const { client, subscribed, received, delivered } = await subscribing
  const publisher = pacedPublisher(worker, [doomed!])
  const { sent, accepted } = publisher
  try {
    await publisher.untilAccepted(3)
    // The replica is made to miss writes: it is stopped (it cannot reconnect) and its link cut at the master, so what
    // the master acknowledges next reaches no replica. (Stopped alone, it would read them from its socket when resumed.)
    let cutAt = 0
    await publisher.pause(async () => {
      await replicated.synced(victim)
      replicated.silence(replica)
      await replicated.cli(victim, 'CLIENT', 'KILL', 'TYPE', 'replica')
      cutAt = Date.now()
    })
    for (const deadline = Date.now() + 10_000; accepted(doomed!).filter((s) => s.at > cutAt).length < 5 && Date.now() < deadline; ) await Bun.sleep(20)
    let killedAt = 0
    await publisher.pause(async () => {
      killedAt = Date.now()
      await replicated.kill(victim)
      replicated.resume(replica)
    })
    for (const deadline = Date.now() + 20_000; Date.now() < deadline; await Bun.sleep(50)) {
      if (accepted(doomed!).filter((s) => s.at > killedAt + 500).length >= 3) break
    }
    await publisher.stop()
    expect(await replicated.ownerOf(keySlot(fanKey(shardOf(p.productId, doomed!))))).toBe(replica)

    expect(sent.filter((s) => s.status !== 200 && s.status !== 503)).toEqual([])
    const answers = accepted(doomed!)
    const missed = answers.filter((s) => s.at > cutAt && s.at < killedAt)
    const after = answers.filter((s) => s.at > killedAt)
    expect(missed.length).toBeGreaterThanOrEqual(5)
    expect(after.length).toBeGreaterThanOrEqual(3)
    // The promoted replica never had the missed ones: it numbers from 1 in an epoch of its own.
    expect(new Set(after.map((s) => s.epoch)).size).toBe(1)
    expect(after[0]!.epoch).not.toBe(missed[0]!.epoch)
    expect(after.map((s) => s.offset)).toEqual(after.map((_, i) => i + 1))
    // No (epoch, offset) names two publications, in the answers or in what the subscriber received.
    const named = new Map<string, number>()
    for (const s of answers) {
      expect(named.get(`${s.epoch} ${s.offset}`) ?? s.n).toBe(s.n)
      named.set(`${s.epoch} ${s.offset}`, s.n)
    }
    await delivered(doomed!, answers.length)
    for (const publication of received.get(doomed!)!) {
      expect(named.get(`${publication.epoch} ${publication.offset}`)).toBe(publication.data!.n)
    }
    // The subscriber had the missed publications live; its cursor names the old epoch, so the recovery after the
    // failover could not be `recovered: true`: it was told to resync, then got the new epoch's publications in order.
    const got = received.get(doomed!)!.map((publication) => publication.data!.n)
    expect(got).toEqual(expect.arrayContaining(missed.map((s) => s.n)))
    expect(subscribed.get(doomed!)!.slice(1).some((context) => context.recovered === false)).toBe(true)
    const newEpoch = received.get(doomed!)!.filter((publication) => publication.epoch === after[0]!.epoch).map((publication) => publication.data!.n)
    expect(newEpoch).toEqual(after.slice(after.length - newEpoch.length).map((s) => s.n))
  } finally {
    await publisher.stop()
    client.disconnect()
    await Promise.all([worker.stop(), gw.stop()])
  }
}, 60_000)
