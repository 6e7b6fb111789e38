// The gateway's fan-out reader against real Redis and the real publish and presence scripts: every entry once and in
// order, and a trimmed or lost entry is reported as a gap before anything after it is delivered, wherever the cursor stood.
import { afterAll, afterEach, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import Redis from 'ioredis'
import { type FanEntry, FanoutReader } from '../../gateway/fanout'
import { publish } from '../../shared/realtime/broker'
import { fanKey, fanSeqKey } from '../../shared/realtime/keys'
import { enterPresence, leavePresence } from '../../shared/realtime/presence'
import { shardOf } from '../../shared/realtime/shards'
import { closeRedis, redis } from '../../shared/redis/client'

const HISTORY = { historyTtlSeconds: 300, historySize: 100 }
const readers: FanoutReader[] = []

/** Undoes what a test patched, even when it failed. */
const restore: (() => void)[] = []

afterEach(async () => {
  for (const undo of restore.splice(0)) undo()
  await Promise.all(readers.splice(0).map((reader) => reader.stop()))
})

afterAll(async () => {
  await closeRedis()
})

/** A reader that records what it delivers and the gaps it reports, in one timeline. */
function recorder() {
  const events: ({ gap: number } | { entry: FanEntry })[] = []
  const reader = new FanoutReader((entry) => events.push({ entry }), (shard) => events.push({ gap: shard }))
  readers.push(reader)
  const timeline = (productId: string) =>
    events.flatMap((e) => ('gap' in e ? ['gap'] : e.entry.product === productId ? [e.entry.offset ?? e.entry.kind ?? 'event'] : []))
  return { reader, events, timeline }
}

async function until(check: () => boolean, ms = 5000): Promise<void> {
  for (const deadline = Date.now() + ms; !check(); await Bun.sleep(20)) {
    if (Date.now() > deadline) throw new Error('timed out')
  }
}

const fresh = () => {
  const productId = randomUUID()
  const channel = `chat:${randomUUID().slice(0, 8)}`
  return { productId, channel, shard: shardOf(productId, channel) }
}

const send = (productId: string, channel: string, i: number) =>
  publish({ productId, channel, policy: HISTORY, data: JSON.stringify({ i }) })

test('publishes and presence events of a shard carry consecutive sequence numbers, and the reader delivers each once, in order, with no gap', async () => {
  const { productId, channel, shard } = fresh()
  const { reader, timeline, events } = recorder()
  await reader.add(shard)
  reader.start()
  await send(productId, channel, 1)
  await enterPresence({ productId, channel, identity: 'ext:ann', connectionId: 'c1' })
  await send(productId, channel, 2)
  await leavePresence({ productId, channel, identity: 'ext:ann', connectionId: 'c1' })
  await send(productId, channel, 3)
  await until(() => timeline(productId).length === 5)
  expect(timeline(productId)).toEqual([1, 'join', 2, 'leave', 3])
  const numbers = events.flatMap((e) => ('entry' in e ? [e.entry.n!] : []))
  expect(numbers.every((n, i) => i === 0 || n === numbers[i - 1]! + 1)).toBe(true)
})

test('entries trimmed between two reads (the gateway fell behind while connected): the gap is reported before the entry after it is delivered', async () => {
  const { productId, channel, shard } = fresh()
  const { reader, timeline } = recorder()
  await reader.add(shard) // the reader stands on the top; it does not read yet, as a gateway busy elsewhere would not
  for (let i = 1; i <= 4; i++) await send(productId, channel, i)
  await redis().xtrim(fanKey(shard), 'MAXLEN', 1) // only the newest entry is left: 1..3 are gone
  reader.start()
  await until(() => timeline(productId).length >= 2)
  expect(timeline(productId)).toEqual(['gap', 4])
})

test('a shard whose stream was empty when it became wanted: entries trimmed before the first read are still a gap', async () => {
  const { productId, channel, shard } = fresh()
  await redis().del(fanKey(shard)) // an empty stream: the cursor is 0-0, whose continuity only the counter proves
  const { reader, timeline } = recorder()
  await reader.add(shard)
  for (let i = 1; i <= 3; i++) await send(productId, channel, i)
  await redis().xtrim(fanKey(shard), 'MAXLEN', 1)
  reader.start()
  await until(() => timeline(productId).length >= 2)
  expect(timeline(productId)).toEqual(['gap', 3])
})

test('Redis lost the stream and its counter (a restart without persistence): the first entry after it is reported as a gap', async () => {
  const { productId, channel, shard } = fresh()
  const { reader, timeline } = recorder()
  await reader.add(shard)
  reader.start()
  await send(productId, channel, 1)
  await until(() => timeline(productId).length === 1)
  await redis().del(fanKey(shard), fanSeqKey(shard), `rt:{s${shard}}:meta:${productId}:${channel}`)
  await send(productId, channel, 2)
  await until(() => timeline(productId).length >= 3)
  expect(timeline(productId)).toEqual([1, 'gap', 1]) // a new epoch starts its offsets again, after the gap
})

test('every subscription of a shard waits for the same position read, and a shard given up while it is read is not read', async () => {
  const { shard } = fresh()
  const { reader } = recorder()
  const first = reader.add(shard)
  const second = reader.add(shard)
  expect(second).toBe(first) // the second subscriber does not get its reply before the reader stands on the shard
  await second
  expect(reader.readingShards).toContain(shard)
  reader.remove(shard)
  const again = reader.add(shard)
  reader.remove(shard) // its last subscriber left while the position was being read
  await again
  expect(reader.readingShards).not.toContain(shard)
})

test('a shard given up and wanted again while a read from its old cursor is in flight: the entries before the new cursor are skipped, not taken for a gap', async () => {
  const { productId, channel, shard } = fresh()
  const { reader, timeline } = recorder()
  reader.start() // nothing to read yet: the loop waits, and every read from here on goes through the gate below
  // Hold the reader's replies until the shard has been wanted again: the reply then carries entries from the old cursor.
  // Through the prototype, since on a cluster the shard's reader connection is made only when the shard is added.
  const prototype = Redis.prototype as unknown as { xread: (...args: unknown[]) => Promise<unknown> }
  const xread = prototype.xread
  let open!: () => void
  const gate = new Promise<void>((resolve) => (open = resolve))
  let held = 0
  prototype.xread = function (this: Redis, ...args: unknown[]) {
    return xread.apply(this, args).then(async (reply) => {
      if (reply) { held++; await gate }
      return reply
    })
  }
  restore.push(() => (prototype.xread = xread))
  await reader.add(shard)
  await Bun.sleep(50) // the read from the first cursor is in flight
  await send(productId, channel, 1)
  await send(productId, channel, 2)
  await until(() => held === 1) // its reply, with offsets 1 and 2, is waiting
  reader.remove(shard)
  await reader.add(shard) // the new cursor stands on offset 2
  open()
  await send(productId, channel, 3)
  await until(() => timeline(productId).length >= 1)
  await Bun.sleep(100)
  expect(timeline(productId)).toEqual([3])
})
