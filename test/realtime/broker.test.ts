// The Redis broker against a real Redis: publish, fan-out entries, offsets and epochs, history reads and recovery.
import { afterAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { ApiError } from '../../shared/errors'
import { closeRedis, redis } from '../../shared/redis/client'
import { historyFrame } from '../../gateway/protocol'
import { channelTop, defaultBudgets, HISTORY_ENTRY_FRAMING_BYTES, HISTORY_ENTRY_OVERHEAD_BYTES, historyChannelBytes, type HistoryEntry, type HistoryPolicy, publish, type PublishBudgets, type PublishResult, readHistory, subscriptionPosition } from '../../shared/realtime/broker'
import { FAN_ENTRY_OVERHEAD_BYTES } from '../../shared/realtime/fan-budget'
import { channelKeys, fanKey } from '../../shared/realtime/keys'
import { publishPerShard } from '../../shared/realtime/publish-request'
import { shardOf } from '../../shared/realtime/shards'

const KEEP: HistoryPolicy = { historyTtlSeconds: 300, historySize: 100 }
const NONE: HistoryPolicy = { historyTtlSeconds: 0, historySize: 0 }
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** A fresh product per test, so tests never share a channel. */
const fresh = () => ({ productId: randomUUID(), channel: 'chat:room-1' })

afterAll(async () => {
  await closeRedis()
})

/** Fan-out entries of one product on a shard, as field maps. */
async function fanEntries(productId: string, channel: string): Promise<Record<string, string>[]> {
  const rows = await redis().xrevrange(fanKey(shardOf(productId, channel)), '+', '-', 'COUNT', 2000)
  return rows
    .map(([, fields]) => Object.fromEntries(Array.from({ length: fields.length / 2 }, (_, i) => [fields[2 * i]!, fields[2 * i + 1]!])))
    .filter((f) => f.product === productId)
    .reverse()
}

describe('shards and keys', () => {
  test('shardOf is stable, in range and spreads channels', () => {
    const productId = randomUUID()
    expect(shardOf(productId, 'chat:a')).toBe(shardOf(productId, 'chat:a'))
    const seen = new Set<number>()
    for (let i = 0; i < 400; i++) {
      const shard = shardOf(productId, `chat:${i}`, 16)
      expect(shard).toBeGreaterThanOrEqual(0)
      expect(shard).toBeLessThan(16)
      seen.add(shard)
    }
    expect(seen.size).toBe(16)
    expect(shardOf(productId, 'chat:a', 1)).toBe(0)
  })

  test('growing the shard count moves few channels (consistent hash)', () => {
    const productId = randomUUID()
    let moved = 0
    for (let i = 0; i < 1000; i++) if (shardOf(productId, `c:${i}`, 16) !== shardOf(productId, `c:${i}`, 17)) moved++
    expect(moved).toBeLessThan(120) // ≈ 1000/17 expected
  })

  test('every key of a channel carries its shard hash tag', () => {
    const { productId, channel } = fresh()
    const keys = channelKeys(productId, channel)
    const tag = `{s${shardOf(productId, channel)}}`
    for (const key of [keys.fan, keys.hist, keys.meta, keys.pres, keys.presCount, keys.presExp]) expect(key).toContain(tag)
    expect(keys.hist).toBe(`rt:${tag}:hist:${productId}:${channel}`)
  })
})

describe('publish and history', () => {
  test('round trip: increasing offsets, stable epoch, data parsed, ids kept', async () => {
    const { productId, channel } = fresh()
    const results = []
    for (let i = 1; i <= 5; i++) results.push(await publish({ productId, channel, policy: KEEP, data: JSON.stringify({ n: i }), id: `m${i}` }))
    expect(results.map((r) => r.offset)).toEqual([1, 2, 3, 4, 5])
    const epoch = results[0]!.epoch!
    expect(epoch).toMatch(/^[0-9a-f]{16}$/)
    expect(results.every((r) => r.epoch === epoch)).toBe(true)
    expect(results.map((r) => r.id)).toEqual(['m1', 'm2', 'm3', 'm4', 'm5'])

    const history = await readHistory(productId, channel, KEEP, { last_n: 10 })
    expect(history).toMatchObject({ offset: 5, epoch, recovered: true })
    expect(history.entries.map((e) => e.offset)).toEqual([1, 2, 3, 4, 5])
    expect(history.entries.map((e) => e.data)).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }, { n: 5 }])
    expect(history.entries[0]).toMatchObject({ id: 'm1', epoch })
    expect(history.entries[0]!.ref).toBeUndefined()
    expect(Math.abs(Date.parse(history.entries[0]!.publishedAt) - Date.now())).toBeLessThan(5000)
    expect(await channelTop(productId, channel)).toEqual({ offset: 5, epoch })
  })

  test('a default id is a random uuid', async () => {
    const { productId, channel } = fresh()
    const result = await publish({ productId, channel, policy: KEEP, data: '1' })
    expect(result.id).toMatch(/^[0-9a-f-]{36}$/)
  })

  test('last_n returns the newest n in ascending order', async () => {
    const { productId, channel } = fresh()
    for (let i = 1; i <= 10; i++) await publish({ productId, channel, policy: KEEP, data: String(i) })
    const history = await readHistory(productId, channel, KEEP, { last_n: 3 })
    expect(history.entries.map((e) => e.offset)).toEqual([8, 9, 10])
    expect(history.entries.map((e) => e.data)).toEqual([8, 9, 10])
    expect(history.offset).toBe(10)
  })

  test('last_n beyond 1000 or below 1 is refused', async () => {
    const { productId, channel } = fresh()
    for (const last_n of [0, 1001, 1.5]) {
      const error = await readHistory(productId, channel, KEEP, { last_n }).catch((e) => e)
      expect(error).toBeInstanceOf(ApiError)
      expect(error.status).toBe(400)
    }
    const error = await readHistory(productId, channel, KEEP, { last_ms: 0 }).catch((e) => e)
    expect(error.status).toBe(400)
  })

  test('last_ms returns only entries published within the window', async () => {
    const { productId, channel } = fresh()
    for (let i = 1; i <= 3; i++) await publish({ productId, channel, policy: KEEP, data: String(i) })
    await sleep(400)
    for (let i = 4; i <= 5; i++) await publish({ productId, channel, policy: KEEP, data: String(i) })
    const recent = await readHistory(productId, channel, KEEP, { last_ms: 250 })
    expect(recent.entries.map((e) => e.offset)).toEqual([4, 5])
    const all = await readHistory(productId, channel, KEEP, { last_ms: 60_000 })
    expect(all.entries.map((e) => e.offset)).toEqual([1, 2, 3, 4, 5])
  })

  test('last_ms walks past one Lua batch (more than 500 entries)', async () => {
    const { productId, channel } = fresh()
    const policy = { historyTtlSeconds: 300, historySize: 2000 }
    await Promise.all(Array.from({ length: 1200 }, (_, i) => publish({ productId, channel, policy, data: String(i) })))
    const all = await readHistory(productId, channel, policy, { last_ms: 60_000 })
    expect(all.entries.length).toBe(1200)
    expect(all.entries[0]!.offset).toBe(1)
    expect(all.entries.at(-1)!.offset).toBe(1200)
  })

  test('cursor: entries after the offset, recovered; at the top, nothing to recover', async () => {
    const { productId, channel } = fresh()
    let epoch = ''
    for (let i = 1; i <= 6; i++) epoch = (await publish({ productId, channel, policy: KEEP, data: String(i) })).epoch!
    const after = await readHistory(productId, channel, KEEP, { offset: 2, epoch })
    expect(after).toMatchObject({ offset: 6, epoch, recovered: true })
    expect(after.entries.map((e) => e.offset)).toEqual([3, 4, 5, 6])
    const atTop = await readHistory(productId, channel, KEEP, { offset: 6, epoch })
    expect(atTop).toEqual({ entries: [], offset: 6, epoch, recovered: true })
    const fromZero = await readHistory(productId, channel, KEEP, { offset: 0, epoch })
    expect(fromZero.entries.length).toBe(6)
    const beyond = await readHistory(productId, channel, KEEP, { offset: 7, epoch })
    expect(beyond.recovered).toBe(false)
  })

  test('cursor with another epoch: recovered false, no entries', async () => {
    const { productId, channel } = fresh()
    for (let i = 1; i <= 3; i++) await publish({ productId, channel, policy: KEEP, data: String(i) })
    const result = await readHistory(productId, channel, KEEP, { offset: 1, epoch: 'not-the-epoch' })
    expect(result.recovered).toBe(false)
    expect(result.entries).toEqual([])
    expect(result.offset).toBe(3)
  })

  test('one reply carries a bounded number of bytes: a larger cursor gap does not recover, a window is truncated', async () => {
    const { productId, channel } = fresh()
    const data = JSON.stringify({ text: 'x'.repeat(100) })
    let epoch = ''
    for (let i = 0; i < 10; i++) epoch = (await publish({ productId, channel, policy: KEEP, data })).epoch!
    // An entry's field values: publish time (13 digits) + message id (36) + payload (111) = 160 bytes, plus what it
    // adds to a reply around them: the framing allowance and the channel's name.
    const perEntry = 160 + HISTORY_ENTRY_FRAMING_BYTES + channel.length
    const budget = 3 * perEntry + 80 // room for 3 entries, not 4
    const gapOf3 = await readHistory(productId, channel, KEEP, { offset: 7, epoch }, budget)
    expect(gapOf3).toMatchObject({ recovered: true, offset: 10 })
    expect(gapOf3.entries.map((e) => e.offset)).toEqual([8, 9, 10])
    expect(gapOf3.truncated).toBeUndefined()
    // All or nothing: a gap of 4 would need more than one reply may carry.
    expect(await readHistory(productId, channel, KEEP, { offset: 6, epoch }, budget)).toEqual({ entries: [], offset: 10, epoch, recovered: false })
    const window = await readHistory(productId, channel, KEEP, { last_n: 10 }, budget)
    expect(window.entries.map((e) => e.offset)).toEqual([8, 9, 10]) // the newest that fit, still ascending
    expect(window.truncated).toBe(true)
    const byTime = await readHistory(productId, channel, KEEP, { last_ms: 60_000 }, budget)
    expect({ offsets: byTime.entries.map((e) => e.offset), truncated: byTime.truncated }).toEqual({ offsets: [8, 9, 10], truncated: true })
    // With the default budget nothing is cut.
    const all = await readHistory(productId, channel, KEEP, { last_n: 10 })
    expect({ n: all.entries.length, truncated: all.truncated }).toEqual({ n: 10, truncated: undefined })
  })

  test('the budget bounds the reply as written, not only the stored bytes: many small messages fit it as frames and as JSON', async () => {
    const { productId, channel } = fresh()
    let epoch = ''
    for (let i = 1; i <= 100; i++) epoch = (await publish({ productId, channel, policy: KEEP, data: JSON.stringify({ i }) })).epoch!
    const budget = 8000 // about 60 stored bytes a message: 100 of them store in 6 000, but write as well over 8 000
    const written = (entries: HistoryEntry[]) => ({
      frames: entries.reduce((sum, e) => sum + historyFrame(channel, e).length + 1, 0),
      json: JSON.stringify(entries).length,
    })
    const window = await readHistory(productId, channel, KEEP, { last_n: 100 }, budget)
    expect(window.truncated).toBe(true)
    expect(window.entries.length).toBeGreaterThan(10)
    const { frames, json } = written(window.entries)
    expect(Math.max(frames, json)).toBeLessThanOrEqual(budget)
    const recovery = await readHistory(productId, channel, KEEP, { offset: 0, epoch }, budget)
    expect(recovery.recovered).toBe(false) // all or nothing: 100 would not fit
    const fits = await readHistory(productId, channel, KEEP, { offset: 100 - window.entries.length, epoch }, budget)
    expect(fits.recovered).toBe(true)
    expect(Math.max(written(fits.entries).frames, written(fits.entries).json)).toBeLessThanOrEqual(budget)
  })

  test('cursor whose first missed entry was trimmed by size: recovered false, no partial replay', async () => {
    const { productId, channel } = fresh()
    const policy = { historyTtlSeconds: 300, historySize: 3 }
    let epoch = ''
    for (let i = 1; i <= 8; i++) epoch = (await publish({ productId, channel, policy, data: String(i) })).epoch!
    const newest = await readHistory(productId, channel, policy, { last_n: 10 })
    expect(newest.entries.map((e) => e.offset)).toEqual([6, 7, 8])
    expect(await readHistory(productId, channel, policy, { offset: 4, epoch })).toEqual({ entries: [], offset: 8, epoch, recovered: false })
    const ok = await readHistory(productId, channel, policy, { offset: 5, epoch })
    expect(ok.recovered).toBe(true)
    expect(ok.entries.map((e) => e.offset)).toEqual([6, 7, 8])
  })

  test('trims by size come in batches: the stream holds at most size + size/8 entries, reads serve the newest size, and the bytes charged are always what is stored', async () => {
    const { productId, channel } = fresh()
    const policy = { historyTtlSeconds: 300, historySize: 16 } // trimmed every 16/8 + 1 = 3 offsets
    const keys = channelKeys(productId, channel)
    const cost = (id: string, data: string) => id.length + data.length + HISTORY_ENTRY_OVERHEAD_BYTES
    let epoch = ''
    const lengths: number[] = []
    for (let i = 1; i <= 40; i++) {
      const data = JSON.stringify('x'.repeat(i)) // entries of different sizes, so a miscounted one shows
      epoch = (await publish({ productId, channel, policy, data, id: `m${i}` })).epoch!
      const stored = await redis().xrange(keys.hist, '-', '+')
      lengths.push(stored.length)
      const charged = historyChannelBytes(channel) + stored.reduce((sum, [, f]) => sum + cost(f[3]!, f[5]!), 0)
      expect(await redis().hget(keys.meta, 'b')).toBe(String(charged))
      expect(await redis().hget(keys.histBytes, '#')).toBe(String(charged))
    }
    expect(Math.max(...lengths)).toBe(18)
    expect(lengths.slice(15)).toContain(16) // and down to the size right after each batch
    const newest = await readHistory(productId, channel, policy, { last_n: 1000 })
    expect(newest.entries.map((e) => e.offset)).toEqual(Array.from({ length: 16 }, (_, i) => 25 + i))
    expect((await readHistory(productId, channel, policy, { last_ms: 60_000 })).entries).toHaveLength(16)
    // A cursor recovers only from within the newest 16, even while older entries are still stored.
    expect(await redis().xlen(keys.hist)).toBeGreaterThan(16)
    expect((await readHistory(productId, channel, policy, { offset: 23, epoch })).recovered).toBe(false)
    const recovered = await readHistory(productId, channel, policy, { offset: 24, epoch })
    expect(recovered.entries.map((e) => e.offset)).toEqual(Array.from({ length: 16 }, (_, i) => 25 + i))
  })

  test('a channel whose size fills its product\'s history budget exactly keeps publishing between batched trims', async () => {
    const { productId, channel } = fresh()
    const policy = { historyTtlSeconds: 300, historySize: 16 }
    const data = JSON.stringify('y'.repeat(98)) // 100 bytes; a UUID id: 200 bytes an entry
    const budgets: PublishBudgets = { ...defaultBudgets(), historyMaxBytes: historyChannelBytes(channel) + 16 * (36 + 100 + HISTORY_ENTRY_OVERHEAD_BYTES) }
    for (let i = 1; i <= 40; i++) {
      const result = await publish({ productId, channel, policy, data }, budgets).catch((e) => e)
      expect(result).toMatchObject({ offset: i })
      expect(Number(await redis().hget(channelKeys(productId, channel).meta, 'b'))).toBeLessThanOrEqual(budgets.historyMaxBytes)
    }
    expect((await readHistory(productId, channel, policy, { last_n: 100 })).entries.map((e) => e.offset)).toEqual(Array.from({ length: 16 }, (_, i) => 25 + i))
  })

  test('entries older than the retention window are never returned, and the cursor to them does not recover', async () => {
    const { productId, channel } = fresh()
    const policy = { historyTtlSeconds: 1, historySize: 100 }
    const { epoch } = await publish({ productId, channel, policy, data: '"old"' })
    // Keep the channel alive (each publish renews the keys) while the first entry ages past 1 s.
    await sleep(600)
    await publish({ productId, channel, policy, data: '"mid"' })
    await sleep(600)
    await publish({ productId, channel, policy, data: '"new"' })
    const result = await readHistory(productId, channel, policy, { last_n: 10 })
    expect(result.epoch).toBe(epoch!)
    expect(result.entries.map((e) => e.data)).toEqual(['mid', 'new'])
    expect((await readHistory(productId, channel, policy, { offset: 0, epoch: epoch! })).recovered).toBe(false)
    const fromOne = await readHistory(productId, channel, policy, { offset: 1, epoch: epoch! })
    expect(fromOne.recovered).toBe(true)
    expect(fromOne.entries.map((e) => e.offset)).toEqual([2, 3])
    // The publish script trims aged entries from the front of the stream.
    expect(await redis().xlen(channelKeys(productId, channel).hist)).toBe(2)
  })

  test('after the history keys expire the epoch changes and offsets restart', async () => {
    const { productId, channel } = fresh()
    const policy = { historyTtlSeconds: 1, historySize: 10 }
    const first = await publish({ productId, channel, policy, data: '1' })
    await publish({ productId, channel, policy, data: '2' })
    await sleep(1200)
    expect(await channelTop(productId, channel)).toBeNull()
    const gone = await readHistory(productId, channel, policy, { offset: 1, epoch: first.epoch! })
    expect(gone).toEqual({ entries: [], offset: 0, epoch: '', recovered: false })
    const next = await publish({ productId, channel, policy, data: '3' })
    expect(next.offset).toBe(1)
    expect(next.epoch).not.toBe(first.epoch)
    expect((await readHistory(productId, channel, policy, { offset: 1, epoch: first.epoch! })).recovered).toBe(false)
  })

  test('the history keys live at least the retention window after every publish; their expiry moves once per eighth of it', async () => {
    const { productId, channel } = fresh()
    const policy = { historyTtlSeconds: 80, historySize: 10 }
    const keys = channelKeys(productId, channel)
    /** Each key's expiry and the channel's score in histx, against the window from `since` (ms, before the publish). */
    const expiries = async (since: number) => {
      const [hist, meta, x, scored] = await Promise.all([redis().pexpiretime(keys.hist), redis().pexpiretime(keys.meta),
        redis().hget(keys.meta, 'x'), redis().zscore(keys.histExpiry, channel)])
      expect(hist).toBe(meta)
      expect(Number(x)).toBe(hist)
      expect(Number(scored)).toBe(hist)
      expect(hist).toBeGreaterThanOrEqual(since + 80_000)
      expect(hist).toBeLessThanOrEqual(Date.now() + 90_000)
      return hist
    }
    let since = Date.now()
    await publish({ productId, channel, policy, data: '1' })
    const first = await expiries(since)
    since = Date.now()
    await publish({ productId, channel, policy, data: '2' })
    expect(await expiries(since)).toBe(first) // still a window away: not moved
    // As if the window had mostly passed: the next publish moves the expiry, to a window and an eighth from now.
    const soon = Date.now() + 70_000
    await Promise.all([redis().pexpireat(keys.hist, soon), redis().pexpireat(keys.meta, soon), redis().hset(keys.meta, 'x', soon),
      redis().zadd(keys.histExpiry, soon, channel)])
    since = Date.now()
    await publish({ productId, channel, policy, data: '3' })
    expect(await expiries(since)).toBeGreaterThan(soon)
  })

  test('a publish writes only what changed in the meta hash; a hash of before, without its generation, keeps its epoch and is stamped', async () => {
    const { productId, channel } = fresh()
    const keys = channelKeys(productId, channel)
    const first = await publish({ productId, channel, policy: KEEP, data: '1' })
    const stamped = await redis().hgetall(keys.meta)
    expect(Object.keys(stamped).sort()).toEqual(['b', 'e', 'g', 'h', 'o', 'x'])
    // Fields a steady publish does not write keep what they held: a planted value survives it.
    const planted = String(Date.now() - 1)
    await redis().hset(keys.meta, 'h', planted)
    const second = await publish({ productId, channel, policy: KEEP, data: '2' })
    expect(second).toMatchObject({ offset: 2, epoch: first.epoch })
    const after = await redis().hgetall(keys.meta)
    expect(after).toMatchObject({ e: stamped.e, g: stamped.g, x: stamped.x, h: planted, o: '2' })
    expect(Number(after.b)).toBeGreaterThan(Number(stamped.b))
    // Written by a version of the scripts before generations: no g. Trusted, and stamped by its next publish.
    await redis().hdel(keys.meta, 'g')
    const third = await publish({ productId, channel, policy: KEEP, data: '3' })
    expect(third).toMatchObject({ offset: 3, epoch: first.epoch })
    expect(await redis().hget(keys.meta, 'g')).toBe(stamped.g!)
    expect((await readHistory(productId, channel, KEEP, { offset: 0, epoch: first.epoch! })).entries.map((e) => e.data)).toEqual([1, 2, 3])
  })

  test('a shortened retention shortens the keys at the next publish; a stream lost while its meta survives gets its expiry back', async () => {
    const { productId, channel } = fresh()
    const keys = channelKeys(productId, channel)
    await publish({ productId, channel, policy: { historyTtlSeconds: 8000, historySize: 10 }, data: '1' })
    expect(await redis().pexpiretime(keys.meta)).toBeGreaterThan(Date.now() + 7_000_000)
    await publish({ productId, channel, policy: { historyTtlSeconds: 80, historySize: 10 }, data: '2' })
    for (const key of [keys.hist, keys.meta]) expect(await redis().pexpiretime(key)).toBeLessThanOrEqual(Date.now() + 90_000)
    expect(Number(await redis().zscore(keys.histExpiry, channel))).toBeLessThanOrEqual(Date.now() + 90_000)
    // As eviction under maxmemory may: the stream goes, the meta stays. The next publish's stream expires with it.
    await redis().del(keys.hist)
    const third = await publish({ productId, channel, policy: { historyTtlSeconds: 80, historySize: 10 }, data: '3' })
    expect(third.offset).toBe(3)
    const [hist, meta] = [await redis().pexpiretime(keys.hist), await redis().pexpiretime(keys.meta)]
    expect(hist).toBeGreaterThan(0)
    expect(hist).toBe(meta)
  })

  test('an empty channel answers offset 0 and epoch ""', async () => {
    const { productId, channel } = fresh()
    expect(await readHistory(productId, channel, KEEP, { last_n: 5 })).toEqual({ entries: [], offset: 0, epoch: '', recovered: true })
    expect(await readHistory(productId, channel, KEEP, { offset: 0, epoch: '' })).toEqual({ entries: [], offset: 0, epoch: '', recovered: true })
    expect(await channelTop(productId, channel)).toBeNull()
  })

  test('a subscription position on an empty channel starts its epoch at offset 0; publishes continue it, and a cursor to it recovers them', async () => {
    const { productId, channel } = fresh()
    const start = await subscriptionPosition(productId, channel, KEEP)
    expect(start).toEqual({ offset: 0, epoch: expect.stringMatching(/^[0-9a-f]{16}$/) })
    expect(await subscriptionPosition(productId, channel, KEEP)).toEqual(start)
    const sent = await publish({ productId, channel, policy: KEEP, data: '1' })
    expect(sent).toMatchObject({ offset: 1, epoch: start.epoch })
    const recovered = await readHistory(productId, channel, KEEP, start)
    expect(recovered).toMatchObject({ recovered: true, offset: 1, epoch: start.epoch })
    expect(recovered.entries.map((e) => e.offset)).toEqual([1])
  })

  test('an epoch started by a subscription expires with the retention window; the cursor to it then does not recover', async () => {
    const { productId, channel } = fresh()
    const policy = { historyTtlSeconds: 1, historySize: 10 }
    const start = await subscriptionPosition(productId, channel, policy)
    await Bun.sleep(1200)
    const sent = await publish({ productId, channel, policy, data: '1' })
    expect(sent.epoch).not.toBe(start.epoch)
    expect(await readHistory(productId, channel, policy, start)).toEqual({ entries: [], offset: 1, epoch: sent.epoch!, recovered: false })
  })

  test('no-history policy: no offset or epoch, no history keys, empty reads', async () => {
    const { productId, channel } = fresh()
    const result = await publish({ productId, channel, policy: NONE, data: '{"a":1}', id: 'x1' })
    expect(result).toEqual({ id: 'x1' })
    const keys = channelKeys(productId, channel)
    expect(await redis().exists(keys.hist, keys.meta)).toBe(0)
    expect(await readHistory(productId, channel, NONE, { last_n: 10 })).toEqual({ entries: [], offset: 0, epoch: '', recovered: true })
    expect(await readHistory(productId, channel, NONE, { offset: 3, epoch: 'x' })).toEqual({ entries: [], offset: 0, epoch: '', recovered: true })
    const [fan] = await fanEntries(productId, channel)
    expect(fan).toMatchObject({ channel, product: productId, id: 'x1', d: '{"a":1}' })
    expect(fan!.offset).toBeUndefined()
    expect(fan!.epoch).toBeUndefined()
  })

  test('a ref is stored and delivered instead of data, never both', async () => {
    const { productId, channel } = fresh()
    const ref = { bucket_key: `${productId}/${channel}/m1`, size: 300_000, content_type: 'application/json' }
    const { epoch } = await publish({ productId, channel, policy: KEEP, ref, id: 'm1' })
    const [entry] = (await readHistory(productId, channel, KEEP, { last_n: 1 })).entries
    expect(entry).toMatchObject({ id: 'm1', offset: 1, epoch: epoch!, ref })
    expect('data' in entry!).toBe(false)
    const [fan] = await fanEntries(productId, channel)
    expect(JSON.parse(fan!.r!)).toEqual(ref)
    expect(fan!.d).toBeUndefined()
    for (const bad of [{}, { data: '1', ref }]) {
      const error = await publish({ productId, channel, policy: KEEP, ...bad }).catch((e) => e)
      expect(error.status).toBe(400)
    }
  })

  test('the fan-out stream gets one entry per publish with channel, product, id, offset, epoch and payload', async () => {
    const { productId, channel } = fresh()
    const published: PublishResult[] = []
    for (let i = 1; i <= 3; i++) published.push(await publish({ productId, channel, policy: KEEP, data: JSON.stringify({ i }) }))
    const entries = await fanEntries(productId, channel)
    expect(entries.length).toBe(3)
    entries.forEach((fields, i) => {
      expect(fields).toMatchObject({ channel, product: productId, id: published[i]!.id, offset: String(i + 1), epoch: published[i]!.epoch!, d: JSON.stringify({ i: i + 1 }) })
      expect(Number(fields.t)).toBeGreaterThan(0)
    })
  })

  test('the fan-out stream is trimmed by age (MINID), never by length', async () => {
    const { productId, channel } = fresh()
    const key = fanKey(shardOf(productId, channel))
    const [last] = await redis().xrevrange(key, '+', '-', 'COUNT', 1)
    // 10 500 entries: more than the length cap of 10 000 (MAXLEN ~) the streams once had; every one stays.
    for (let round = 0; round < 21; round++) {
      await Promise.all(Array.from({ length: 500 }, (_, i) => publish({ productId, channel, policy: NONE, data: String(round * 500 + i) })))
    }
    const kept = (await redis().xrange(key, last ? `(${last[0]}` : '-', '+')).filter(([, f]) => f[f.indexOf('product') + 1] === productId)
    expect(kept.length).toBe(10_500)
    await sleep(30)
    // Trimming is approximate (whole stream nodes of at most 100 entries), so most but not all of the old ones go; one
    // approximate XADD trims at most 10 000 entries (Redis' default LIMIT), and the shard's stream also holds what other
    // tests published there (many more on a cluster pass, after the whole realtime suite): one trimming write per 10 000,
    // plus one. Every 16th entry of a shard trims (publish.lua), so 16 writes per trimming one.
    const writes = 16 * (Math.ceil((await redis().xlen(key)) / 10_000) + 1)
    for (let i = 1; i <= writes; i++) {
      await publish({ productId, channel, policy: NONE, data: i === writes ? '"last"' : '"next"' }, { ...defaultBudgets(), fanoutRetentionMs: 10 })
    }
    const left = await fanEntries(productId, channel)
    expect(left.length).toBeLessThan(200)
    expect(left.at(-1)!.d).toBe('"last"')
  })

  test('client events are never stored and carry their sender', async () => {
    const { productId, channel } = fresh()
    const result = await publish({ productId, channel, policy: KEEP, data: '"hey"', senderConnectionId: 'conn-1' })
    expect(result.offset).toBeUndefined()
    expect(await channelTop(productId, channel)).toBeNull()
    const [fan] = await fanEntries(productId, channel)
    expect(fan).toMatchObject({ sender: 'conn-1', d: '"hey"' })
    expect(fan!.offset).toBeUndefined()
  })

  test('200 concurrent publishes get offsets 1..200 exactly once, in fan-out order', async () => {
    const { productId, channel } = fresh()
    const policy = { historyTtlSeconds: 300, historySize: 500 }
    const results = await Promise.all(Array.from({ length: 200 }, (_, i) => publish({ productId, channel, policy, data: String(i) })))
    expect(results.map((r) => r.offset!).sort((a, b) => a - b)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1))
    expect(new Set(results.map((r) => r.epoch)).size).toBe(1)
    const fan = await fanEntries(productId, channel)
    expect(fan.map((f) => Number(f.offset))).toEqual(Array.from({ length: 200 }, (_, i) => i + 1))
    const history = await readHistory(productId, channel, policy, { offset: 0, epoch: results[0]!.epoch! })
    expect(history.entries.length).toBe(200)
  })
})

