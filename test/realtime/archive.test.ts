// The Realtime archive against real processes: a public worker, the archiver (killed and restarted), Redis and
// PostgreSQL. Publications read back page by page exactly once and in order, by time range, after leaving Redis'
// history; retention; a namespace without archive; validation; another product's channel.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { config } from '../../shared/config'
import { sql, unboundedSql } from '../../shared/db/client'
import { archiveEntries, ensureMonthPartition, monthPartition, sweepArchive } from '../../shared/realtime/archive'
import { archivedRunRows, readArchive } from '../../shared/realtime/archive-read'
import { readHistoryWithArchive } from '../../shared/realtime/archive-recovery'
import { publish } from '../../shared/realtime/broker'
import { channelKeys, fanArchivedKey, fanDeadKey, fanKey } from '../../shared/realtime/keys'
import { ShardReader, type ArchiverCounts } from '../../services/archiver/shard-reader'
import { shardOf } from '../../shared/realtime/shards'
import { redis } from '../../shared/redis/client'
import { call, expectError, failingFields, ok, startProcess, type Worker } from '../helpers'
import { signToken } from '../../shared/realtime/tokens'
import { startGateway, WsClient, type GatewayProcess } from '../gateway/ws-helpers'
import { archivedCount, startArchiver, until, type ArchiverProcess } from './archive-helpers'
import { manage, pub, realtimeProduct, type RealtimeProduct } from './public-helpers'

let worker: Worker
let gateway: GatewayProcess
let archiver: ArchiverProcess
let p: RealtimeProduct
let other: RealtimeProduct
/** The `arch` namespace: Redis history keeps only the newest 5 entries; the archive keeps them 30 days. */
const HISTORY = { ttlSeconds: 300, size: 5 }
const brokerPolicy = { historyTtlSeconds: HISTORY.ttlSeconds, historySize: HISTORY.size }

beforeAll(async () => {
  ;[worker, gateway, p, other] = await Promise.all([
    startProcess('public', { TRUST_PROXY: '1', REALTIME_QUOTA_BURST: '100000' }),
    startGateway(),
    realtimeProduct([
      { name: 'arch', history: HISTORY, archive: { retentionDays: 30 } },
      { name: 'plain', history: HISTORY },
      // Trimmed in batches (every 16/8 + 1 offsets): Redis may hold a few more entries than it serves.
      { name: 'wide', history: { ttlSeconds: 300, size: 16 }, archive: { retentionDays: 30 } },
    ]),
    realtimeProduct([{ name: 'arch', history: HISTORY, archive: { retentionDays: 30 } }]),
  ])
  archiver = startArchiver()
})
afterAll(async () => {
  archiver.proc.kill('SIGTERM')
  await archiver.proc.exited
  await Promise.all([worker.stop(), gateway.stop()])
})

const base = (product = p) => `/${product.productId}/realtime`
const get = (path: string, product = p, key = product.key) => pub(worker, 'GET', base(product) + path, { key })
const publishVia = async (channel: string, data: unknown) =>
  ok(await pub(worker, 'POST', `${base()}/messages`, { key: p.key, body: { channel, data } }), `publish to ${channel}`).body

/** Every page of `channel`'s archive in `order`, `limit` per page. */
async function readAll(channel: string, order: 'newest' | 'oldest', limit: number, range = '') {
  const pages: any[][] = []
  let cursor: string | null = null
  do {
    const page = await get(`/channels/${channel}/archive?order=${order}&limit=${limit}${range}${cursor ? `&cursor=${cursor}` : ''}`)
    expect(page.status).toBe(200)
    pages.push(page.body.entries)
    cursor = page.body.next
    if (pages.length > 100) throw new Error('no end of pages')
  } while (cursor)
  return pages
}

