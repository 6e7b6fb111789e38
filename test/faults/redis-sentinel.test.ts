// Redis Sentinel as the platform's Redis (REDIS_URL `redis+sentinel://`, docs/realtime-data-plane.md, "Redis
// Sentinel"): every process finds the master through the sentinels, and through a failover finds the new one by itself.
// Black-box, with real processes: a master, two replicas and one sentinel of this file's own on loopback (Debian's
// redis-server, `--sentinel` for the sentinel), all requiring a password; a public worker and a gateway on
// `redis+sentinel://:<password>@127.0.0.1:<sentinel>/main`.
// 1. The master dies after its preferred replica stopped receiving its writes (the replica's link refused by a wrong
//    password: a proxy in the link, as in redis-failover.test.ts, would not do, since Sentinel points a replica that
//    follows another address back at the master within seconds). Sentinel promotes the lagging replica.
// 2. Sentinel fails over on request while the master is up: the old master stays up, and writable until Sentinel
//    turns it into a replica seconds after the switch. A process still on it would publish there in the old epoch, and
//    lose it all then.
// Each time publishing comes back by itself (503 meanwhile, never another status), the channel goes on in a new
// epoch, no (epoch, offset) names two publications, and the live subscriber gets every acknowledged publication in
// order or is told to resubscribe and its cursor does not recover.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { signToken } from '../../shared/realtime/tokens'
import { eventually, freePort, startProcess, type Worker } from '../helpers'
import { type Frame, startGateway, type GatewayProcess, WsClient, replied } from '../gateway/ws-helpers'
import { pub, realtimeProduct, type RealtimeProduct } from '../realtime/public-helpers'
import { OwnRedis } from './own-redis'
import { type Acked, publishRetrying } from './publish-retrying'
import { OwnSentinel } from './own-sentinel'

/** Characters a URL must percent-encode, so the password's way from REDIS_URL to AUTH is tested too. */
const PASSWORD = 'p@ss/w:rd'
const MASTER_NAME = 'main'

let master: OwnRedis
/** The replica Sentinel prefers (lower replica-priority): it misses the master's last writes, and is promoted. */
let lagging: OwnRedis
/** A replica Sentinel promotes only when the lagging one is master (failover 2). */
let spare: OwnRedis
let sentinel: OwnSentinel
let publicWorker: Worker
let gateway: GatewayProcess
let product: RealtimeProduct

const replication = (redis: OwnRedis) => redis.command('INFO', 'replication')

beforeAll(async () => {
  // From the run's port range, below the ephemeral one: an outgoing connection never takes a port between its check
  // and the server's bind (test/helpers.ts, freePort), nor the master's while it is down.
  const [masterPort, laggingPort, sparePort, sentinelPort] = [await freePort(), await freePort(), await freePort(), await freePort()]
  // A full sync starts at once (Redis waits 5 s for more replicas by default), so Sentinel's moving a replica to the
  // promoted one, and with it the switch, takes well under a second.
  const quick = ['--repl-diskless-sync-delay', '0']
  master = new OwnRedis(masterPort!, quick, PASSWORD)
  await master.start()
  const replicaOf = [...quick, '--replicaof', '127.0.0.1', String(masterPort)]
  lagging = new OwnRedis(laggingPort!, [...replicaOf, '--replica-priority', '10'], PASSWORD)
  spare = new OwnRedis(sparePort!, [...replicaOf, '--replica-priority', '100'], PASSWORD)
  await Promise.all([lagging.start(), spare.start()])
  await eventually(async () => (await lagging.linkUp()) && (await spare.linkUp()), 10_000, 'both replicas synced')
  // Started once both replicas are connected: its first look at the master lists them.
  sentinel = new OwnSentinel({ port: sentinelPort!, name: MASTER_NAME, masterPort: masterPort!, password: PASSWORD })
  await sentinel.start()
  await eventually(async () => (await sentinel.replicaCount()) === 2, 10_000, 'the sentinel knows both replicas')

  const env = {
    REDIS_URL: `redis+sentinel://:${encodeURIComponent(PASSWORD)}@127.0.0.1:${sentinelPort}/${MASTER_NAME}`,
    REDIS_COMMAND_TIMEOUT_MS: '500',
  }
  // Each kept as soon as it is up, and all awaited even when one fails: afterAll stops whatever started.
  const started = await Promise.allSettled([
    startProcess('public', { ...env, TRUST_PROXY: '1' }, { logs: true }).then((worker) => (publicWorker = worker)),
    startGateway(env).then((worker) => (gateway = worker)),
    realtimeProduct([{ name: 'chat', history: { ttlSeconds: 300, size: 100 } }]).then((made) => (product = made)),
  ])
  for (const outcome of started) if (outcome.status === 'rejected') throw outcome.reason
}, 60_000)

