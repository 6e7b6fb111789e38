// The publish requests one process serves in a turn of its event loop run as one script (shared/realtime/publish-batch.ts):
// each exactly as its own run would (IP limit, quota, publish, in the order they came), one request's failure never
// the others', and the batch bounded. Real Redis; the commands the process sends are watched as they leave.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { ApiError } from '../../shared/errors'
import { windowOf } from '../../shared/fixed-window'
import { channelTop, defaultBudgets, readHistory } from '../../shared/realtime/broker'
import { channelKeys, fanKey, idempotencyClaimKey, publishKeys } from '../../shared/realtime/keys'
import { MAX_BATCH_REQUESTS } from '../../shared/realtime/publish-batch'
import { keyedRequest, publishInOneStep, type RequestOutcome } from '../../shared/realtime/publish-request'
import { redis } from '../../shared/redis/client'
import { interceptCommands } from '../../shared/redis/ioredis-internals'
import { needsOneRedis } from '../helpers'

const policy = { historyTtlSeconds: 60, historySize: 100 }
const input = (productId: string, channel: string, data = '1') => ({ productId, channel, policy, data, id: randomUUID() })
const counter = async (key: string) => Number((await redis().get(key)) ?? 0)

/** Every FCALL this process sends that names a product among its arguments: how many requests it carried. */
const runs: { productId: string; requests: number; keys: number; pooled: number }[] = []
/** Budgets other than the deployment's, as a product's own would be. */
const tight = { ...defaultBudgets(), fanoutMaxBytes: 200 }
let sendCommand: unknown

// One Redis only (the batch spans the counters' keys and the channel's); the file's hooks too, not only its tests.
beforeAll(async () => {
  if (needsOneRedis) return
  // Each set of budgets' function library loaded first (the first call finds it missing, loads it, and calls again).
  const warm = { window: windowOf(`test:batch:${randomUUID()}`, 60), limit: 10 }
  await publishInOneStep([input(randomUUID(), 'warm')], { quota: warm })
  await publishInOneStep([input(randomUUID(), 'warm', '')], { quota: warm }, tight)
  await redis().del(warm.window.key)
  sendCommand = Object.getOwnPropertyDescriptor(redis(), 'sendCommand')?.value
  interceptCommands(redis(), (command, _stream, sendOn) => {
    const { name, args } = command as unknown as { name: string; args: unknown[] }
    if (name.toLowerCase() === 'fcall') {
      // FCALL name, its key count, its keys, its pooled values' count, the values, then three per request.
      const keys = Number(args[1])
      const pooled = Number(args[2 + keys])
      const named = args.map(String).find((arg) => /^[0-9a-f-]{36}$/.test(arg))
      if (named) runs.push({ productId: named, requests: (args.length - 3 - keys - pooled) / 3, keys, pooled })
    }
    return sendOn()
  })
})
afterAll(() => {
  if (needsOneRedis) return
  // The process's client as it was: the watch ends with this file.
  const client = redis() as unknown as Record<string, unknown>
  if (sendCommand === undefined) delete client.sendCommand
  else client.sendCommand = sendCommand
})

const runsOf = (productId: string) => runs.filter((run) => run.productId === productId).map((run) => run.requests)
const offsetOf = (outcome: RequestOutcome) => {
  const [channel] = 'channels' in outcome ? outcome.channels : []
  return channel && 'published' in channel ? channel.published.offset : undefined
}

/**
 * Waits until what `products` published on `channel` (retention 1 s) is past its retention, their channel's keys kept
 * (PERSIST) though their expiry (1.125 s after the last publish) has passed too: the products' next publishes then
 * meet the same state however long the machine pauses between them (entries old, the index's expiry past, keys there),
 * where keys left to expire would be gone for one and not the other.
 */
async function pastRetention(products: string[], channel: string): Promise<void> {
  for (const productId of products) {
    const [hist, meta] = publishKeys(productId, channel).keys
    expect([await redis().persist(hist!), await redis().persist(meta!)]).toEqual([1, 1])
  }
  await Bun.sleep(1300)
}

