// The Realtime archive: write throughput (fan-out stream entries into PostgreSQL through the archiver's consumer group)
// against a bare `INSERT ... SELECT unnest` of the same rows, and a range read's latency (readArchive, a page of 100)
// against the bare SQL range query and Redis' XREVRANGE of the same channel's history. Figures: docs/performance.md.
// Usage: bun run scripts/bench/archive.ts [--entries 20000] [--channels 100] [--hot 10000] [--payload 100] [--reads 300]
// Needs PostgreSQL and Redis (DATABASE_URL, REDIS_URL; the schema is migrated here) and no archiver running against
// them (it would take the entries first). It makes a product named `Archive bench` and deletes it at the end.
import { parseArgs } from 'node:util'
import { randomUUID } from 'node:crypto'
import { call, newProduct } from '../../test/helpers'
import { startArchiver } from '../../services/archiver/archiver'
import { listenForInvalidations } from '../../shared/cache/invalidation-listener'
import { config } from '../../shared/config'
import { sql } from '../../shared/db/client'
import { readArchive } from '../../shared/realtime/archive-read'
import { publish } from '../../shared/realtime/broker'
import { channelKeys } from '../../shared/realtime/keys'
import { policyCache } from '../../shared/realtime/policies'
import { closeRedis, redis } from '../../shared/redis/client'

const { values: args } = parseArgs({
  options: {
    entries: { type: 'string', default: '20000' },
    channels: { type: 'string', default: '100' },
    hot: { type: 'string', default: '10000' },
    payload: { type: 'string', default: '100' },
    reads: { type: 'string', default: '300' },
  },
})
const ENTRIES = Number(args.entries)
const CHANNELS = Number(args.channels)
const HOT = Math.min(Number(args.hot), ENTRIES, 10_000) // the hot channel's history holds them all (history size ≤ 10 000)
const PADDING = 'x'.repeat(Math.max(0, Number(args.payload) - 20))
const READS = Number(args.reads)
const PAGE = 100

const product = await newProduct('Archive bench')
const owner = { token: product.token, productId: product.productId }
const created = await call('POST', '/realtime/namespaces', { ...owner, body: { name: 'bench', history: { ttlSeconds: 3600, size: 10_000 }, archive: { retentionDays: 30 } } })
if (created.status !== 200) throw new Error(`namespace: ${JSON.stringify(created.body)}`)
const policy = { historyTtlSeconds: 3600, historySize: 10_000 }
const hot = `bench:hot-${randomUUID()}`
const cold = Array.from({ length: CHANNELS }, (_, i) => `bench:c${i}-${randomUUID()}`)
const listener = listenForInvalidations({ caches: [policyCache], onMessage: (m) => m.kind === 'namespaces' && policyCache.forget(m.productId) })
await Bun.sleep(200) // caching on, as in the archiver process

const seconds = (ms: number) => (ms / 1000).toFixed(2)
const rate = (n: number, ms: number) => Math.round(n / (ms / 1000)).toLocaleString('en')
const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
const rowsOf = async (channels: string[]) =>
  Number((await sql`select count(*)::int as n from realtime_archive where product_id = ${product.productId} and channel in ${sql(channels)}`)[0]!.n)

