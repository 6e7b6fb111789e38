// A Redis failover that loses acknowledged publications is never silent (docs/realtime-data-plane.md, "Failover").
// Black-box, with real processes: a master and a replica of this file's own on loopback, the replica's link to the
// master through a fault proxy (cut to make it miss writes on purpose), and a public worker and a gateway reaching
// Redis through another proxy that is moved to the replica when it is promoted, as a virtual IP would be. Five
// publications reach both, five more only the master; the master dies, the replica is promoted, publishing goes on.
// Without generations the promoted replica numbered the next publications 6, 7... again under the same epoch, and a
// subscriber recovering from offset 10 was told `recovered: true` with the wrong publications.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { signToken } from '../../shared/realtime/tokens'
import { freePort, startProcess, type Worker } from '../helpers'
import { startGateway, type GatewayProcess, WsClient, replied } from '../gateway/ws-helpers'
import { pub, realtimeProduct, type RealtimeProduct } from '../realtime/public-helpers'
import { OwnRedis } from './own-redis'
import { type Acked, publishRetrying } from './publish-retrying'
import { startFaultProxy, type FaultProxy } from './proxy'

let master: OwnRedis
let replica: OwnRedis
/** The replica's link to the master. */
let replication: FaultProxy
/** Where the platform's processes reach Redis: the master, then the promoted replica. */
let front: FaultProxy
let publicWorker: Worker
let gateway: GatewayProcess
let product: RealtimeProduct


beforeAll(async () => {
  master = new OwnRedis(await freePort())
  await master.start()
  replication = await startFaultProxy({ host: '127.0.0.1', port: master.port })
  replica = new OwnRedis(await freePort(), ['--replicaof', '127.0.0.1', String(replication.port)])
  await replica.start()
  for (const deadline = Date.now() + 10_000; !(await replica.linkUp()); await Bun.sleep(50)) {
    if (Date.now() > deadline) throw new Error('the replica did not sync with its master')
  }
  front = await startFaultProxy({ host: '127.0.0.1', port: master.port })
  const env = { REDIS_URL: front.url(master.url), REDIS_COMMAND_TIMEOUT_MS: '500' }
  ;[publicWorker, gateway, product] = await Promise.all([
    startProcess('public', { ...env, TRUST_PROXY: '1' }),
    startGateway(env),
    realtimeProduct([{ name: 'chat', history: { ttlSeconds: 300, size: 100 } }]),
  ])
}, 60_000)

afterAll(async () => {
  await Promise.all([publicWorker?.stop(), gateway?.stop()])
  await Promise.all([front?.close(), replication?.close()])
  await Promise.all([master?.stop(), replica?.stop()])
})


test('a replica promoted without the last acknowledged publications: the next ones start a new epoch, a cursor into the lost ones is told `recovered: false`, and no (epoch, offset) names two publications', async () => {
  const channel = 'chat:failover'
  /** Publishes `n`; while the processes find the promoted replica a publish may be refused 503, and is sent again. */
  const publish = (n: number) => publishRetrying(publicWorker, product, channel, n)
  const token = (await signToken({ productId: product.productId, apiKeyId: product.keyId, subject: 'watcher', channels: [{ name: channel, ops: ['subscribe'] }] })).token
  const client = await WsClient.open(gateway.wsUrl)
  replied(await client.request({ type: 'connect', token }), 'connect')
  replied(await client.request({ type: 'subscribe', channel }), 'subscribe')

  const acked: Acked[] = []
  for (let n = 1; n <= 5; n++) acked.push(await publish(n))
  await master.replicatedTo([replica]) // the replica holds 1-5
  replication.cut() // and nothing after
  for (const deadline = Date.now() + 5000; await replica.linkUp(); await Bun.sleep(20)) {
    if (Date.now() > deadline) throw new Error('the replica kept its link')
  }
  for (let n = 6; n <= 10; n++) acked.push(await publish(n))
  const epoch = acked[0]!.epoch
  expect(acked).toEqual(acked.map((_, i) => ({ n: i + 1, offset: i + 1, epoch })))
  // The subscriber has all ten, live.
  const live: number[] = []
  for (const deadline = Date.now() + 5000; live.length < 10 && Date.now() < deadline; ) {
    await client.next((f) => f.type === 'publication', 1000).then((f) => live.push(f.offset), () => {})
  }
  expect(live).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])

  // The failover: the master dies with 6-10, the replica is promoted, and the address moves to it.
  await master.stop()
  expect((await replica.command('REPLICAOF', 'NO', 'ONE')).trim()).toBe('OK')
  front.retarget({ host: '127.0.0.1', port: replica.port })
  front.cut()
  await front.restore()
  const after: Acked[] = []
  for (let n = 11; n <= 17; n++) after.push(await publish(n))

  // A new epoch, numbered from 1: no (epoch, offset) names two publications.
  const next = after[0]!.epoch
  expect(next).not.toBe(epoch)
  expect(after).toEqual(after.map((_, i) => ({ n: 11 + i, offset: 1 + i, epoch: next })))
  const names = new Set([...acked, ...after].map((a) => `${a.epoch}/${a.offset}`))
  expect(names.size).toBe(acked.length + after.length)

  // Recovering from where the subscriber stood (10, epoch) cannot be done, and says so.
  const recovery = await pub(publicWorker, 'GET', `/${product.productId}/realtime/channels/${channel}/history?offset=10&epoch=${epoch}`, { key: product.key })
  expect(recovery.status).toBe(200)
  expect(recovery.body).toMatchObject({ recovered: false, epoch: next, offset: 7 })
  // An older cursor, into what the replica does hold, neither: its epoch may lack what followed.
  const older = await pub(publicWorker, 'GET', `/${product.productId}/realtime/channels/${channel}/history?offset=3&epoch=${epoch}`, { key: product.key })
  expect(older.body).toMatchObject({ recovered: false, epoch: next })
  // The history now holds the new epoch's publications, in order.
  const history = await pub(publicWorker, 'GET', `/${product.productId}/realtime/channels/${channel}/history?last_n=20`, { key: product.key })
  expect(history.body).toMatchObject({ epoch: next, offset: 7 })
  expect((history.body.entries as { offset: number; data: { n: number } }[]).map((e) => [e.offset, e.data.n])).toEqual(after.map((a) => [a.offset, a.n]))

  // The live subscriber was told to resubscribe (the gateway saw the shard's numbering go back), and its cursor does
  // not recover: it resyncs, having missed nothing in silence.
  const ended = await client.next((f) => f.type === 'unsubscribe', 10_000)
  expect(ended).toMatchObject({ channel, resubscribe: true })
  const resubscribed = await client.request({ type: 'subscribe', channel, offset: 10, epoch })
  expect(resubscribed).toMatchObject({ type: 'reply', recovered: false, epoch: next, offset: 7 })
  client.close()
}, 60_000)
