// The archiver on a real three-master Redis Cluster (REDIS_URL redis+cluster://...): every shard's fan-out stream, spread
// over the nodes, read by the consumer group through the cluster client; publications read back from the archive.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { keySlot } from '../../shared/redis/key-slot'
import { fanKey } from '../../shared/realtime/keys'
import { shardOf } from '../../shared/realtime/shards'
import { ok, startProcess, type Worker } from '../helpers'
import { archivedCount, startArchiver, until, type ArchiverProcess } from '../realtime/archive-helpers'
import { pub, realtimeProduct, type RealtimeProduct } from '../realtime/public-helpers'
import { RedisCluster } from './redis-cluster'

const cluster = new RedisCluster()
let publicWorker: Worker
let archiver: ArchiverProcess
let p: RealtimeProduct

beforeAll(async () => {
  await cluster.start()
  ;[publicWorker, p] = await Promise.all([
    startProcess('public', { REDIS_URL: cluster.url, TRUST_PROXY: '1', REALTIME_QUOTA_BURST: '100000' }),
    realtimeProduct([{ name: 'arch', history: { ttlSeconds: 300, size: 3 }, archive: { retentionDays: 7 } }]),
  ])
  archiver = startArchiver({ REDIS_URL: cluster.url })
}, 60_000)
afterAll(async () => {
  archiver?.proc.kill('SIGTERM')
  await archiver?.proc.exited
  await publicWorker?.stop()
  await cluster.stop()
})

test('publications on channels of shards on every node are archived and read back in order', async () => {
  // Channels whose shards' streams sit on different hash slots (so, with 3 masters, on more than one node).
  const channels = Array.from({ length: 12 }, () => `arch:${randomUUID()}`)
  const slots = new Set(channels.map((channel) => keySlot(fanKey(shardOf(p.productId, channel)))))
  expect(slots.size).toBeGreaterThan(3)
  for (let i = 1; i <= 5; i++) {
    for (const channel of channels) {
      ok(await pub(publicWorker, 'POST', `/${p.productId}/realtime/messages`, { key: p.key, body: { channel, data: { i } } }), 'publish')
    }
  }
  for (const channel of channels) await until(`${channel} archived`, async () => (await archivedCount(p.productId, channel)) === 5, 20_000)
  for (const channel of channels.slice(0, 3)) {
    const page = await pub(publicWorker, 'GET', `/${p.productId}/realtime/channels/${channel}/archive?order=oldest&limit=3`, { key: p.key })
    expect(page.body.entries.map((e: any) => e.data)).toEqual([{ i: 1 }, { i: 2 }, { i: 3 }])
    const rest = await pub(publicWorker, 'GET', `/${p.productId}/realtime/channels/${channel}/archive?order=oldest&limit=3&cursor=${page.body.next}`, { key: p.key })
    expect(rest.body).toMatchObject({ next: null })
    expect(rest.body.entries.map((e: any) => e.data)).toEqual([{ i: 4 }, { i: 5 }])
  }
}, 60_000)