afterAll(async () => {
  await Promise.all([publicWorker?.stop(), gateway?.stop()])
  await sentinel?.stop()
  await Promise.all([master?.stop(), lagging?.stop(), spare?.stop()])
})

/** Publishes `n` on `channel`, sent again while the processes find the new master (publishRetrying). */
const publish = (channel: string, n: number) => publishRetrying(publicWorker, product, channel, n, 20_000, explain)

/** What a publish refused too long is told of the system: the worker's last log lines and the sentinel's events. */
async function explain(): Promise<string> {
  const worker = publicWorker.logs().slice(-30).map((line) => JSON.stringify(line)).join('\n')
  const master = await sentinel.command('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', MASTER_NAME).catch((error) => String(error))
  return `the public worker's last log lines:\n${worker}\nthe sentinel names ${master.trim().replace(/\n/g, ':')}; its events:\n${sentinel.logTail()}`
}

/**
 * A history read on the public worker, sent again while it answers 503: at Sentinel's switch every process drops its
 * connections and makes them again, even one that found the promoted replica already.
 */
async function history(channel: string, query: string) {
  for (const deadline = Date.now() + 10_000; ; await Bun.sleep(100)) {
    const result = await pub(publicWorker, 'GET', `/${product.productId}/realtime/channels/${channel}/history?${query}`, { key: product.key })
    if (result.status !== 503 || Date.now() > deadline) return result
  }
}

/** A subscription (from `cursor`, if given), asked again while the gateway answers a temporary error (the same reason). */
async function subscribe(client: WsClient, channel: string, cursor?: { offset: number; epoch: string }): Promise<Frame> {
  for (const deadline = Date.now() + 10_000; ; await Bun.sleep(100)) {
    const answer = await client.request({ type: 'subscribe', channel, ...cursor })
    if (answer.type === 'reply' || !answer.temporary || Date.now() > deadline) return replied(answer, 'subscribe')
  }
}

/** A live subscriber of `channel` on the gateway. */
async function subscriber(channel: string): Promise<WsClient> {
  const token = (await signToken({ productId: product.productId, apiKeyId: product.keyId, subject: 'watcher', channels: [{ name: channel, ops: ['subscribe'] }] })).token
  const client = await WsClient.open(gateway.wsUrl)
  replied(await client.request({ type: 'connect', token }), 'connect')
  await subscribe(client, channel)
  return client
}

const position = (p: { epoch: string; offset: number }) => `${p.epoch}/${p.offset}`

/** No (epoch, offset) names two of the acknowledged publications. */
function expectDistinctPositions(acked: Acked[]): void {
  expect(new Set(acked.map(position)).size).toBe(acked.length)
}

/**
 * What a live subscriber makes of `acked` (acknowledged publications, in publish order): it receives every one in order
 * ('received'), or it is told to resubscribe and, subscribing again from the last publication it received, is answered
 * `recovered: false` ('resynced'). Whatever it receives names its publication truly ((epoch, offset) and data agree
 * with the acknowledgement), in order, with no gap; publications it was sent but nobody acknowledged (a publish that
 * timed out, then went through) may come between.
 */
async function accountedFor(client: WsClient, channel: string, acked: Acked[]): Promise<'received' | 'resynced'> {
  const index = new Map(acked.map((a, i) => [position(a), i]))
  let next = 0 // the acknowledged publication expected next
  let cursor: { offset: number; epoch: string } | undefined
  for (const deadline = Date.now() + 10_000; next < acked.length; ) {
    const frame = await client.next((f) => f.channel === channel && (f.type === 'publication' || f.type === 'unsubscribe'), Math.max(1, deadline - Date.now()))
      .catch(() => Promise.reject(new Error(`the subscriber stopped before publication ${acked[next]!.n}, untold`)))
    if (frame.type === 'unsubscribe') {
      expect(frame).toMatchObject({ resubscribe: true })
      const reply = await subscribe(client, channel, cursor)
      if (reply.recovered === false) return 'resynced'
      continue // recovered: what it missed follows, as publications
    }
    cursor = { offset: frame.offset, epoch: frame.epoch }
    const at = index.get(position(cursor))
    if (at === undefined) continue
    expect({ at, n: frame.data.n }).toEqual({ at: next, n: acked[next]!.n })
    next++
  }
  return 'received'
}