/** What a channel's publishes leave: its meta hash's offset and bytes, the product's history bytes and its copy, the history. */
async function channelState(productId: string, channel: string, policy: { historyTtlSeconds: number; historySize: number }) {
  const keys = publishKeys(productId, channel).keys
  const [o, b] = await redis().hmget(keys[1]!, 'o', 'b')
  const [sum, copy] = await redis().hmget(keys[5]!, '#', channel)
  const { entries } = await readHistory(productId, channel, policy, { last_n: 100 })
  return { o, b, sum, copy, history: entries.map((e) => [e.offset, JSON.stringify(e.data)]) }
}

describe.skipIf(needsOneRedis)('publishes batched per turn', () => {
  test('requests made in one turn leave as one run; each is answered its own id and offset, in the order they came', async () => {
    const productId = randomUUID()
    const quota = { window: windowOf(`test:batch:${randomUUID()}`, 60), limit: 1000 }
    const inputs = Array.from({ length: 20 }, (_, i) => input(productId, i % 2 === 0 ? 'chat:even' : 'chat:odd', String(i)))
    const outcomes = await Promise.all(inputs.map((one) => publishInOneStep([one], { quota })))
    expect(runsOf(productId)).toEqual([20])
    // What the requests share is sent once: each distinct key of the two channels and the quota's counter.
    const [run] = runs.filter((r) => r.productId === productId)
    const distinct = new Set([quota.window.key, ...publishKeys(productId, 'chat:even').keys, ...publishKeys(productId, 'chat:odd').keys])
    expect(run!.keys).toBe(distinct.size)
    // And each distinct value once: no IP limit (-1) and its expiry (0), the quota's limit and expiry, the history's
    // size and retention, one epoch, the product, two channels, the payload field, no sender ('').
    expect(run!.pooled).toBe(12)
    expect(outcomes.map(offsetOf)).toEqual(inputs.map((_, i) => Math.floor(i / 2) + 1))
    outcomes.forEach((outcome, i) => {
      expect(outcome).toEqual({ channels: [{ published: { id: inputs[i]!.id, offset: Math.floor(i / 2) + 1, epoch: expect.any(String) }, replayed: false }] })
    })
    const { entries } = await readHistory(productId, 'chat:odd', policy, { last_n: 100 })
    expect(entries.map((entry) => [entry.offset, entry.id, String(entry.data)])).toEqual(inputs.filter((_, i) => i % 2 === 1).map((one, k) => [k + 1, one.id, one.data]))
    expect(await counter(quota.window.key)).toBe(20)
    // A later turn is a run of its own.
    expect(offsetOf(await publishInOneStep([input(productId, 'chat:even')], { quota }))).toBe(11)
    expect(runsOf(productId)).toEqual([20, 1])
    await redis().del(quota.window.key)
  })

  test('the IP limit and the quota count each request of a batch in order, exactly as one run each: past either, the request is refused with its count', async () => {
    const productId = randomUUID()
    const ip = { window: windowOf(`test:batch:${randomUUID()}`, 60), limit: 7 }
    const quota = { window: windowOf(`test:batch:${randomUUID()}`, 60), limit: 4 }
    const outcomes = await Promise.all(Array.from({ length: 10 }, () => publishInOneStep([input(productId, 'chat:a')], { ip, quota })))
    expect(runsOf(productId)).toEqual([10])
    expect(outcomes).toEqual([
      ...[1, 2, 3, 4].map((offset) => ({ channels: [{ published: { id: expect.any(String), offset, epoch: expect.any(String) }, replayed: false }] })),
      { channels: [{ overQuota: 5 }] }, { channels: [{ overQuota: 6 }] }, { channels: [{ overQuota: 7 }] },
      { ipRefused: 8 }, { ipRefused: 9 }, { ipRefused: 10 },
    ])
    // Refused by the IP limit: the quota is not counted; refused by the quota: nothing published.
    expect([await counter(ip.window.key), await counter(quota.window.key)]).toEqual([10, 7])
    expect(await channelTop(productId, 'chat:a')).toMatchObject({ offset: 4 })
    await redis().del(ip.window.key, quota.window.key)
  })

  test("a request whose command fails inside the batch gets its 503; the others of the batch publish as if it were not there", async () => {
    const productId = randomUUID()
    const quota = { window: windowOf(`test:batch:${randomUUID()}`, 60), limit: 100 }
    // A channel whose meta key holds a string: the publish's HMGET of it fails (WRONGTYPE), as a single run would.
    await redis().set(channelKeys(productId, 'chat:broken').meta, 'not a hash')
    const settled = await Promise.allSettled([
      publishInOneStep([input(productId, 'chat:a')], { quota }),
      publishInOneStep([input(productId, 'chat:broken')], { quota }),
      publishInOneStep([input(productId, 'chat:a')], { quota }),
    ])
    expect(runsOf(productId)).toEqual([3])
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled'])
    expect(settled.filter((s) => s.status === 'fulfilled').map((s) => offsetOf((s as PromiseFulfilledResult<RequestOutcome>).value))).toEqual([1, 2])
    const failure = (settled[1] as PromiseRejectedResult).reason
    expect(failure).toBeInstanceOf(ApiError)
    expect(failure.status).toBe(503)
    expect(String(failure.cause?.message)).toContain('WRONGTYPE')
    expect(await channelTop(productId, 'chat:a')).toMatchObject({ offset: 2 })
    expect(await counter(quota.window.key)).toBe(3)
    await redis().del(quota.window.key, channelKeys(productId, 'chat:broken').meta)
  })

  test(`a batch holds at most ${MAX_BATCH_REQUESTS} requests: more in one turn leave as several runs, in order`, async () => {
    const productId = randomUUID()
    const quota = { window: windowOf(`test:batch:${randomUUID()}`, 60), limit: 1000 }
    const count = 2 * MAX_BATCH_REQUESTS + 5
    const outcomes = await Promise.all(Array.from({ length: count }, () => publishInOneStep([input(productId, 'chat:many')], { quota })))
    expect(runsOf(productId)).toEqual([MAX_BATCH_REQUESTS, MAX_BATCH_REQUESTS, 5])
    expect(outcomes.map(offsetOf)).toEqual(Array.from({ length: count }, (_, i) => i + 1))
    await redis().del(quota.window.key)
  })

  test('a batch names at most 127 distinct keys: requests that would pass it open the next run', async () => {
    const products = Array.from({ length: 20 }, () => randomUUID())
    const quotas = products.map(() => ({ window: windowOf(`test:batch:${randomUUID()}`, 60), limit: 10 }))
    const outcomes = await Promise.all(products.map((productId, i) => publishInOneStep([input(productId, 'chat:own')], { quota: quotas[i]! })))
    // Up to eight keys of its own each (its counter, its channel's two, its budgets' three; a shard's fan-out stream
    // and counter shared with others on the shard): not all twenty fit in 127, and each is answered as its own run would.
    const sizes = runs.filter((run) => (products as string[]).includes(run.productId)).map((run) => run.requests)
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(20)
    expect(sizes.length).toBeGreaterThan(1)
    expect(outcomes.map(offsetOf)).toEqual(products.map(() => 1))
    await redis().del(...quotas.map((q) => q.window.key))
  })

  test('requests of every shape in one batch each get their own keys and values: products, channels, stored or not, a sender, counters and their expiries', async () => {
    const [a, b] = [randomUUID(), randomUUID()]
    const ip = { window: windowOf(`test:batch:${randomUUID()}`, 60), limit: 100 }
    const quotaA = { window: windowOf(`test:batch:${randomUUID()}`, 1), limit: 100 }
    const quotaB = { window: windowOf(`test:batch:${randomUUID()}`, 60), limit: 100 }
    const event = { productId: b, channel: 'ev:y', policy: { historyTtlSeconds: 0, historySize: 0 }, data: 'e', id: randomUUID(), senderConnectionId: 'conn-1' }
    const stored = input(a, 'chat:x', 's')
    const other = input(a, 'chat:z', 'z')
    const outcomes = await Promise.all([
      publishInOneStep([stored], { ip, quota: quotaA }),
      publishInOneStep([event], { quota: quotaB }),
      publishInOneStep([other], { quota: quotaA }),
    ])
    expect(runsOf(a)).toEqual([3])
    expect(outcomes.map(offsetOf)).toEqual([1, undefined, 1])
    expect(outcomes[1]).toEqual({ channels: [{ published: { id: event.id }, replayed: false }] })
    // The fan-out entries, as the gateways read them.
    const entryOf = async (productId: string, channel: string, id: string) => {
      const { shard } = publishKeys(productId, channel)
      const entries = (await redis().xrevrange(fanKey(shard), '+', '-', 'COUNT', 200)).map(([, fields]) => {
        const record: Record<string, string> = {}
        for (let i = 0; i < fields.length; i += 2) record[fields[i]!] = fields[i + 1]!
        return record
      })
      return entries.find((entry) => entry.id === id)
    }
    const epochs = outcomes.map((o) => ('channels' in o && 'published' in o.channels[0]! ? o.channels[0].published.epoch : undefined))
    expect(await entryOf(a, 'chat:x', stored.id)).toMatchObject({ product: a, channel: 'chat:x', d: 's', offset: '1', epoch: epochs[0] })
    expect(await entryOf(b, 'ev:y', event.id)).toMatchObject({ product: b, channel: 'ev:y', d: 'e', sender: 'conn-1' })
    expect(await entryOf(b, 'ev:y', event.id)).not.toHaveProperty('offset')
    expect(await entryOf(a, 'chat:z', other.id)).toMatchObject({ product: a, channel: 'chat:z', d: 'z', offset: '1', epoch: epochs[2] })
    expect(await entryOf(a, 'chat:x', stored.id)).not.toHaveProperty('sender')
    // Each counter counted its own requests, with its own window's expiry.
    expect([await counter(ip.window.key), await counter(quotaA.window.key), await counter(quotaB.window.key)]).toEqual([1, 2, 1])
    const [ipTtl, quotaATtl, quotaBTtl] = await Promise.all([ip, quotaA, quotaB].map((q) => redis().ttl(q.window.key)))
    expect(ipTtl).toBeGreaterThan(60)
    expect(quotaATtl).toBeLessThanOrEqual(6)
    expect(quotaATtl).toBeGreaterThan(0) // hit twice: the run's own count written at its end kept the first hit's expiry
    expect(quotaBTtl).toBeGreaterThan(60)
    await redis().del(ip.window.key, quotaA.window.key, quotaB.window.key)
  })

  test('consecutive requests to one channel under other counters, or none, each count in their own (a hot channel\'s references reused only when all match)', async () => {
    const productId = randomUUID()
    const [ipA, ipB] = [windowOf(`test:batch:${randomUUID()}`, 60), windowOf(`test:batch:${randomUUID()}`, 60)]
    const quota = { window: windowOf(`test:batch:${randomUUID()}`, 60), limit: 100 }
    const outcomes = await Promise.all([
      publishInOneStep([input(productId, 'chat:hot')], { ip: { window: ipA, limit: 1 }, quota }),
      publishInOneStep([input(productId, 'chat:hot')], { ip: { window: ipA, limit: 1 }, quota }),
      publishInOneStep([input(productId, 'chat:hot')], { ip: { window: ipB, limit: 5 }, quota }),
      publishInOneStep([input(productId, 'chat:hot')], { quota }),
      publishInOneStep([input(productId, 'chat:hot')], { ip: { window: ipA, limit: 5 }, quota }),
    ])
    expect(runsOf(productId)).toEqual([5])
    // ipA's limit of 1 refuses the second; the third counts in ipB, the fourth in none, the fifth in ipA under its own limit.
    expect(outcomes.map((o) => ('ipRefused' in o ? `ip ${o.ipRefused}` : offsetOf(o)))).toEqual([1, 'ip 2', 2, 3, 4])
    expect([await counter(ipA.key), await counter(ipB.key), await counter(quota.window.key)]).toEqual([3, 1, 4])
    await redis().del(ipA.key, ipB.key, quota.window.key)
  })

  test('a counter the run hits again goes on from what it held before, each request with its own count, and keeps its expiry', async () => {
    const productId = randomUUID()
    const quota = { window: windowOf(`test:batch:${randomUUID()}`, 60), limit: 7 }
    await redis().set(quota.window.key, '5', 'EX', 100)
    const outcomes = await Promise.all([1, 2, 3].map(() => publishInOneStep([input(productId, 'chat:before')], { quota })))
    expect(runsOf(productId)).toEqual([3])
    // 6 and 7 fit the limit of 7; the third is the counter's 8th hit.
    expect(outcomes.map((o) => ('channels' in o && 'overQuota' in o.channels[0]! ? `over ${o.channels[0].overQuota}` : offsetOf(o)))).toEqual([1, 2, 'over 8'])
    expect(await counter(quota.window.key)).toBe(8)
    // Not the window's expiry (the run did not make the counter): the one it had, neither reset nor dropped.
    expect(await redis().ttl(quota.window.key)).toBeGreaterThan(90)
    await redis().del(quota.window.key)
  })

  test('a channel published many times in one run holds what as many runs of one leave: offsets, history, its meta hash and the product\'s history bytes, through age and size trims', async () => {
    // History of 8 (trimmed by size every second offset) kept 1 s (trimmed by age at the first publish after it).
    const short = { historyTtlSeconds: 1, historySize: 8 }
    const [batched, single] = [randomUUID(), randomUUID()]
    const channel = 'chat:same'
    const one = (productId: string, n: number) => ({ productId, channel, policy: short, data: `{"n":${n}}`, id: randomUUID() })
    const quota = { window: windowOf(`test:batch:${randomUUID()}`, 60), limit: 1000 }
    const state = (productId: string) => channelState(productId, channel, short)
    const rounds = [{ from: 1, to: 11 }, { from: 12, to: 30 }]
    for (const { from, to } of rounds) {
      const ns = Array.from({ length: to - from + 1 }, (_, i) => from + i)
      const outcomes = await Promise.all(ns.map((n) => publishInOneStep([one(batched, n)], { quota })))
      for (const n of ns) await publishInOneStep([one(single, n)], { quota })
      expect(outcomes.map(offsetOf)).toEqual(ns)
      expect(await state(batched)).toEqual(await state(single))
      // The first round's entries are over a second old at the next round's first publish: trimmed by age there.
      if (from === 1) await pastRetention([batched, single], channel)
    }
    expect(runsOf(batched)).toEqual([11, 19])
    expect((await state(batched)).history).toEqual([23, 24, 25, 26, 27, 28, 29, 30].map((n) => [n, `{"n":${n}}`]))
    await redis().del(quota.window.key)
  })

  test('a publish refused by the history budget after trimming by age leaves the run what it trimmed: the next in the run is charged as its own run would be', async () => {
    // The channel costs 548 bytes, a small entry about 108: five fit 1 400, a 1 000-byte payload never does.
    const budgets = { ...defaultBudgets(), historyMaxBytes: 1400 }
    const short = { historyTtlSeconds: 1, historySize: 100 }
    const [batched, single] = [randomUUID(), randomUUID()]
    const channel = 'chat:tight'
    const one = (productId: string, data: string) => ({ productId, channel, policy: short, data, id: randomUUID() })
    const quota = { window: windowOf(`test:batch:${randomUUID()}`, 60), limit: 1000 }
    const state = (productId: string) => channelState(productId, channel, short)
    for (const productId of [batched, single]) {
      for (let n = 1; n <= 5; n++) expect(offsetOf(await publishInOneStep([one(productId, `{"n":${n}}`)], { quota }, budgets))).toBe(n)
    }
    await pastRetention([batched, single], channel) // all five older than the window
    const second = [`"${'x'.repeat(1000)}"`, '{"n":6}', '{"n":7}']
    const outcomes = await Promise.all(second.map((data) => publishInOneStep([one(batched, data)], { quota }, budgets)))
    const alone = []
    for (const data of second) alone.push(await publishInOneStep([one(single, data)], { quota }, budgets))
    expect(runsOf(batched).at(-1)).toBe(3)
    const shape = (o: RequestOutcome) => ('channels' in o && 'refused' in o.channels[0]! ? o.channels[0].refused.status : offsetOf(o))
    expect(outcomes.map(shape)).toEqual([429, 6, 7])
    expect(alone.map(shape)).toEqual([429, 6, 7])
    expect(await state(batched)).toEqual(await state(single))
    await redis().del(quota.window.key)
  })

  test('what a run remembers of a channel is its own: a publish in between by another script (a keyed one) is seen by the next run', async () => {
    const productId = randomUUID()
    const quota = { window: windowOf(`test:batch:${randomUUID()}`, 60), limit: 100 }
    expect(offsetOf(await publishInOneStep([input(productId, 'chat:between')], { quota }))).toBe(1)
    const keyed = keyedRequest(randomUUID(), Buffer.from('between'))
    expect(offsetOf(await publishInOneStep([input(productId, 'chat:between')], { quota, keyed }))).toBe(2)
    expect(offsetOf(await publishInOneStep([input(productId, 'chat:between')], { quota }))).toBe(3)
    const { entries } = await readHistory(productId, 'chat:between', policy, { last_n: 10 })
    expect(entries.map((e) => e.offset)).toEqual([1, 2, 3])
    await redis().del(quota.window.key, idempotencyClaimKey(productId, keyed.keyHash))
  })

  test('a channel whose epoch another master numbered, published several times in one run, starts one new epoch at the first and goes on in it', async () => {
    const productId = randomUUID()
    const quota = { window: windowOf(`test:batch:${randomUUID()}`, 60), limit: 100 }
    const first = await publishInOneStep([input(productId, 'chat:moved')], { quota })
    const { meta } = channelKeys(productId, 'chat:moved')
    await redis().hset(meta, 'g', 'f'.repeat(40)) // as a failover leaves it: another replication id
    const outcomes = await Promise.all([1, 2, 3].map(() => publishInOneStep([input(productId, 'chat:moved')], { quota })))
    const epochOf = (o: RequestOutcome) => ('channels' in o && 'published' in o.channels[0]! ? o.channels[0].published.epoch : undefined)
    expect(outcomes.map(offsetOf)).toEqual([1, 2, 3])
    expect(new Set(outcomes.map(epochOf)).size).toBe(1)
    expect(epochOf(outcomes[0]!)).not.toBe(epochOf(first))
    await redis().del(quota.window.key)
  })

  test('a batch holds at most 1 Mi characters of payloads: past it the next request opens the next run', async () => {
    const productId = randomUUID()
    const quota = { window: windowOf(`test:batch:${randomUUID()}`, 60), limit: 100 }
    const big = 'y'.repeat(400_000)
    const outcomes = await Promise.all([1, 2, 3].map(() => publishInOneStep([input(productId, 'chat:big', big)], { quota })))
    expect(runsOf(productId)).toEqual([2, 1])
    expect(outcomes.map(offsetOf)).toEqual([1, 2, 3])
    await redis().del(quota.window.key)
  })

  test('requests under other budgets in the same turn run apart, each under its own', async () => {
    const productId = randomUUID()
    const quota = { window: windowOf(`test:batch:${randomUUID()}`, 60), limit: 100 }
    const big = 'x'.repeat(300)
    const [under, refused, alsoUnder] = await Promise.all([
      publishInOneStep([input(productId, 'chat:a', big)], { quota }),
      publishInOneStep([input(productId, 'chat:b', big)], { quota }, tight),
      publishInOneStep([input(productId, 'chat:a', big)], { quota }),
    ])
    expect(runsOf(productId).sort()).toEqual([1, 2])
    expect([offsetOf(under!), offsetOf(alsoUnder!)]).toEqual([1, 2])
    const [outcome] = 'channels' in refused! ? refused.channels : []
    expect(outcome && 'refused' in outcome ? outcome.refused.code : null).toBe('fanout_budget_exceeded')
    await redis().del(quota.window.key)
  })
})