/** `count` channel names of one product, all on the shard of its first. */
function onOneShard(productId: string, count: number): string[] {
  const names = [`room:${randomUUID().slice(0, 8)}`]
  const shard = shardOf(productId, names[0]!)
  for (let i = 0; names.length < count; i++) {
    const name = `room:${randomUUID().slice(0, 8)}-${i}`
    if (shardOf(productId, name) === shard) names.push(name)
  }
  return names
}

describe('fan-out budget: one count per publish, the window summed once per slice', () => {
  /** What one of these publishes costs the budget: publish.lua's fan_cost. */
  const costOf = (productId: string, channel: string) => productId.length + channel.length + 'i'.length + '1'.length + FAN_ENTRY_OVERHEAD_BYTES
  const send = (productId: string, channel: string, policy: HistoryPolicy, budgets: PublishBudgets) =>
    publish({ productId, channel, policy, data: '1', id: 'i' }, budgets).then(() => 'taken', (e) => (e instanceof ApiError ? e.code : e))

  test('exactly the budget is taken across slices, then refused with Retry-After; each slice after the first holds the earlier ones as its base; once the window has passed, the whole budget again', async () => {
    const productId = randomUUID()
    const channel = 'live'
    const cost = costOf(productId, channel)
    const budgets: PublishBudgets = { ...defaultBudgets(), fanoutRetentionMs: 3000, fanoutMaxBytes: 5 * cost } // slices of 300 ms
    for (let i = 0; i < 3; i++) expect(await send(productId, channel, NONE, budgets)).toBe('taken')
    await sleep(350) // a later slice
    for (let i = 0; i < 2; i++) expect(await send(productId, channel, NONE, budgets)).toBe('taken')
    const refusal = await publish({ productId, channel, policy: NONE, data: '1', id: 'i' }, budgets).catch((e) => e)
    expect(refusal).toMatchObject({ status: 429, code: 'fanout_budget_exceeded' })
    expect(Number(refusal.headers['retry-after'])).toBeLessThanOrEqual(4) // the window and a slice: 3.3 s at most
    // The hash: per slice its total, and for a slice that came after others its base (what they held then).
    const hash = await redis().hgetall(channelKeys(productId, channel).fanBudget)
    const slices = Object.keys(hash).filter((f) => /^\d+$/.test(f)).map(Number).sort((a, b) => a - b)
    expect(slices.length).toBeGreaterThanOrEqual(2)
    let before = 0
    for (const slice of slices) {
      expect({ slice, base: Number(hash[`b${slice}`] ?? 0) }).toEqual({ slice, base: before })
      before = Number(hash[slice]!)
    }
    expect(before).toBe(5 * cost)
    await sleep(3400) // every slice counted above has left the window
    for (let i = 0; i < 5; i++) expect(await send(productId, channel, NONE, budgets)).toBe('taken')
    expect(await send(productId, channel, NONE, budgets)).toBe('fanout_budget_exceeded')
  })

  test('a first write of a slice refused (one message over the whole budget) leaves the slice counting right', async () => {
    const productId = randomUUID()
    const channel = 'live'
    const cost = costOf(productId, channel)
    const budgets: PublishBudgets = { ...defaultBudgets(), fanoutMaxBytes: 2 * cost }
    const big = await publish({ productId, channel, policy: NONE, data: JSON.stringify('x'.repeat(2 * cost)), id: 'i' }, budgets).catch((e) => e)
    expect(big).toMatchObject({ status: 429, code: 'fanout_budget_exceeded' })
    for (let i = 0; i < 2; i++) expect(await send(productId, channel, NONE, budgets)).toBe('taken')
    expect(await send(productId, channel, NONE, budgets)).toBe('fanout_budget_exceeded')
  })

  test('a slice after the current one already in the hash (the clock behind a failed-over master\'s) is counted: the publish counts in it', async () => {
    const productId = randomUUID()
    const channel = 'live'
    const cost = costOf(productId, channel)
    const slice = 6000 // fanoutRetentionMs 60 000 in 10 slices: what defaultBudgets() has
    const budgets: PublishBudgets = { ...defaultBudgets(), fanoutRetentionMs: 60_000, fanoutMaxBytes: 10 * cost }
    const [seconds, micros] = await redis().time()
    const bucket = Math.floor((Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)) / slice)
    // What a master whose clock ran a slice ahead counted: 9 messages in the next slice.
    await redis().hset(channelKeys(productId, channel).fanBudget, String(bucket + 1), String(9 * cost))
    expect(await send(productId, channel, NONE, budgets)).toBe('taken')
    expect(await send(productId, channel, NONE, budgets)).toBe('fanout_budget_exceeded')
    expect(await redis().hget(channelKeys(productId, channel).fanBudget, String(bucket + 1))).toBe(String(10 * cost))
  })

  test('a broadcast: a channel the history budget refuses gives back its own bytes, and the others on the shard keep theirs', async () => {
    const productId = randomUUID()
    const [kept, plain, later] = onOneShard(productId, 3)
    const costs = [kept!, plain!, later!].map((channel) => costOf(productId, channel))
    const budgets: PublishBudgets = { ...defaultBudgets(), fanoutMaxBytes: costs[1]! + costs[2]!, historyMaxBytes: 1 }
    // One script run for both channels (their shard's), as a broadcast's on a cluster or after its counters.
    const outcomes = await publishPerShard([
      { productId, channel: kept!, policy: KEEP, data: '1', id: 'i' },
      { productId, channel: plain!, policy: NONE, data: '1', id: 'i' },
    ], undefined, budgets)
    expect(outcomes).toMatchObject([{ refused: { code: 'history_budget_exceeded' } }, { published: { id: 'i' } }])
    expect(await send(productId, later!, NONE, budgets)).toBe('taken')
    expect(await send(productId, later!, NONE, budgets)).toBe('fanout_budget_exceeded')
  })

  test('a publish the history budget refuses gives its fan-out bytes back', async () => {
    const productId = randomUUID()
    const channel = 'live'
    const budgets: PublishBudgets = { ...defaultBudgets(), fanoutMaxBytes: 3 * costOf(productId, channel), historyMaxBytes: 1 }
    for (let i = 0; i < 3; i++) expect(await send(productId, channel, KEEP, budgets)).toBe('history_budget_exceeded')
    for (let i = 0; i < 3; i++) expect(await send(productId, channel, NONE, budgets)).toBe('taken')
    expect(await send(productId, channel, NONE, budgets)).toBe('fanout_budget_exceeded')
  })
})

