// A Redis restarted from an older RDB file, or a writable replica promoted, never numbers lost offsets again under the
// old epoch (docs/realtime-data-plane.md, "Failover"). The publish function keeps the replication id it read for a
// second (generation.lua): a restart must load it anew, and a replica must never keep one. Black-box: a Redis of this
// file's own and a public worker publishing over HTTP; three publications saved (SAVE), two more acknowledged and lost
// in a crash, the server started again from its dump; then a writable replica of it that took a publish, promoted.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { eventually, freePort, startProcess, type Worker } from '../helpers'
import { pub, realtimeProduct, type RealtimeProduct } from '../realtime/public-helpers'
import { OwnRedis } from './own-redis'
import { publishRetrying } from './publish-retrying'

let redis: OwnRedis
let publicWorker: Worker
let product: RealtimeProduct
/** A replica of `redis` that takes writes (replica-read-only no), and a worker publishing on it. */
let replica: OwnRedis
let replicaWorker: Worker

beforeAll(async () => {
  redis = new OwnRedis(await freePort())
  await redis.start()
  replica = new OwnRedis(await freePort(), ['--replicaof', '127.0.0.1', String(redis.port), '--replica-read-only', 'no'])
  await replica.start()
  ;[publicWorker, replicaWorker, product] = await Promise.all([
    startProcess('public', { REDIS_URL: redis.url, REDIS_COMMAND_TIMEOUT_MS: '500' }),
    startProcess('public', { REDIS_URL: replica.url, REDIS_COMMAND_TIMEOUT_MS: '500' }),
    realtimeProduct([{ name: 'chat', history: { ttlSeconds: 300, size: 100 } }]),
  ])
}, 60_000)

afterAll(async () => {
  await Promise.all([publicWorker?.stop(), replicaWorker?.stop()])
  await Promise.all([redis?.stop(), replica?.stop()])
})

/** Publishes `n` to `channel` through `worker`, sent again while the worker reconnects (publishRetrying). */
const publishVia = (worker: Worker, channel: string, n: number) => publishRetrying(worker, product, channel, n)

test('a restart from an RDB file older than the last acknowledged publications: the next one starts a new epoch at offset 1, and history serves only it', async () => {
  const channel = 'chat:restarted'
  const publish = (n: number) => publishVia(publicWorker, channel, n)
  const before = [await publish(1), await publish(2), await publish(3)]
  const epoch = before[0]!.epoch
  expect(before).toEqual([1, 2, 3].map((offset) => ({ n: offset, offset, epoch })))
  expect((await redis.command('SAVE')).trim()).toBe('OK')
  expect([await publish(4), await publish(5)]).toEqual([4, 5].map((offset) => ({ n: offset, offset, epoch })))
  await redis.crash()
  await redis.start(true)
  expect(await redis.size()).toBeGreaterThan(0) // the dump was loaded: offsets 1-3 are back

  const after = await publish(6)
  expect(after.epoch).not.toBe(epoch)
  expect(after.offset).toBe(1)
  const history = await pub(publicWorker, 'GET', `/${product.productId}/realtime/channels/${channel}/history?last_n=10`, { key: product.key })
  expect(history.status).toBe(200)
  expect({ epoch: history.body.epoch, data: history.body.entries.map((e: { data: { n: number } }) => e.data.n) }).toEqual({ epoch: after.epoch, data: [6] })
}, 60_000)

test('a replica that took a publish while it was one (replica-read-only no), then promoted: its next publish starts a new epoch', async () => {
  const channel = 'chat:promoted'
  // The master restarted in the test before: the replica's link comes back (and resyncs) by itself.
  await eventually(() => replica.linkUp(), 20_000, 'the replica syncing with its master')
  const first = await publishVia(publicWorker, channel, 1)
  await redis.replicatedTo([replica])
  // On the replica (its master's replication id): a write of its own, as a writable replica takes one.
  const onReplica = await publishVia(replicaWorker, channel, 2)
  expect(onReplica).toEqual({ n: 2, offset: 2, epoch: first.epoch })
  expect((await replica.command('REPLICAOF', 'NO', 'ONE')).trim()).toBe('OK')
  const promoted = await publishVia(replicaWorker, channel, 3)
  expect(promoted.epoch).not.toBe(first.epoch)
  expect(promoted.offset).toBe(1)
}, 60_000)
