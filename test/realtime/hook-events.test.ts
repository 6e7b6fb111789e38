// Realtime webhook events in Redis: presence and occupancy de-flapped once per identity and channel, appended to the
// shard's hooks stream by the scripts themselves; the consumer-group reader acknowledges and claims. Real Redis; the
// grace is shortened by passing settings (the gateway end to end is test/gateway/hook-events.test.ts).
import { afterAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { closeRedis, redis } from '../../shared/redis/client'
import { consumeHookEvents, checkDueHooks, dropIdleConsumers, type HookEvent, HOOKS_GROUP, toHookEvent, trimAcknowledged } from '../../shared/realtime/hook-events'
import type { HookSettings } from '../../shared/realtime/hooks'
import { channelKeys, hooksDueKey } from '../../shared/realtime/keys'
import { dueMember } from '../../shared/realtime/hooks'
import { shardOf } from '../../shared/realtime/shards'
import { checkOccupancy, holdChannels, releaseChannels } from '../../shared/realtime/occupancy'
import { enterPresence, leavePresence, sweepPresence } from '../../shared/realtime/presence'
import { config } from '../../shared/config'

// Long enough that a loaded machine's round trips between a leave and the rejoin stay well inside it.
const HOOKS: HookSettings = { graceMs: 1000, retentionMs: 3_600_000, productMaxBytes: 16 * 1024 * 1024 }
const BUDGET = { fanoutRetentionMs: config.realtime.fanoutRetentionMs, fanoutMaxBytes: config.realtime.productFanoutMaxBytes }
const fresh = () => ({ productId: randomUUID(), channel: `room:${randomUUID().slice(0, 8)}` })

afterAll(async () => {
  await closeRedis()
})

/** The events of one channel in its shard's stream, in order. */
async function eventsOf(where: { productId: string; channel: string }): Promise<HookEvent[]> {
  const keys = channelKeys(where.productId, where.channel)
  const entries = (await redis().xrange(keys.hooks, '-', '+')) as [string, string[]][]
  // Other products' entries on the shard may be anything (another test's bad one): skipped, never thrown on.
  return entries.flatMap(([id, fields]) => toHookEvent(keys.shard, id, fields) ?? [])
    .filter((event) => event.productId === where.productId && event.channel === where.channel)
}

const kinds = async (where: { productId: string; channel: string }) => (await eventsOf(where)).map((e) => [e.kind, e.identity ?? null])

/** Runs the due checks of the channel's shard until `ms` have passed (what the webhooks process does every second). */
async function checkFor(where: { productId: string; channel: string }, ms: number): Promise<void> {
  const shard = channelKeys(where.productId, where.channel).shard
  for (const until = Date.now() + ms; Date.now() < until; await Bun.sleep(50)) await checkDueHooks(shard, HOOKS)
}

const enter = (where: { productId: string; channel: string }, identity: string, connectionId: string, extra: { info?: unknown; ttlSeconds?: number } = {}) =>
  enterPresence({ ...where, identity, connectionId, ...extra }, BUDGET, HOOKS)
const leave = (where: { productId: string; channel: string }, identity: string, connectionId: string) =>
  leavePresence({ ...where, identity, connectionId }, BUDGET, HOOKS)

describe('presence events', () => {
  test('two tabs of one identity join and one leaves: one member_added, no member_removed', async () => {
    const where = fresh()
    await enter(where, 'alice', 'tab1', { info: { name: 'Alice' } })
    await enter(where, 'alice', 'tab2')
    await leave(where, 'alice', 'tab1')
    await checkFor(where, HOOKS.graceMs + 300)
    const events = await eventsOf(where)
    expect(events.map((e) => e.kind)).toEqual(['presence.member_added'])
    expect(events[0]).toMatchObject({
      productId: where.productId, channel: where.channel, identity: 'alice',
      data: { channel: where.channel, namespace: 'room', identity: 'alice', info: { name: 'Alice' }, sequence: events[0]!.sequence },
    })
    expect(events[0]!.id).toMatch(/^rt_\d+_\d+-\d+$/)
    // The sequence is the stream entry's id read as ms * 1000 + n: increasing per channel, never reset.
    const [ms, n] = events[0]!.id.split('_')[2]!.split('-').map(Number)
    expect(events[0]!.sequence).toBe(ms! * 1000 + n!)
  })

  test('flapping (leave and rejoin within the grace, again and again) gives one added, and one removed once gone for the grace', async () => {
    // Each rejoin must come within the grace of its leave, or it is a real absence: a round where one took longer here
    // (measured around both calls, so the gap in Redis was shorter) is not flapping, and runs again on a fresh channel.
    let where = fresh()
    for (let attempt = 0, inGrace = false; !inGrace && attempt < 5; attempt++) {
      where = fresh()
      inGrace = true
      await enter(where, 'bob', 'c1')
      for (let i = 0; i < 5; i++) {
        const left = Date.now()
        await leave(where, 'bob', `c${i + 1}`)
        await checkFor(where, 100)
        await enter(where, 'bob', `c${i + 2}`)
        if (Date.now() - left >= HOOKS.graceMs) inGrace = false
      }
    }
    const before = Date.now()
    await leave(where, 'bob', 'c6')
    const after = Date.now()
    await checkFor(where, HOOKS.graceMs / 2)
    const early = await kinds(where)
    // Its removal is due a grace after the leave (which ran after `before`): only while that has not passed is the
    // absence of a removal proven (a loaded machine may take longer than the grace to get here).
    if (Date.now() < before + HOOKS.graceMs) expect(early).toEqual([['presence.member_added', 'bob']])
    await checkFor(where, HOOKS.graceMs + 300)
    const events = await eventsOf(where)
    expect(events.map((e) => e.kind)).toEqual(['presence.member_added', 'presence.member_removed'])
    expect(events[1]!.sequence).toBeGreaterThan(events[0]!.sequence)
    // A removal happened when the last entry went, not when the grace ended.
    expect(Date.parse(events[1]!.occurredAt)).toBeGreaterThanOrEqual(before - 50) // one host: Redis' clock and ours agree
    expect(Date.parse(events[1]!.occurredAt)).toBeLessThanOrEqual(after + 50)
    expect(events[1]!.data).toEqual({ channel: where.channel, namespace: 'room', identity: 'bob', occurredAt: events[1]!.occurredAt, sequence: events[1]!.sequence })
  })

  test('an entry nobody refreshes expires (its gateway died): removed once, found by the due checks alone', async () => {
    const where = fresh()
    await enter(where, 'ghost', 'dead-gateway', { ttlSeconds: 1 })
    await enter(where, 'other', 'live')
    await checkFor(where, 1000 + HOOKS.graceMs + 500)
    expect(await kinds(where)).toEqual([['presence.member_added', 'ghost'], ['presence.member_added', 'other'], ['presence.member_removed', 'ghost']])
    await leave(where, 'other', 'live')
  })

  test('identities leaving for good each get their removal, another identity staying changes nothing', async () => {
    const where = fresh()
    await enter(where, 'a', '1')
    await enter(where, 'b', '2')
    await leave(where, 'a', '1')
    await checkFor(where, HOOKS.graceMs + 300)
    await enter(where, 'a', '3') // after the grace: a new add
    expect(await kinds(where)).toEqual([['presence.member_added', 'a'], ['presence.member_added', 'b'], ['presence.member_removed', 'a'], ['presence.member_added', 'a']])
  })

  test('past the product\'s hook budget on the shard events are dropped, never the presence change', async () => {
    const where = fresh()
    const tight = { ...HOOKS, productMaxBytes: 600 }
    for (let i = 0; i < 10; i++) await enterPresence({ ...where, identity: `u${i}`, connectionId: `c${i}` }, BUDGET, tight)
    const events = await eventsOf(where)
    expect(events.length).toBeGreaterThan(0)
    expect(events.length).toBeLessThan(10)
    expect((await redis().hlen(channelKeys(where.productId, where.channel).presCount))).toBe(10)
  })
})

describe('occupancy events', () => {
  test('occupied with the first gateway, vacated once the last has been gone for the grace; a return within it cancels both', async () => {
    const where = fresh()
    await holdChannels('gw-a', [where], 10_000, HOOKS)
    await holdChannels('gw-b', [where], 10_000, HOOKS)
    await releaseChannels('gw-a', [where], HOOKS)
    await releaseChannels('gw-b', [where], HOOKS)
    await checkFor(where, HOOKS.graceMs / 2)
    await holdChannels('gw-a', [where], 10_000, HOOKS) // back within the grace
    await checkFor(where, HOOKS.graceMs + 200)
    expect(await kinds(where)).toEqual([['channel.occupied', null]])
    await releaseChannels('gw-a', [where], HOOKS)
    await checkFor(where, HOOKS.graceMs + 300)
    const events = await eventsOf(where)
    expect(events.map((e) => e.kind)).toEqual(['channel.occupied', 'channel.vacated'])
    expect(events[1]!.data).toEqual({ channel: where.channel, namespace: 'room', occurredAt: events[1]!.occurredAt, sequence: events[1]!.sequence })
    expect(events[1]!.sequence).toBeGreaterThan(events[0]!.sequence)
  })

  test('a lease nobody refreshes (its gateway died) expires: vacated once', async () => {
    const where = fresh()
    await holdChannels('gw-dead', [where], 500, HOOKS)
    await checkFor(where, 500 + HOOKS.graceMs + 400)
    await checkOccupancy([where], HOOKS)
    expect(await kinds(where)).toEqual([['channel.occupied', null], ['channel.vacated', null]])
  })
})

/** A product and a base name whose channels `<base><suffix>` all hash onto one shard. */
function sameShard(suffixes: string[]): { productId: string; channels: string[] } {
  for (;;) {
    const productId = randomUUID()
    const base = `room:${randomUUID().slice(0, 8)}`
    const channels = suffixes.map((suffix) => base + suffix)
    if (new Set(channels.map((channel) => shardOf(productId, channel))).size === 1) return { productId, channels }
  }
}

describe('channels apart', () => {
  test('channels X, X:gone, X:n, X:exp of one product on one shard keep their presence and occupancy apart', async () => {
    // One pair per suffix, each pair on one shard (all six on one shard would take a million hashes to find).
    const pairs = [':gone', ':n', ':exp', ':presx', ':occgone'].map((suffix) => sameShard(['', suffix]))
    const all = pairs.flatMap(({ productId, channels }) => channels.map((channel) => ({ productId, channel })))
    for (const where of all) {
      await enter(where, 'amy', 'c1')
      await holdChannels('gw', [where], 10_000, HOOKS)
    }
    for (const where of all) {
      await leave(where, 'amy', 'c1')
      await releaseChannels('gw', [where], HOOKS)
    }
    const shards = [...new Set(all.map((where) => channelKeys(where.productId, where.channel).shard))]
    for (const until = Date.now() + HOOKS.graceMs + 300; Date.now() < until; await Bun.sleep(50)) {
      for (const shard of shards) await checkDueHooks(shard, HOOKS)
    }
    for (const where of all) {
      const got = await kinds(where)
      expect(got.slice(0, 2)).toEqual([['presence.member_added', 'amy'], ['channel.occupied', null]])
      // Removal and vacate are due at about the same time: in the order the due checks reached them.
      expect(got.slice(2).sort()).toEqual([['channel.vacated', null], ['presence.member_removed', 'amy']])
    }
  })

  test('a due check that fails (its keys broken) is pushed back, and every other channel of the shard is still checked', async () => {
    const { productId, channels } = sameShard(['-poisoned', '-healthy'])
    const poisoned = { productId, channel: channels[0]! }
    const healthy = { productId, channel: channels[1]! }
    const keys = channelKeys(poisoned.productId, poisoned.channel)
    await redis().set(keys.presExp, 'not a sorted set', 'PX', 60_000)
    await redis().zadd(keys.hooksDue, 0, dueMember('p', poisoned.productId, poisoned.channel)) // the oldest due entry
    await enter(healthy, 'ivy', 'c1')
    await leave(healthy, 'ivy', 'c1')
    await checkFor(healthy, HOOKS.graceMs + 300)
    expect(await kinds(healthy)).toEqual([['presence.member_added', 'ivy'], ['presence.member_removed', 'ivy']])
    const retry = Number(await redis().zscore(hooksDueKey(keys.shard), dueMember('p', poisoned.productId, poisoned.channel)))
    expect(retry).toBeGreaterThan(Date.now() + 30_000)
    await redis().del(keys.presExp)
    await redis().zrem(hooksDueKey(keys.shard), dueMember('p', poisoned.productId, poisoned.channel))
  })
})

describe('sweeps go on past a broken roster', () => {
  test('a gateway\'s sweep whose first batch fails still sweeps the later batches, and then reports the failure', async () => {
    const broken = fresh()
    await redis().set(channelKeys(broken.productId, broken.channel).presExp, 'not a sorted set', 'PX', 60_000)
    const target = fresh()
    await enter(target, 'lee', 'c1', { ttlSeconds: 1 })
    await Bun.sleep(1100)
    const channels = [broken, ...Array.from({ length: 219 }, fresh), target] // the target in the second batch of 200
    expect(await sweepPresence(channels, HOOKS).then(() => 'swept', () => 'failed')).toBe('failed')
    expect(await redis().zcard(channelKeys(target.productId, target.channel).presExp)).toBe(0)
    await redis().del(channelKeys(broken.productId, broken.channel).presExp)
  })
})

describe('the budget keeps adds and removals paired', () => {
  test('a removal whose add was announced is never dropped; one whose add was dropped never comes; drops are counted', async () => {
    const where = fresh()
    const tight = { ...HOOKS, productMaxBytes: 600 }
    for (let i = 0; i < 10; i++) await enterPresence({ ...where, identity: `u${i}`, connectionId: `c${i}` }, BUDGET, tight)
    for (let i = 0; i < 10; i++) await leavePresence({ ...where, identity: `u${i}`, connectionId: `c${i}` }, BUDGET, tight)
    const shard = channelKeys(where.productId, where.channel).shard
    for (const until = Date.now() + tight.graceMs + 300; Date.now() < until; await Bun.sleep(50)) await checkDueHooks(shard, tight)
    const events = await eventsOf(where)
    const added = events.filter((e) => e.kind === 'presence.member_added').map((e) => e.identity).sort()
    const removed = events.filter((e) => e.kind === 'presence.member_removed').map((e) => e.identity).sort()
    expect(added.length).toBeGreaterThan(0)
    expect(added.length).toBeLessThan(10)
    expect(removed).toEqual(added)
    expect(Number(await redis().get(channelKeys(where.productId, where.channel).hookDropped))).toBeGreaterThanOrEqual(2 * (10 - added.length))
  })

  test('a vacate whose occupied was announced comes past the budget; one whose occupied was dropped does not', async () => {
    const { productId, channels } = sameShard(['-first', '-second'])
    const first = { productId, channel: channels[0]! }
    const second = { productId, channel: channels[1]! }
    const tight = { ...HOOKS, productMaxBytes: 250 } // room for one occupied
    await holdChannels('gw', [first], 10_000, tight)
    await holdChannels('gw', [second], 10_000, tight)
    await releaseChannels('gw', [first, second], tight)
    for (const until = Date.now() + tight.graceMs + 300; Date.now() < until; await Bun.sleep(50)) await checkDueHooks(channelKeys(productId, first.channel).shard, tight)
    expect(await kinds(first)).toEqual([['channel.occupied', null], ['channel.vacated', null]])
    expect(await kinds(second)).toEqual([])
  })
})

describe('removals outlive the roster', () => {
  test('an entry whose roster keys expired before any check found it expired is still removed, when it expired', async () => {
    const where = fresh()
    await enter(where, 'kim', 'c1', { ttlSeconds: 1 })
    const keys = channelKeys(where.productId, where.channel)
    await Bun.sleep(1100)
    const expiredBy = Date.now()
    // As PRESENCE_KEY_GRACE_MS after the expiry with no check meanwhile: the roster's keys are gone.
    await redis().del(keys.pres, keys.presCount, keys.presExp)
    await checkFor(where, HOOKS.graceMs + 300)
    const events = await eventsOf(where)
    expect(events.map((e) => [e.kind, e.identity])).toEqual([['presence.member_added', 'kim'], ['presence.member_removed', 'kim']])
    expect(Date.parse(events[1]!.occurredAt)).toBeLessThanOrEqual(expiredBy)
  })
})

describe('the reader', () => {
  async function collect(consumer: string, where: { productId: string }, options: { claimIdleMs?: number; hang?: boolean } = {}) {
    const seen: HookEvent[] = []
    const abort = new AbortController()
    const done = consumeHookEvents({
      consumer, signal: abort.signal, checkDueMs: 0, claimIdleMs: options.claimIdleMs ?? 60_000,
      handle: async (events) => {
        seen.push(...events.filter((e) => e.productId === where.productId))
        if (options.hang && events.some((e) => e.productId === where.productId)) await new Promise(() => {})
      },
    })
    return { seen, stop: async () => { abort.abort(); await Promise.race([done, Bun.sleep(3000)]) } }
  }

  test('acknowledged events are not read again by another consumer of the group', async () => {
    const where = fresh()
    const first = await collect(`test-${randomUUID()}`, where)
    await enter(where, 'x', '1')
    await enter(where, 'y', '2')
    for (let i = 0; i < 50 && first.seen.length < 2; i++) await Bun.sleep(100)
    expect(first.seen.map((e) => e.identity)).toEqual(['x', 'y'])
    await first.stop()
    const second = await collect(`test-${randomUUID()}`, where, { claimIdleMs: 100 })
    await enter(where, 'z', '3')
    for (let i = 0; i < 50 && second.seen.length < 1; i++) await Bun.sleep(100)
    await Bun.sleep(500)
    expect(second.seen.map((e) => e.identity)).toEqual(['z'])
    await second.stop()
  }, 15_000)

  test('a killed reader\'s pending events are claimed by another once idle, and acknowledged there', async () => {
    const where = fresh()
    const dead = await collect(`test-${randomUUID()}`, where, { hang: true })
    await enter(where, 'p', '1')
    for (let i = 0; i < 50 && dead.seen.length < 1; i++) await Bun.sleep(100)
    expect(dead.seen.map((e) => e.identity)).toEqual(['p'])
    await dead.stop() // its handler never resolved: never acknowledged
    const heir = await collect(`test-${randomUUID()}`, where, { claimIdleMs: 500 })
    for (let i = 0; i < 80 && heir.seen.length < 1; i++) await Bun.sleep(100)
    expect(heir.seen.map((e) => [e.identity, e.id])).toEqual([['p', dead.seen[0]!.id]])
    await Bun.sleep(300)
    await heir.stop()
    const keys = channelKeys(where.productId, where.channel)
    const pending = (await redis().xpending(keys.hooks, 'webhooks', '-', '+', 1000)) as [string][]
    expect(pending.map(([id]) => id)).not.toContain(dead.seen[0]!.id.split('_')[2])
  }, 20_000)

  test('acknowledged entries are trimmed away; pending and undelivered ones stay', async () => {
    const key = `test:{hooks-trim-${randomUUID()}}:hooks`
    await redis().xgroup('CREATE', key, HOOKS_GROUP, '0', 'MKSTREAM')
    const ids: string[] = []
    for (let i = 1; i <= 6; i++) ids.push((await redis().xadd(key, `${i}-0`, 'n', String(i)))!)
    await redis().xreadgroup('GROUP', HOOKS_GROUP, 'trimmer', 'COUNT', 4, 'STREAMS', key, '>') // 1-4 delivered
    await redis().xack(key, HOOKS_GROUP, '1-0', '2-0', '4-0') // 3 stays pending
    await trimAcknowledged(key)
    expect(((await redis().xrange(key, '-', '+')) as [string, string[]][]).map(([id]) => id)).toEqual(['3-0', '4-0', '5-0', '6-0'])
    await redis().xack(key, HOOKS_GROUP, '3-0')
    await trimAcknowledged(key)
    // Nothing pending: everything before the last delivered goes; 5 and 6 were never delivered.
    expect(((await redis().xrange(key, '-', '+')) as [string, string[]][]).map(([id]) => id)).toEqual(['4-0', '5-0', '6-0'])
    await redis().del(key)
  })

  test('consumers idle long with nothing pending leave the group; one with pending entries and the caller stay', async () => {
    const key = `test:{hooks-consumers-${randomUUID()}}:hooks`
    await redis().xgroup('CREATE', key, HOOKS_GROUP, '0', 'MKSTREAM')
    await redis().xadd(key, '1-0', 'n', '1')
    await redis().xreadgroup('GROUP', HOOKS_GROUP, 'holding', 'COUNT', 1, 'STREAMS', key, '>') // 1-0 pending with it
    await redis().xgroup('CREATECONSUMER', key, HOOKS_GROUP, 'gone')
    await redis().xgroup('CREATECONSUMER', key, HOOKS_GROUP, 'me')
    await Bun.sleep(20)
    expect(await dropIdleConsumers(key, 'me', 10)).toBe(1)
    const names = ((await redis().xinfo('CONSUMERS', key, HOOKS_GROUP)) as string[][]).map((c) => c[1])
    expect(names.sort()).toEqual(['holding', 'me'])
    expect(await dropIdleConsumers(key, 'me')).toBe(0) // none idle for an hour
    await redis().del(key)
  })
})