try {
  // ---- the backlog: HOT entries on one channel, the rest spread over CHANNELS channels (so over every shard)
  let t0 = performance.now()
  const IN_FLIGHT = 200
  for (let i = 0; i < ENTRIES; i += IN_FLIGHT) {
    await Promise.all(Array.from({ length: Math.min(IN_FLIGHT, ENTRIES - i) }, (_, j) => {
      const n = i + j
      const channel = n < HOT ? hot : cold[n % CHANNELS]!
      return publish({ productId: product.productId, channel, policy, data: JSON.stringify({ n, pad: PADDING }) })
    }))
  }
  const publishMs = performance.now() - t0
  const fanoutSeconds = config.realtime.fanoutRetentionMs / 1000
  if (publishMs / 1000 > fanoutSeconds / 2) console.warn(`publishing took ${seconds(publishMs)} s of a ${fanoutSeconds} s fan-out window: use fewer --entries`)

  // ---- write: the archiver drains the backlog
  t0 = performance.now()
  const archiver = startArchiver({ ...config.archiver, batch: 1000, idleMs: 5 })
  const all = [hot, ...cold]
  while ((await rowsOf(all)) < ENTRIES) {
    if (performance.now() - t0 > 120_000) throw new Error(`archiver still behind after 120 s: ${await rowsOf(all)} of ${ENTRIES}`)
    await Bun.sleep(20)
  }
  const archiveMs = performance.now() - t0
  await archiver.stop()

  // ---- the peer: the same rows, built in memory, inserted bare (no stream, no policy, no acknowledgement)
  const rows = await sql<{ channel: string; epoch: string; offset: string; id: string; published_at: Date; data: string }[]>`
    select channel, epoch, "offset", id, published_at, data from realtime_archive where product_id = ${product.productId} and channel in ${sql(all)}`
  t0 = performance.now()
  for (let i = 0; i < rows.length; i += 1000) {
    const batch = rows.slice(i, i + 1000)
    await sql`
      insert into realtime_archive (product_id, channel, epoch, "offset", id, published_at, data, retention_days)
      select ${product.productId}::uuid, c, e, o, i, p, d, 30 from unnest(
        ${batch.map((r) => 'peer' + r.channel)}::text[], ${batch.map((r) => r.epoch)}::text[], ${batch.map((r) => Number(r.offset))}::bigint[],
        ${batch.map((r) => r.id)}::text[], ${batch.map((r) => r.published_at.toISOString())}::timestamptz[], ${batch.map((r) => r.data)}::text[]
      ) as b (c, e, o, i, p, d)`
  }
  const peerMs = performance.now() - t0

  console.log(`\nArchive write: ${ENTRIES.toLocaleString('en')} entries (${HOT.toLocaleString('en')} on one channel, the rest over ${CHANNELS} channels), ~${Number(args.payload)} B payloads`)
  console.log('| path | seconds | entries/s |')
  console.log('| --- | --- | --- |')
  console.log(`| (setup) publish() into history + fan-out | ${seconds(publishMs)} | ${rate(ENTRIES, publishMs)} |`)
  console.log(`| archiver: XREADGROUP + policy + INSERT ... ON CONFLICT DO NOTHING + XACK, batches of 1000 | ${seconds(archiveMs)} | ${rate(ENTRIES, archiveMs)} |`)
  console.log(`| peer: bare INSERT ... SELECT unnest of the same rows, batches of 1000 | ${seconds(peerMs)} | ${rate(ENTRIES, peerMs)} |`)

  // ---- read: a page of 100 of the hot channel, newest first, at a random point of its range
  const [bounds] = await sql<{ lo: Date; hi: Date }[]>`
    select min(published_at) as lo, max(published_at) as hi from realtime_archive where product_id = ${product.productId} and channel = ${hot}`
  const span = bounds!.hi.getTime() - bounds!.lo.getTime() + 1
  const points = Array.from({ length: READS }, () => new Date(bounds!.lo.getTime() + Math.floor(Math.random() * span)))
  const offsets = Array.from({ length: READS }, () => 1 + Math.floor(Math.random() * HOT))
  const hist = channelKeys(product.productId, hot).hist
  const sides: [string, (i: number) => Promise<number>][] = [
    ['readArchive (the route\'s domain function): a page of 100 newest first before `to`', async (i) =>
      (await readArchive(product.productId, hot, 30, { to: points[i]!.toISOString(), limit: PAGE })).entries.length],
    ['peer: bare SQL range query, same index, same page', async (i) => (await sql`
      select epoch, "offset", id, published_at, data from realtime_archive
      where product_id = ${product.productId} and channel = ${hot} and published_at < ${points[i]!}
      order by published_at desc, epoch desc, "offset" desc limit ${PAGE}`).length],
    ['peer: Redis XREVRANGE of the channel\'s history, same page size', async (i) =>
      ((await redis().xrevrange(hist, `${offsets[i]}-0`, '-', 'COUNT', PAGE)) as unknown[]).length],
  ]
  if (process.env.BENCH_EXPLAIN) {
    const plan = await sql.unsafe(`explain (analyze, buffers) select epoch, "offset", id, published_at, data from realtime_archive
      where product_id = '${product.productId}' and channel = '${hot}' and published_at < '${points[0]!.toISOString()}'
      order by published_at desc, epoch desc, "offset" desc limit ${PAGE}`)
    console.log(plan.map((row) => Object.values(row)[0]).join('\n'))
  }
  console.log(`\nArchive range read: ${READS} pages of ${PAGE} from a channel of ${HOT.toLocaleString('en')} entries, one at a time (ms)`)
  console.log('| path | p50 | p99 | mean |')
  console.log('| --- | --- | --- | --- |')
  for (const [name, read] of sides) {
    for (let i = 0; i < 20; i++) await read(i) // warm
    const times: number[] = []
    for (let i = 0; i < READS; i++) {
      const start = performance.now()
      await read(i)
      times.push(performance.now() - start)
    }
    const sorted = [...times].sort((a, b) => a - b)
    const mean = times.reduce((a, b) => a + b, 0) / times.length
    console.log(`| ${name} | ${quantile(sorted, 0.5).toFixed(2)} | ${quantile(sorted, 0.99).toFixed(2)} | ${mean.toFixed(2)} |`)
  }
} finally {
  await sql`delete from products where id = ${product.productId}` // its namespace and archive rows go with it
  for (const channel of [hot, ...cold]) await redis().del(channelKeys(product.productId, channel).hist, channelKeys(product.productId, channel).meta)
  await listener.stop()
  await sql.end({ timeout: 5 })
  await closeRedis()
}
