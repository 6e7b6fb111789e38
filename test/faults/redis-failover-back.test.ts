// A master failed over and back, resynced in full in between, never numbers offsets again under an epoch it numbered
// before (docs/realtime-data-plane.md, "Failover"). The replica was promoted without the master's last publications
// and published nothing on that channel; the old master, resynced in full from it (it held writes the replica lacked),
// is promoted again by the same process: what the publish function kept of its replication id must not outlive the
// resync (generation.lua), and no read may recover into the epoch meanwhile. (A generation key of the shard holding the
// node's run_id, tried first, failed here: the master got its own key back with the resync.)
// Black-box: a master and a replica of this file's own, a public worker reaching Redis through a proxy moved as a
// virtual IP would be.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { eventually, freePort, startProcess, type Worker } from '../helpers'
import { pub, realtimeProduct, type RealtimeProduct } from '../realtime/public-helpers'
import { OwnRedis } from './own-redis'
import { publishRetrying } from './publish-retrying'
import { startFaultProxy, type FaultProxy } from './proxy'

let first: OwnRedis
let second: OwnRedis
/** The second's link to the first while it replicates it. */
let replication: FaultProxy
/** Where the public worker reaches Redis: the first, the second, then the first again. */
let front: FaultProxy
let publicWorker: Worker
let product: RealtimeProduct


beforeAll(async () => {
  first = new OwnRedis(await freePort())
  await first.start()
  replication = await startFaultProxy({ host: '127.0.0.1', port: first.port })
  second = new OwnRedis(await freePort())
  await second.start()
  front = await startFaultProxy({ host: '127.0.0.1', port: first.port })
  ;[publicWorker, product] = await Promise.all([
    startProcess('public', { REDIS_URL: front.url(first.url), REDIS_COMMAND_TIMEOUT_MS: '500' }),
    realtimeProduct([{ name: 'chat', history: { ttlSeconds: 300, size: 100 } }]),
  ])
}, 60_000)

afterAll(async () => {
  await publicWorker?.stop()
  await Promise.all([front?.close(), replication?.close()])
  await Promise.all([first?.stop(), second?.stop()])
})

/** Moves the worker's Redis to `to`: new connections go there, open ones are cut. */
const moveTo = async (to: OwnRedis) => {
  front.retarget({ host: '127.0.0.1', port: to.port })
  front.cut()
  await front.restore()
}

test('failed over to a replica and back after a full resync: the next publication starts a new epoch, and no cursor into the old one recovers', async () => {
  const channel = 'chat:back'
  const publish = (n: number) => publishRetrying(publicWorker, product, channel, n)
  const history = async (query: string) => {
    for (const deadline = Date.now() + 15_000; ; await Bun.sleep(100)) {
      const result = await pub(publicWorker, 'GET', `/${product.productId}/realtime/channels/${channel}/history?${query}`, { key: product.key })
      if (result.status === 200) return result.body
      expect(result.status).toBe(503)
      if (Date.now() > deadline) throw new Error(`history ${query} refused until the deadline`)
    }
  }

  // The second then syncs in full. (A master's first replica gives it a new replication id: publication 2 may start a
  // new epoch. 3-8 are numbered in one.)
  const acked = [await publish(1)]
  expect((await second.command('REPLICAOF', '127.0.0.1', replication.port)).trim()).toBe('OK')
  await eventually(() => second.linkUp(), 10_000, 'the second syncs')
  for (let n = 2; n <= 5; n++) acked.push(await publish(n))
  await first.replicatedTo([second]) // the second holds 1-5
  replication.cut() // and nothing after
  await eventually(async () => !(await second.linkUp()), 10_000, 'the second loses its link')
  for (let n = 6; n <= 8; n++) acked.push(await publish(n))
  const { epoch, offset: at3 } = acked[2]!
  expect(acked.slice(2)).toEqual(acked.slice(2).map((a, i) => ({ n: a.n, offset: at3 + i, epoch })))

  // Failover: the second is promoted without 6-8 and takes no publication on the channel's shard.
  expect((await second.command('REPLICAOF', 'NO', 'ONE')).trim()).toBe('OK')
  await moveTo(second)
  // A cursor into what the second holds must not recover: the epoch lacks 6-8, which were acknowledged.
  expect(await history(`offset=${at3}&epoch=${epoch}`)).toMatchObject({ recovered: false })

  // The first comes back as the second's replica: it held 6-8, which the second lacks, so it resyncs in full.
  const fullSyncs = async () => Number(/sync_full:(\d+)/.exec(await second.command('INFO', 'stats'))![1])
  const fullBefore = await fullSyncs()
  expect((await first.command('REPLICAOF', '127.0.0.1', second.port)).trim()).toBe('OK')
  await eventually(() => first.linkUp(), 10_000, 'the first syncs with the second')
  expect(await fullSyncs()).toBe(fullBefore + 1)
  // And back: the first is promoted again, by the same process.
  expect((await first.command('REPLICAOF', 'NO', 'ONE')).trim()).toBe('OK')
  await moveTo(first)

  expect(await history(`offset=${at3}&epoch=${epoch}`)).toMatchObject({ recovered: false })
  const after = await publish(9)
  expect(after.epoch).not.toBe(epoch)
  expect(after.offset).toBe(1)
  const names = new Set([...acked, after].map((a) => `${a.epoch}/${a.offset}`))
  expect(names.size).toBe(acked.length + 1)
}, 60_000)