describe('GET /channels/{channel}/archive', () => {
  test('publications that left Redis history read back page by page, exactly once and in order, both orders', async () => {
    const channel = `arch:${randomUUID()}`
    const published = []
    for (let i = 1; i <= 23; i++) published.push(await publishVia(channel, { i }))
    await until('23 archived', async () => (await archivedCount(p.productId, channel)) === 23)

    // Redis keeps the newest 5; the archive keeps all 23.
    const history = await get(`/channels/${channel}/history?last_n=100`)
    expect(history.body.entries.map((e: any) => e.offset)).toEqual([19, 20, 21, 22, 23])

    const newest = await readAll(channel, 'newest', 5)
    expect(newest.map((page) => page.length)).toEqual([5, 5, 5, 5, 3])
    expect(newest.flat().map((e) => e.offset)).toEqual(Array.from({ length: 23 }, (_, i) => 23 - i))
    const oldest = await readAll(channel, 'oldest', 10)
    expect(oldest.map((page) => page.length)).toEqual([10, 10, 3])
    expect(oldest.flat().map((e) => e.data)).toEqual(Array.from({ length: 23 }, (_, i) => ({ i: i + 1 })))
    const first = oldest[0]![0]
    expect(first).toEqual({ id: published[0].id, offset: 1, epoch: published[0].epoch, publishedAt: expect.any(String), data: { i: 1 } })
    expect(Object.keys(first).sort()).toEqual(['data', 'epoch', 'id', 'offset', 'publishedAt'])
  })

  test('a time range: from inclusive, to exclusive, paged in either order', async () => {
    const channel = `arch:${randomUUID()}`
    for (let i = 1; i <= 12; i++) {
      await publishVia(channel, { i })
      await Bun.sleep(3) // distinct publish times
    }
    await until('12 archived', async () => (await archivedCount(p.productId, channel)) === 12)
    const all = (await readAll(channel, 'oldest', 1000)).flat()
    const from = all[3].publishedAt
    const to = all[9].publishedAt
    const range = `&from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`
    const inRange = all.filter((e) => e.publishedAt >= from && e.publishedAt < to).map((e) => e.offset)
    expect(inRange.length).toBeGreaterThanOrEqual(5)
    expect((await readAll(channel, 'oldest', 2, range)).flat().map((e) => e.offset)).toEqual(inRange)
    expect((await readAll(channel, 'newest', 4, range)).flat().map((e) => e.offset)).toEqual([...inRange].reverse())
    // An offset other than Z names the same instant.
    const shifted = new Date(new Date(from).getTime()).toISOString().replace('Z', '+00:00')
    const again = await get(`/channels/${channel}/archive?order=oldest&limit=1&from=${encodeURIComponent(shifted)}`)
    expect(again.body.entries[0].offset).toBe(inRange[0])
  })

  test('a payload stored by reference reads back with ref, as history answers it', async () => {
    const channel = `arch:${randomUUID()}`
    const ref = { bucket_key: `products/${p.productId}/x`, size: 300_000, content_type: 'application/json' }
    const result = await publish({ productId: p.productId, channel, policy: brokerPolicy, ref })
    await until('archived', async () => (await archivedCount(p.productId, channel)) === 1)
    const page = await get(`/channels/${channel}/archive`)
    expect(page.body).toEqual({ channel, next: null, entries: [{ id: result.id, offset: 1, epoch: result.epoch, publishedAt: expect.any(String), ref }] })
  })

  test('a namespace without archive archives nothing and answers an empty page', async () => {
    const plain = `plain:${randomUUID()}`
    const marker = `arch:${randomUUID()}`
    await publishVia(plain, { a: 1 })
    await publishVia(marker, { b: 1 })
    await until('marker archived', async () => (await archivedCount(p.productId, marker)) === 1)
    // Every shard is read in each round: one more round after the marker has passed the plain publish as well.
    await Bun.sleep(300)
    expect(await archivedCount(p.productId, plain)).toBe(0)
    const page = await get(`/channels/${plain}/archive`)
    expect(page.status).toBe(200)
    expect(page.body).toEqual({ channel: plain, entries: [], next: null })
  })

  test("another product's channel is never visible", async () => {
    const channel = `arch:${randomUUID()}`
    await publishVia(channel, { secret: true })
    await until('archived', async () => (await archivedCount(p.productId, channel)) === 1)
    // The other product has the same namespace and its own archive: the same channel name is its own, empty.
    const theirs = await get(`/channels/${channel}/archive`, other)
    expect(theirs.body).toEqual({ channel, entries: [], next: null })
    // The other product's key on this product's path is refused before anything is read.
    const crossed = await pub(worker, 'GET', `${base()}/channels/${channel}/archive`, { key: other.key })
    expect([401, 403, 404]).toContain(crossed.status)
    expect(JSON.stringify(crossed.body)).not.toContain('secret')
    // A namespace the product never registered: 404, as for history.
    const unregistered = await get(`/channels/nope:${randomUUID()}/archive`)
    expect(unregistered.status).toBe(404)
    expectError(unregistered, 404, 'namespace_not_registered')
  })

  test('validation: limit, order, from/to, cursor and unknown parameters are 400 naming the field', async () => {
    const channel = `arch:${randomUUID()}`
    for (let i = 1; i <= 3; i++) await publishVia(channel, { i })
    await until('3 archived', async () => (await archivedCount(p.productId, channel)) === 3)
    const page = await get(`/channels/${channel}/archive?limit=1`)
    const cursor = page.body.next as string
    expect(cursor).toEqual(expect.any(String))
    const fields = async (query: string) => failingFields(await get(`/channels/${channel}/archive?${query}`))
    expect(await fields('limit=0')).toEqual(['/query/limit'])
    expect(await fields('limit=1001')).toEqual(['/query/limit'])
    expect(await fields('limit=2.5')).toEqual(['/query/limit'])
    expect(await fields('order=sideways')).toContain('/query/order')
    expect(await fields('from=yesterday')).toEqual(['/query/from'])
    expect(await fields('from=2026-02-30T00:00:00Z')).toEqual(['/query/from'])
    expect(await fields('to=2026-11-25T12:00:00')).toEqual(['/query/to']) // no zone
    expect(await fields('from=2026-11-25T12:00:00Z&to=2026-11-25T11:00:00Z')).toEqual(['/query/from', '/query/to'])
    expect(await fields('cursor=not-a-cursor')).toEqual(['/query/cursor'])
    expect(await fields(`cursor=${cursor}&order=oldest`)).toEqual(['/query/cursor']) // issued for newest
    expect(await fields(`cursor=${cursor.slice(0, -2)}`)).toEqual(['/query/cursor']) // cut short
    // A position altered, its signature kept: a time no timestamp holds is a 400 too, never a 500.
    const parts = JSON.parse(Buffer.from(cursor, 'base64url').toString()) as unknown[]
    parts[parts.findIndex((part) => typeof part === 'number' && part > 1e12)] = 9e15
    expect(await fields(`cursor=${Buffer.from(JSON.stringify(parts)).toString('base64url')}`)).toEqual(['/query/cursor'])
    expect(await fields('extra=1')).toEqual(['/query/extra'])
    // A cursor is bound to its channel: on another one it is refused, not read as a position there.
    const elsewhere = await get(`/channels/arch:${randomUUID()}/archive?cursor=${cursor}`)
    expect(failingFields(elsewhere)).toEqual(['/query/cursor'])
    // The same cursor where it belongs reads on.
    const next = await get(`/channels/${channel}/archive?limit=5&cursor=${cursor}`)
    expect(next.body.entries.map((e: any) => e.offset)).toEqual([2, 1])
  })
})