test('Sentinel promotes a replica that missed acknowledged publications: the processes find it by themselves, the next publications start a new epoch, and a cursor into the lost ones is told `recovered: false`', async () => {
  const channel = 'chat:sentinel-lossy'
  const client = await subscriber(channel)
  const acked: Acked[] = []
  for (let n = 1; n <= 5; n++) acked.push(await publish(channel, n))
  await master.replicatedTo([lagging, spare]) // both replicas hold 1-5
  // The lagging replica's link is refused from now on: it keeps its master's address (so Sentinel leaves it be) and
  // misses everything after 5. The spare reconnects and keeps up.
  await lagging.command('CONFIG', 'SET', 'masterauth', 'not-the-password')
  await master.command('CLIENT', 'KILL', 'TYPE', 'replica')
  await eventually(async () => !(await lagging.linkUp()), 5000, 'the lagging replica unlinked')
  for (let n = 6; n <= 10; n++) acked.push(await publish(channel, n))
  const epoch = acked[0]!.epoch
  expect(acked).toEqual(acked.map((_, i) => ({ n: i + 1, offset: i + 1, epoch })))

  await master.stop()
  const after: Acked[] = []
  for (let n = 11; n <= 17; n++) after.push(await publish(channel, n))
  // It was Sentinel's failover that the processes followed.
  await eventually(async () => (await sentinel.masterPort()) === lagging.port, 10_000, 'Sentinel switched to the lagging replica')

  // A new epoch, numbered from 1: no (epoch, offset) names two publications.
  const next = after[0]!.epoch
  expect(next).not.toBe(epoch)
  expect(after).toEqual(after.map((_, i) => ({ n: 11 + i, offset: 1 + i, epoch: next })))
  expectDistinctPositions([...acked, ...after])
  // Recovering from 10 of the old epoch cannot be done, and says so; the history holds the new epoch, in order.
  const recovery = await history(channel, `offset=10&epoch=${epoch}`)
  expect(recovery.body).toMatchObject({ recovered: false, epoch: next, offset: 7 })
  const window = await history(channel, 'last_n=20')
  expect((window.body.entries as { offset: number; data: { n: number } }[]).map((e) => [e.offset, e.data.n])).toEqual(after.map((a) => [a.offset, a.n]))
  // The live subscriber had 6-10 from the master; its cursor cannot be recovered on the promoted replica.
  expect(await accountedFor(client, channel, [...acked, ...after])).toBe('resynced')
  client.close()
}, 60_000)

test('Sentinel fails over from a master that is still up: at the switch every process leaves it for the promoted replica, whose publications start a new epoch', async () => {
  const channel = 'chat:sentinel-planned'
  // Failover 1 made the spare a replica of the new master (the lagging one); Sentinel needs it healthy to promote it.
  await eventually(async () => (await replication(spare)).includes(`master_port:${lagging.port}`) && (await spare.linkUp()), 15_000, 'the spare following the new master')
  const client = await subscriber(channel)
  const acked: Acked[] = []
  for (let n = 1; n <= 5; n++) acked.push(await publish(channel, n))
  await eventually(async () => {
    const answer = (await sentinel.command('SENTINEL', 'FAILOVER', MASTER_NAME)).trim()
    if (answer === 'OK') return true
    // Not yet: Sentinel has not judged the spare a good replica yet, or is still finishing failover 1.
    if (/^(NOGOODSLAVE|INPROG) /.test(answer)) return false
    throw new Error(`SENTINEL FAILOVER: ${answer}`)
  }, 15_000, 'a failover started')
  // Publishing on through the switch. The old master stays up and writable until Sentinel turns it into a replica,
  // seconds after the switch: a process that stayed on it would go on publishing there, in the old epoch, and lose it
  // all then. (What reaches it between the promotion and the switch is lost all the same, and the new epoch says so.)
  let n = 6
  for (const deadline = Date.now() + 15_000; (await sentinel.masterPort()) !== spare.port; n++) {
    if (Date.now() > deadline) throw new Error('Sentinel did not switch to the spare')
    acked.push(await publish(channel, n))
    await Bun.sleep(20)
  }
  const afterSwitch: Acked[] = []
  for (const end = n + 5; n < end; n++) afterSwitch.push(await publish(channel, n))
  acked.push(...afterSwitch)

  // Every publication acknowledged after the switch is the promoted spare's: a new epoch, numbered on from its own
  // history, and read back from it.
  expect(afterSwitch.every((a) => a.epoch === afterSwitch[0]!.epoch)).toBe(true)
  expect(afterSwitch[0]!.epoch).not.toBe(acked[0]!.epoch)
  expectDistinctPositions(acked)
  const window = await history(channel, 'last_n=100')
  expect(window.body.epoch).toBe(afterSwitch[0]!.epoch)
  const entries = (window.body.entries as { offset: number; data: { n: number } }[]).map((e) => [e.offset, e.data.n])
  expect(entries.slice(-afterSwitch.length)).toEqual(afterSwitch.map((a) => [a.offset, a.n]))
  // The live subscriber either has them all in order or knows to resync: the gateway's readers moved too.
  await accountedFor(client, channel, acked)
  client.close()
}, 60_000)
