// A Redis restarted from an older RDB file never numbers lost offsets again under the old epoch (docs/realtime-data-plane.md,
// "Failover"). The shard's generation key (generation.lua) is in the RDB file with the rest: a publish trusts it only
// when its run_id is the node's own, and a restarted process has a new one. Black-box: a Redis of this file's own, a
// public worker publishing over HTTP; three publications saved (SAVE), two more acknowledged and lost in a crash, the
// server started again from its dump. Trusting the key as it is, the next publication was numbered 4 under the epoch
// that had numbered 4 and 5 already.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { freePort, startProcess, type Worker } from '../helpers'
import { pub, realtimeProduct, type RealtimeProduct } from '../realtime/public-helpers'
import { OwnRedis } from './own-redis'

let redis: OwnRedis
let publicWorker: Worker
let product: RealtimeProduct

beforeAll(async () => {
  redis = new OwnRedis(await freePort())
  await redis.start()
  ;[publicWorker, product] = await Promise.all([
    startProcess('public', { REDIS_URL: redis.url, REDIS_COMMAND_TIMEOUT_MS: '500' }),
    realtimeProduct([{ name: 'chat', history: { ttlSeconds: 300, size: 100 } }]),
  ])
}, 60_000)

afterAll(async () => {
  await publicWorker?.stop()
  await redis?.stop()
})

test('a restart from an RDB file older than the last acknowledged publications: the next one starts a new epoch at offset 1, and history serves only it', async () => {
  const channel = 'chat:restarted'
  /** Publishes `n`; while the worker reconnects a publish may be refused 503, and is sent again. */
  const publish = async (n: number) => {
    for (const deadline = Date.now() + 15_000; ; await Bun.sleep(100)) {
      const result = await pub(publicWorker, 'POST', `/${product.productId}/realtime/messages`, { key: product.key, body: { channel, data: { n } } })
      if (result.status === 200) return { offset: result.body.offset as number, epoch: result.body.epoch as string }
      expect(result.status).toBe(503)
      if (Date.now() > deadline) throw new Error(`publish ${n} refused until the deadline`)
    }
  }
  const before = [await publish(1), await publish(2), await publish(3)]
  const epoch = before[0]!.epoch
  expect(before).toEqual([1, 2, 3].map((offset) => ({ offset, epoch })))
  expect((await redis.command('SAVE')).trim()).toBe('OK')
  expect([await publish(4), await publish(5)]).toEqual([4, 5].map((offset) => ({ offset, epoch })))
  await redis.crash()
  await redis.start(true)
  expect(await redis.size()).toBeGreaterThan(0) // the dump was loaded: offsets 1-3 and the generation key are back

  const after = await publish(6)
  expect(after.epoch).not.toBe(epoch)
  expect(after.offset).toBe(1)
  const history = await pub(publicWorker, 'GET', `/${product.productId}/realtime/channels/${channel}/history?last_n=10`, { key: product.key })
  expect(history.status).toBe(200)
  expect({ epoch: history.body.epoch, data: history.body.entries.map((e: { data: { n: number } }) => e.data.n) }).toEqual({ epoch: after.epoch, data: [6] })
}, 60_000)