describe('history that outlives Redis: a cursor recovered from the archive', () => {
  /** Publishes 1..n on a new channel of `namespace` and waits until the archiver has them all (when it archives). */
  async function published(namespace: string, n: number) {
    const channel = `${namespace}:${randomUUID()}`
    let epoch = ''
    for (let i = 1; i <= n; i++) epoch = (await publishVia(channel, { i })).epoch
    if (namespace !== 'plain') await until(`${n} archived`, async () => (await archivedCount(p.productId, channel)) === n)
    return { channel, epoch }
  }
  const history = (channel: string, query: string) => get(`/channels/${channel}/history?${query}`)

  test('entries trimmed from Redis come from the archive, then the rest from Redis: no gap, no repeat, same offsets and epoch', async () => {
    const { channel, epoch } = await published('arch', 12) // Redis keeps 8..12
    const result = await history(channel, `offset=2&epoch=${epoch}`)
    expect(result.body).toMatchObject({ channel, offset: 12, epoch, recovered: true })
    expect(result.body.entries.map((e: any) => [e.offset, e.epoch, e.data])).toEqual(
      Array.from({ length: 10 }, (_, i) => [i + 3, epoch, { i: i + 3 }]))
    // From the archive alone up to Redis' first entry, and a cursor at the top still answers nothing new.
    expect((await history(channel, `offset=6&epoch=${epoch}`)).body.entries.map((e: any) => e.offset)).toEqual([7, 8, 9, 10, 11, 12])
    expect((await history(channel, `offset=12&epoch=${epoch}`)).body).toMatchObject({ entries: [], recovered: true })
    // The archive's copies of what Redis still holds are never read: marked, they do not show.
    await sql`update realtime_archive set data = '"archive copy"' where product_id = ${p.productId} and channel = ${channel} and "offset" >= 8`
    expect((await history(channel, `offset=2&epoch=${epoch}`)).body.entries.map((e: any) => e.data)).toEqual(
      Array.from({ length: 10 }, (_, i) => ({ i: i + 3 })))
  })

  test('with more entries stored than the history serves (between batched trims), a cursor below them recovers through the archive', async () => {
    const { channel, epoch } = await published('wide', 40) // Redis holds 24..40 (17 entries), serves 25..40
    const result = await history(channel, `offset=2&epoch=${epoch}`)
    expect(result.body).toMatchObject({ channel, offset: 40, epoch, recovered: true })
    expect(result.body.entries.map((e: any) => e.offset)).toEqual(Array.from({ length: 38 }, (_, i) => i + 3))
  })

  test('an archiver behind Redis (entries trimmed from Redis not yet archived) does not recover', async () => {
    const { channel, epoch } = await published('arch', 12) // Redis keeps 8..12
    // As if the archiver had written 1..5 only when Redis dropped 6 and 7.
    await sql`delete from realtime_archive where product_id = ${p.productId} and channel = ${channel} and "offset" >= 6`
    expect((await history(channel, `offset=2&epoch=${epoch}`)).body).toMatchObject({ entries: [], recovered: false })
  })

  test('an offset archived twice (two publish times: a Redis that lost writes and numbered again) does not recover', async () => {
    const { channel, epoch } = await published('arch', 10) // Redis keeps 6..10
    const [four] = await sql`select id, published_at from realtime_archive where product_id = ${p.productId} and channel = ${channel} and "offset" = 4`
    await archiveEntries([{ productId: p.productId, channel, epoch, offset: 4, id: randomUUID(), publishedAt: four!.published_at.getTime() + 1, data: '{"again":4}', retentionDays: 30 }])
    expect((await history(channel, `offset=1&epoch=${epoch}`)).body).toMatchObject({ entries: [], recovered: false })
    // Past the duplicate the run is single again.
    expect((await history(channel, `offset=4&epoch=${epoch}`)).body).toMatchObject({ recovered: true })
  })

  test('a run past the reply budget does not recover, and PostgreSQL sends no more of it than the budget', async () => {
    const channel = `arch:${randomUUID()}`
    const big = 'x'.repeat(1000)
    let epoch = ''
    for (let i = 1; i <= 12; i++) epoch = (await publishVia(channel, { i, big })).epoch // Redis keeps 8..12
    await until('12 archived', async () => (await archivedCount(p.productId, channel)) === 12)
    const days = async () => 30
    expect(await readHistoryWithArchive(p.productId, channel, brokerPolicy, days, { offset: 2, epoch }, 2500)).toMatchObject({ entries: [], recovered: false })
    // About two entries' worth of the five the run needs leave PostgreSQL.
    expect((await archivedRunRows(p.productId, channel, 30, epoch, 2, 7, 2500)).map((r) => Number(r.offset))).toEqual([3, 4])
    // With the budget for all of it, the same cursor recovers.
    expect(await readHistoryWithArchive(p.productId, channel, brokerPolicy, days, { offset: 2, epoch }, 100_000)).toMatchObject({ recovered: true })
  })

  test('a gap larger than any recovery is refused before the archive is asked', async () => {
    const { channel, epoch } = await published('arch', 3)
    // Redis numbered far ahead and holds only its newest entry: 19 998 entries are missing below it.
    await redis().hset(channelKeys(p.productId, channel).meta, 'o', 20_000)
    await publishVia(channel, { i: 20_001 })
    await redis().xtrim(channelKeys(p.productId, channel).hist, 'MINID', '20001-0')
    let asked = false
    const days = async () => ((asked = true), 30)
    expect(await readHistoryWithArchive(p.productId, channel, brokerPolicy, days, { offset: 2, epoch })).toMatchObject({ entries: [], recovered: false })
    expect(asked).toBe(false)
  })

  test('a gateway subscription resuming from a cursor whose entries left Redis replays them from the archive, then goes live', async () => {
    const { channel, epoch } = await published('arch', 12) // Redis keeps 8..12
    const client = await WsClient.open(gateway.wsUrl)
    const { token } = await signToken({ productId: p.productId, apiKeyId: p.keyId, subject: 'archive-reader', channels: [{ name: channel, ops: ['subscribe'] }] })
    expect(await client.request({ type: 'connect', token })).toMatchObject({ type: 'reply', to: 'connect' })
    expect(await client.request({ type: 'subscribe', channel, offset: 2, epoch })).toMatchObject({ recovered: true, offset: 12, epoch })
    await publishVia(channel, { i: 13 })
    const got: Record<string, any>[] = []
    const deadline = Date.now() + 5000
    while (got.length < 11 && Date.now() < deadline) {
      got.push(...client.publications(channel))
      if (got.length < 11) await client.next((f) => f.type === 'publication' && f.channel === channel, 1000).then((f) => got.push(f), () => {})
    }
    got.push(...client.publications(channel))
    expect(got.map((f) => [f.offset, f.data.i])).toEqual(Array.from({ length: 11 }, (_, k) => [k + 3, k + 3]))
    client.ws.close()
  })

  test('no proof of continuity, no recovery: another epoch, a hole in the archive, a namespace that does not archive', async () => {
    const { channel, epoch } = await published('arch', 10) // Redis keeps 6..10
    expect((await history(channel, `offset=1&epoch=other`)).body).toMatchObject({ entries: [], recovered: false })
    await sql`delete from realtime_archive where product_id = ${p.productId} and channel = ${channel} and "offset" = 4`
    expect((await history(channel, `offset=1&epoch=${epoch}`)).body).toMatchObject({ entries: [], recovered: false })
    // After the hole, the archive and Redis still join up.
    expect((await history(channel, `offset=4&epoch=${epoch}`)).body.entries.map((e: any) => e.offset)).toEqual([5, 6, 7, 8, 9, 10])
    const plain = await published('plain', 10)
    await Bun.sleep(300) // the archiver passed them (and archived nothing)
    expect((await history(plain.channel, `offset=1&epoch=${plain.epoch}`)).body).toMatchObject({ entries: [], recovered: false })
  })
})