describe('history budget: what a channel costs beyond its entries', () => {
  test('many channels with one tiny message each are charged their keys: the budget holds as many as channel and entry costs fit', async () => {
    const productId = randomUUID()
    const channels = onOneShard(productId, 300)
    const budgets: PublishBudgets = { ...defaultBudgets(), historyMaxBytes: 32 * 1024 }
    const keys = channelKeys(productId, channels[0]!)
    let taken = 0
    let used = 0
    let refusal: unknown
    for (const channel of channels) {
      const result = await publish({ productId, channel, policy: KEEP, data: '1', id: 'i' }, budgets).catch((e) => e)
      if (result instanceof ApiError) {
        refusal = result
        break
      }
      taken++
      const cost = historyChannelBytes(channel) + 'i'.length + '1'.length + HISTORY_ENTRY_OVERHEAD_BYTES
      used += cost
      expect(await redis().hget(channelKeys(productId, channel).meta, 'b')).toBe(String(cost))
    }
    expect(refusal).toMatchObject({ status: 429, code: 'history_budget_exceeded' })
    // Exactly at the bound: the next channel's cost would pass it (names differ in length by a few bytes at most).
    expect(used).toBeLessThanOrEqual(budgets.historyMaxBytes)
    expect(used + historyChannelBytes(channels[taken]!) + 2 + HISTORY_ENTRY_OVERHEAD_BYTES).toBeGreaterThan(budgets.historyMaxBytes)
    expect(taken).toBeLessThan(60) // counting only the entries (66 bytes each), all 300 would have fit
    expect(await redis().hget(keys.histBytes, '#')).toBe(String(used))
  })

  test('a refusal on a shard where the product keeps no history yet writes no index (nothing left without an expiry)', async () => {
    const productId = randomUUID()
    const [channel] = onOneShard(productId, 1)
    const keys = channelKeys(productId, channel!)
    const tiny = { ...defaultBudgets(), historyMaxBytes: 10 } // not even the channel's own cost fits
    expect(await publish({ productId, channel: channel!, policy: KEEP, data: '1' }, tiny).catch((e) => e)).toMatchObject({ status: 429, code: 'history_budget_exceeded' })
    expect(await subscriptionPosition(productId, channel!, KEEP, 10)).toEqual({ offset: 0, epoch: '' })
    expect(await redis().exists(keys.histBytes, keys.histExpiry, keys.meta, keys.hist)).toBe(0)
  })

  test('a subscription that starts an epoch is charged the channel\'s cost; past the budget it creates nothing and answers epoch ""', async () => {
    const productId = randomUUID()
    const [c1, c2, c3] = onOneShard(productId, 3)
    const costs = [c1!, c2!].map(historyChannelBytes)
    const budget = costs[0]! + costs[1]! + 100 // room for two empty channels, not a third
    const keys = (channel: string) => channelKeys(productId, channel)
    const first = await subscriptionPosition(productId, c1!, KEEP, budget)
    expect(first).toEqual({ offset: 0, epoch: expect.stringMatching(/^[0-9a-f]{16}$/) })
    expect(await redis().hget(keys(c1!).meta, 'b')).toBe(String(costs[0]))
    expect((await subscriptionPosition(productId, c2!, KEEP, budget)).epoch).toMatch(/^[0-9a-f]{16}$/)
    expect(await redis().hget(keys(c1!).histBytes, '#')).toBe(String(costs[0]! + costs[1]!))
    // The third does not fit: no meta hash, no epoch, nothing charged.
    expect(await subscriptionPosition(productId, c3!, KEEP, budget)).toEqual({ offset: 0, epoch: '' })
    expect(await redis().exists(keys(c3!).meta, keys(c3!).hist)).toBe(0)
    expect(await redis().hget(keys(c1!).histBytes, '#')).toBe(String(costs[0]! + costs[1]!))
    // Asked again (a subscription of a channel that already has its epoch) it costs nothing more.
    expect(await subscriptionPosition(productId, c1!, KEEP, budget)).toEqual(first)
    // The empty epochs count against publishes: a message that would fit an empty budget does not fit this one.
    const error = await publish({ productId, channel: c3!, policy: KEEP, data: '1' }, { ...defaultBudgets(), historyMaxBytes: budget }).catch((e) => e)
    expect(error).toMatchObject({ status: 429, code: 'history_budget_exceeded' })
    // While the channel has no epoch, the cursor to that position is at its top; once one starts it does not recover (resync).
    expect(await readHistory(productId, c3!, KEEP, { offset: 0, epoch: '' })).toEqual({ entries: [], offset: 0, epoch: '', recovered: true })
  })

  test('a channel is counted once in the product\'s sum whether its bytes come from its meta hash or, that hash lost, from the sum\'s own copy', async () => {
    // A publish reads the channel's bytes from its meta hash (b) and not from histb, which holds the same value; when
    // the meta hash is gone (evicted, expired early) the new epoch must take histb's copy off, not count it twice.
    const productId = randomUUID()
    const [c1, c2] = onOneShard(productId, 2)
    const keys = channelKeys(productId, c1!)
    const entry = (id: string, data: string) => id.length + data.length + HISTORY_ENTRY_OVERHEAD_BYTES
    await publish({ productId, channel: c1!, policy: KEEP, data: 'aa', id: 'i1' })
    await publish({ productId, channel: c1!, policy: KEEP, data: 'bbb', id: 'i2' })
    await publish({ productId, channel: c2!, policy: KEEP, data: 'c', id: 'i3' })
    const one = historyChannelBytes(c1!) + entry('i1', 'aa') + entry('i2', 'bbb')
    const two = historyChannelBytes(c2!) + entry('i3', 'c')
    expect(await redis().hget(keys.histBytes, c1!)).toBe(String(one))
    expect(await redis().hget(keys.histBytes, '#')).toBe(String(one + two))
    await redis().del(keys.meta)
    const again = await publish({ productId, channel: c1!, policy: KEEP, data: 'd', id: 'i4' })
    expect(again.offset).toBe(1) // a new epoch
    const fresh = historyChannelBytes(c1!) + entry('i4', 'd')
    expect(await redis().hget(keys.meta, 'b')).toBe(String(fresh))
    expect(await redis().hget(keys.histBytes, c1!)).toBe(String(fresh))
    expect(await redis().hget(keys.histBytes, '#')).toBe(String(fresh + two))
    await publish({ productId, channel: c1!, policy: KEEP, data: 'e', id: 'i5' })
    expect(await redis().hget(keys.histBytes, '#')).toBe(String(fresh + entry('i5', 'e') + two))
  })

  test('a next sweep time far ahead (a clock that went back) holds no sweep back: the next publish takes an expired channel off the sum', async () => {
    const productId = randomUUID()
    const [gone, live] = onOneShard(productId, 2)
    const keys = channelKeys(productId, live!)
    const now = Date.now()
    // What a master whose clock ran an hour ahead left: a channel expired since, and its next sweep an hour away.
    await redis().hset(keys.histBytes, '#', '5000', gone!, '5000', '@', String(now + 3_600_000), 'x', String(now + 600_000))
    await redis().zadd(keys.histExpiry, now - 1000, gone!)
    await redis().pexpire(keys.histBytes, 600_000)
    await redis().pexpire(keys.histExpiry, 600_000)
    await publish({ productId, channel: live!, policy: KEEP, data: '1', id: 'i' })
    const charged = await redis().hget(channelKeys(productId, live!).meta, 'b')
    expect(await redis().hget(keys.histBytes, gone!)).toBeNull()
    expect(await redis().hget(keys.histBytes, '#')).toBe(charged)
  })

  test('the product\'s sum lost (evicted) while its channels\' meta hashes stay counts each channel once it publishes again, never less than the copies it holds', async () => {
    // Every publish rewrites the channel's copy in histb and adjusts the sum by the difference from the copy before:
    // a channel whose copy went with the hash had none, so the sum must not take its meta's b off (it would then stay
    // short by that much for as long as the product keeps history on the shard, past its budget).
    const productId = randomUUID()
    const [c1, c2] = onOneShard(productId, 2)
    const keys = channelKeys(productId, c1!)
    await publish({ productId, channel: c1!, policy: KEEP, data: 'a'.repeat(2000), id: 'i1' })
    await publish({ productId, channel: c2!, policy: KEEP, data: 'b'.repeat(1000), id: 'i2' })
    await redis().del(keys.histBytes)
    await publish({ productId, channel: c1!, policy: KEEP, data: 'c', id: 'i3' })
    await publish({ productId, channel: c2!, policy: KEEP, data: 'd', id: 'i4' })
    const [one, two] = await Promise.all([c1!, c2!].map((c) => redis().hget(channelKeys(productId, c).meta, 'b')))
    expect(await redis().hget(keys.histBytes, c1!)).toBe(one!)
    expect(await redis().hget(keys.histBytes, c2!)).toBe(two!)
    expect(await redis().hget(keys.histBytes, '#')).toBe(String(Number(one) + Number(two)))
  })
})