describe('readArchive', () => {
  test('a page stops at the reply byte budget (at least one entry) and the next pages carry the rest, once each', async () => {
    const channel = `arch:${randomUUID()}`
    const big = 'x'.repeat(1000)
    for (let i = 1; i <= 7; i++) await publishVia(channel, { i, big })
    await until('7 archived', async () => (await archivedCount(p.productId, channel)) === 7)
    const seen: number[] = []
    const sizes: number[] = []
    let cursor: string | undefined
    do {
      // About two entries' worth: each is ~1 KB of data plus framing.
      const page = await readArchive(p.productId, channel, 30, { order: 'oldest', limit: 100, cursor }, 2500)
      sizes.push(page.entries.length)
      seen.push(...page.entries.map((e) => e.offset))
      cursor = page.next ?? undefined
    } while (cursor)
    expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7])
    expect(Math.max(...sizes)).toBe(2)
    // A budget below one entry still answers one per page.
    const one = await readArchive(p.productId, channel, 30, { order: 'newest', limit: 100 }, 10)
    expect(one.entries.map((e) => e.offset)).toEqual([7])
    expect(one.next).toEqual(expect.any(String))
  })
})

describe('the platform operation realtime_archive_read', () => {
  test('reads the same pages as the public route, with the same validation', async () => {
    const channel = `arch:${randomUUID()}`
    for (let i = 1; i <= 4; i++) await publishVia(channel, { i })
    await until('4 archived', async () => (await archivedCount(p.productId, channel)) === 4)
    const first = await call('GET', `/realtime/channels/${channel}/archive?order=oldest&limit=3`, { token: p.token, productId: p.productId })
    expect(first.status).toBe(200)
    expect(first.body.entries.map((e: any) => e.data)).toEqual([{ i: 1 }, { i: 2 }, { i: 3 }])
    const second = await call('GET', `/realtime/channels/${channel}/archive?order=oldest&limit=3&cursor=${first.body.next}`, { token: p.token, productId: p.productId })
    expect(second.body).toMatchObject({ channel, next: null })
    expect(second.body.entries.map((e: any) => e.data)).toEqual([{ i: 4 }])
    const bad = await call('GET', `/realtime/channels/${channel}/archive?cursor=zzz`, { token: p.token, productId: p.productId })
    expect(bad.status).toBe(400)
    // The other product's owner reads its own (empty) channel of that name.
    const theirs = await call('GET', `/realtime/channels/${channel}/archive`, { token: other.token, productId: other.productId })
    expect(theirs.body).toEqual({ channel, entries: [], next: null })
  })
})

describe('retention', () => {
  const DAY = 86_400_000
  const row = (product: RealtimeProduct, channel: string, offset: number, ageDays: number, retentionDays = 30) => ({
    productId: product.productId, channel, epoch: 'e1', offset, id: randomUUID(), publishedAt: Date.now() - ageDays * DAY,
    data: JSON.stringify({ offset }), retentionDays,
  })

  test('rows past the retention are never answered and the sweeper deletes them; lowering it applies at the next sweep', async () => {
    const owner = await realtimeProduct([{ name: 'keep', history: HISTORY, archive: { retentionDays: 30 } }])
    const channel = `keep:${randomUUID()}`
    expect(await archiveEntries([row(owner, channel, 1, 40), row(owner, channel, 2, 20), row(owner, channel, 3, 1)])).toBe(3)
    const offsets = async () => (await get(`/channels/${channel}/archive?order=oldest`, owner)).body.entries.map((e: any) => e.offset)
    expect(await offsets()).toEqual([2, 3]) // 40 days old is past 30 already, swept or not
    await sweepArchive()
    expect(await archivedCount(owner.productId, channel)).toBe(2)

    await manage(owner, 'PATCH', '/realtime/namespaces/keep', { archive: { retentionDays: 10 } })
    await until('the lowered retention served', async () => (await offsets()).length === 1)
    expect(await offsets()).toEqual([3])
    await sweepArchive()
    expect(await archivedCount(owner.productId, channel)).toBe(1)
  })

  test('a removed archive stops archiving; rows already kept expire by the retention they were written with', async () => {
    const owner = await realtimeProduct([{ name: 'gone', history: HISTORY, archive: { retentionDays: 30 } }])
    const channel = `gone:${randomUUID()}`
    await archiveEntries([row(owner, channel, 1, 25, 30), row(owner, channel, 2, 35, 30), row(owner, channel, 3, 2, 1)])
    await manage(owner, 'PATCH', '/realtime/namespaces/gone', { archive: null })
    await sweepArchive()
    const kept = await sql`select "offset" from realtime_archive where product_id = ${owner.productId} and channel = ${channel} order by "offset"`
    expect(kept.map((r) => Number(r.offset))).toEqual([1]) // 35 days > 30; 2 days > its 1
    const page = await get(`/channels/${channel}/archive`, owner)
    expect(page.body.entries.map((e: any) => e.offset)).toEqual([1])
    // New publications are no longer archived.
    const live = `gone:${randomUUID()}`
    const marker = `arch:${randomUUID()}`
    await publish({ productId: owner.productId, channel: live, policy: brokerPolicy, data: '{"x":1}' })
    await publishVia(marker, { m: 1 })
    await until('marker archived', async () => (await archivedCount(p.productId, marker)) === 1)
    await Bun.sleep(300)
    expect(await archivedCount(owner.productId, live)).toBe(0)
  })

  test('a deleted namespace: its archive is never answered again, a namespace created again starts empty, the sweeper deletes the rows', async () => {
    const owner = await realtimeProduct([{ name: 'del', history: HISTORY, archive: { retentionDays: 30 } }])
    const channel = `del:${randomUUID()}`
    await archiveEntries([row(owner, channel, 1, 2), row(owner, channel, 2, 1)])
    const read = () => get(`/channels/${channel}/archive?order=oldest`, owner)
    expect((await read()).body.entries.map((e: any) => e.offset)).toEqual([1, 2])
    const deleted = await call('DELETE', '/realtime/namespaces/del', { token: owner.token, productId: owner.productId })
    expect([200, 204]).toContain(deleted.status)
    expect((await read()).status).toBe(404)
    // The same name again, archiving: the old namespace's rows are not its own.
    await manage(owner, 'POST', '/realtime/namespaces', { name: 'del', history: HISTORY, archive: { retentionDays: 30 } })
    await until('the namespace served again', async () => (await read()).status === 200)
    expect((await read()).body).toEqual({ channel, entries: [], next: null })
    await Bun.sleep(5) // a publish time after the deletion
    await archiveEntries([{ ...row(owner, channel, 3, 0), publishedAt: Date.now() }])
    expect((await read()).body.entries.map((e: any) => e.offset)).toEqual([3])
    await sweepArchive()
    const kept = await sql`select "offset" from realtime_archive where product_id = ${owner.productId} and channel = ${channel}`
    expect(kept.map((r) => Number(r.offset))).toEqual([3])
  })

  test('the tracking row of a namespace that no longer archives goes once its last row has', async () => {
    const owner = await realtimeProduct([{ name: 'track', history: HISTORY, archive: { retentionDays: 30 } }])
    const channel = `track:${randomUUID()}`
    const tracked = async () => (await sql`select 1 from realtime_archive_namespaces where product_id = ${owner.productId} and namespace = 'track'`).length
    await archiveEntries([row(owner, channel, 1, 35, 30)])
    expect(await tracked()).toBe(1)
    await sweepArchive() // still archives: the row goes, the tracking row stays
    expect(await archivedCount(owner.productId, channel)).toBe(0)
    expect(await tracked()).toBe(1)
    await manage(owner, 'PATCH', '/realtime/namespaces/track', { archive: null })
    await sweepArchive()
    expect(await tracked()).toBe(0)
  })

  test('partition DDL waits only briefly for its lock and is postponed to the next sweep; a month records its longest retention', async () => {
    const owner = await realtimeProduct([{ name: 'ddl', history: HISTORY, archive: { retentionDays: 3650 } }])
    const channel = `ddl:${randomUUID()}`
    const at = new Date(Date.UTC(2014, 5, 15))
    const { name } = monthPartition(at)
    await sql`drop table if exists ${sql(name)}`
    await archiveEntries([{ ...row(owner, channel, 1, 0, 3650), publishedAt: at.getTime() }, { ...row(owner, channel, 2, 0, 20), publishedAt: at.getTime() }])
    const [recorded] = await sql`select retention_days from realtime_archive_partitions where name = ${name}`
    expect(recorded?.retention_days).toBe(3650)
    await sql`update realtime_archive_partitions set retention_days = 0 where name = ${name}` // past every retention
    const holder = unboundedSql()
    const reader = await holder.reserve()
    try {
      // A long reader of the archive: the DROP's ACCESS EXCLUSIVE lock would queue every other query behind it.
      await reader`begin`
      await reader`select count(*) from realtime_archive where product_id = ${owner.productId}`
      const started = Date.now()
      const blocked = await sweepArchive()
      expect(blocked.postponed).toContain(name)
      expect(blocked.dropped).not.toContain(name)
      expect(Date.now() - started).toBeLessThan(config.db.timeoutMs)
    } finally {
      await reader`rollback`
      reader.release()
      await holder.end()
    }
    expect((await sweepArchive()).dropped).toContain(name)
  })

  test('a month partition is made on demand for a row that needs it, and dropped whole once past every retention', async () => {
    const owner = await realtimeProduct([{ name: 'old', history: HISTORY, archive: { retentionDays: 3650 } }])
    const channel = `old:${randomUUID()}`
    const at = new Date(Date.UTC(2015, 0, 15))
    const { name } = monthPartition(at)
    await sql`drop table if exists ${sql(name)}`
    expect(await archiveEntries([{ ...row(owner, channel, 1, 0, 3650), publishedAt: at.getTime() }])).toBe(1)
    expect(await ensureMonthPartition(at)).toBe(false) // made by the insert
    expect(Number((await sql`select count(*)::int as n from ${sql(name)} where channel = ${channel}`)[0]!.n)).toBe(1)
    const result = await sweepArchive()
    expect(result.dropped).toContain(name)
    expect(await archivedCount(owner.productId, channel)).toBe(0)
  })
})

describe('the archiver process', () => {
  test('killed with SIGKILL mid-batch and restarted, it loses and duplicates nothing', async () => {
    archiver.proc.kill('SIGTERM')
    await archiver.proc.exited
    const channel = `arch:${randomUUID()}`
    const total = 3000
    // A backlog while no archiver runs, so the next one is mid-way through it when killed.
    for (let i = 0; i < total; i += 100) {
      await Promise.all(Array.from({ length: 100 }, (_, j) =>
        publish({ productId: p.productId, channel, policy: brokerPolicy, data: JSON.stringify({ i: i + j }) })))
    }
    const consumer = `test-${randomUUID()}`
    const shard = shardOf(p.productId, channel)
    const pending = async () => Number(((await redis().xpending(fanKey(shard), 'archiver')) as [number])[0])
    // Each batch waits a second between its commit and its acknowledgement: killed then, it leaves committed entries pending.
    let first = startArchiver({ ARCHIVER_CONSUMER: consumer, ARCHIVER_BATCH: '50', ARCHIVER_ACK_DELAY_MS: '1000' })
    await until('a batch committed', async () => (await archivedCount(p.productId, channel)) > 0, 15_000)
    first.proc.kill('SIGKILL')
    await first.proc.exited
    const atKill = await archivedCount(p.productId, channel)
    expect(atKill).toBeLessThan(total)
    expect(await pending()).toBeGreaterThan(0) // committed, never acknowledged
    // The same consumer again: it reads its own pending entries first (archived already: skipped by the key).
    first = startArchiver({ ARCHIVER_CONSUMER: consumer, ARCHIVER_BATCH: '50' })
    await until('archiving resumed', async () => (await archivedCount(p.productId, channel)) > atKill, 15_000)
    first.proc.kill('SIGKILL')
    await first.proc.exited
    // Another consumer: it claims what the dead one left pending (XAUTOCLAIM, idle 1 s here).
    archiver = startArchiver({ ARCHIVER_BATCH: '500' })
    await until('all archived', async () => (await archivedCount(p.productId, channel)) === total, 30_000)
    const rows = await sql`select "offset", data from realtime_archive where product_id = ${p.productId} and channel = ${channel} order by "offset"`
    expect(rows.map((r) => Number(r.offset))).toEqual(Array.from({ length: total }, (_, i) => i + 1))
    // Nothing is left pending in the shard's group.
    await until('nothing pending', async () => (await pending()) === 0)
  }, 90_000)

  test('a batch PostgreSQL refuses stays pending and is archived, once, when it answers again', async () => {
    const channel = `arch:${randomUUID()}`
    const holder = unboundedSql()
    const locked = await holder.reserve()
    try {
      // The archive locked longer than the archiver's statement deadline (DB_TIMEOUT_MS): its inserts fail.
      await locked`begin`
      await locked`lock table realtime_archive in access exclusive mode`
      for (let i = 1; i <= 5; i++) await publishVia(channel, { i })
      await Bun.sleep(config.db.timeoutMs + 1500)
    } finally {
      await locked`rollback`
      locked.release()
      await holder.end()
    }
    await until('5 archived', async () => (await archivedCount(p.productId, channel)) === 5)
    const rows = await sql`select "offset" from realtime_archive where product_id = ${p.productId} and channel = ${channel} order by "offset"`
    expect(rows.map((r) => Number(r.offset))).toEqual([1, 2, 3, 4, 5])
  }, 30_000)

  test('an entry PostgreSQL refuses is dead-lettered, and the rest of its batch and shard is archived', async () => {
    const channel = `arch:${randomUUID()}`
    const shard = shardOf(p.productId, channel)
    const streamId = await redis().eval(
      // Three entries of the shard in one step, so the archiver reads them in one batch: the middle one's payload holds a
      // NUL byte, which PostgreSQL refuses in text (22021).
      `local ids = {}
      for i = 1, 3 do
        ids[i] = redis.call('XADD', KEYS[1], '*', 'channel', ARGV[1], 'product', ARGV[2], 'id', 'm' .. i, 't', ARGV[3],
          'offset', i, 'epoch', 'poison', 'd', i == 2 and 'bad\0json' or ('{"i":' .. i .. '}'))
      end
      return ids[2]`, 1, fanKey(shard), channel, p.productId, Date.now()) as string
    await until('the other two archived', async () => (await archivedCount(p.productId, channel)) === 2)
    const rows = await sql`select "offset" from realtime_archive where product_id = ${p.productId} and channel = ${channel} order by "offset"`
    expect(rows.map((r) => Number(r.offset))).toEqual([1, 3])
    // The dead letter goes with the batch's acknowledgement, after its rows are written: waited for, not read at once.
    const letter = () => redis().lrange(fanDeadKey(shard), 0, -1).then((list) => list.map((l) => JSON.parse(l)).find((l) => l.streamId === streamId))
    await until('the dead letter set aside', async () => (await letter()) !== undefined)
    expect(await letter()).toMatchObject({ streamId, error: { code: '22021' } })
    await until('the dead letter logged', async () => archiver.logs().find((line) => line.streamId === streamId && line.msg.startsWith('archive dead letter')))
    // Acknowledged: the shard goes on, nothing of it stays pending.
    await publishVia(channel, { after: true })
    await until('a later publish archived', async () => (await archivedCount(p.productId, channel)) === 3)
  }, 30_000)

  test('a batch read again after a failure part-way counts and dead-letters its refused entry once', async () => {
    // A shard past REALTIME_SHARDS: no running archiver reads or claims it, only this reader.
    const shard = config.realtime.shards + 7
    await redis().del(fanKey(shard), fanDeadKey(shard), fanArchivedKey(shard))
    const channel = `arch:${randomUUID()}`
    const add = (offset: number, d: string) => redis().xadd(fanKey(shard), '*', 'channel', channel, 'product', p.productId,
      'id', `m${offset}`, 't', String(Date.now()), 'offset', String(offset), 'epoch', 'retry', 'd', d)
    const bad = await add(1, 'bad\0json') // refused by PostgreSQL in text (22021)
    await add(2, '{"i":2}')
    const counts: ArchiverCounts = { read: 0, archived: 0, lost: 0, deadLettered: 0 }
    const reader = new ShardReader(shard, { consumer: `retry-${randomUUID()}`, batch: 10, batchBytes: 1_000_000, claimIdleMs: 60_000, ackDelayMs: 0 }, counts)
    // The refused entry is set aside, then the good one's write fails once (PostgreSQL lost): the batch stays pending.
    const internals = reader as unknown as { write: (rows: { streamId: string }[], ...rest: unknown[]) => Promise<number> }
    const write = internals.write.bind(reader)
    let failed = false
    internals.write = async (rows, ...rest) => {
      if (!failed && rows.length === 1 && rows[0]!.streamId !== bad) {
        failed = true
        throw new Error('connection lost')
      }
      return await write(rows, ...rest)
    }
    await expect(reader.round()).rejects.toThrow('connection lost')
    expect(await reader.round()).toBe(2) // read again from its pending entries, and acknowledged
    expect(await archivedCount(p.productId, channel)).toBe(1)
    const letters = (await redis().lrange(fanDeadKey(shard), 0, -1)).map((l) => JSON.parse(l))
    expect(letters.map((l) => l.streamId)).toEqual([bad])
    expect(counts).toEqual({ read: 2, archived: 1, lost: 0, deadLettered: 1 })
    expect(Number(((await redis().xpending(fanKey(shard), 'archiver')) as [number])[0])).toBe(0)
    await redis().del(fanKey(shard), fanDeadKey(shard), fanArchivedKey(shard))
  }, 30_000)

  /**
   * With the archiver stopped, publishes 1 and 2 on a new channel, trims the shard's stream (as the fan-out retention
   * would once the archiver was down longer than REALTIME_FANOUT_RETENTION_MS), publishes 3, restarts the archiver and
   * answers the gap it logged for the shard. `before` runs once the channel's shard is known.
   */
  async function gapAfterTrim(before: (shard: number) => Promise<unknown> = async () => {}) {
    archiver.proc.kill('SIGTERM')
    await archiver.proc.exited
    const channel = `arch:${randomUUID()}`
    const shard = shardOf(p.productId, channel)
    await before(shard)
    await publish({ productId: p.productId, channel, policy: brokerPolicy, data: '1' })
    await publish({ productId: p.productId, channel, policy: brokerPolicy, data: '2' })
    await redis().xtrim(fanKey(shard), 'MAXLEN', 0)
    await publish({ productId: p.productId, channel, policy: brokerPolicy, data: '3' })
    archiver = startArchiver()
    await until('the third archived', async () => (await archivedCount(p.productId, channel)) === 1)
    return until('the gap logged', async () => archiver.logs().find((line) => line.msg === 'archive gap: fan-out entries were never archived' && line.shard === shard))
  }

  test('entries trimmed from the stream before the archiver read them are counted and logged', async () => {
    // Holds on a fresh Redis as well: no count of delivered entries there yet, the group's own position is the start.
    expect((await gapAfterTrim()).count).toBeGreaterThanOrEqual(2)
  }, 30_000)

  test("a shard whose sequence restarted (its counter lost, the archiver's count kept) still counts what was trimmed unread", async () => {
    // The archiver's count far above any number the shard's counter will give.
    const gap = await gapAfterTrim((shard) => redis().set(fanArchivedKey(shard), 1e12))
    expect(gap.count).toBeGreaterThanOrEqual(2)
  }, 30_000)
})
