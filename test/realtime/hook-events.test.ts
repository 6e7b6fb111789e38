// Realtime webhook events in Redis: presence and occupancy de-flapped once per identity and channel, appended to the
// shard's hooks stream by the scripts themselves; the consumer-group reader acknowledges and claims. Real Redis; the
// grace is shortened by passing settings (the gateway end to end is test/gateway/hook-events.test.ts).
import { afterAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { closeRedis, redis } from '../../shared/redis'
import { consumeHookEvents, checkDueHooks, type HookEvent, HOOKS_GROUP, toHookEvent, trimAcknowledged } from '../../shared/realtime/hook-events'
import type { HookSettings } from '../../shared/realtime/hooks'
import { channelKeys } from '../../shared/realtime/keys'
import { checkOccupancy, holdChannels, releaseChannels } from '../../shared/realtime/occupancy'
import { enterPresence, leavePresence } from '../../shared/realtime/presence'
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
  return entries.map(([id, fields]) => toHookEvent(keys.shard, id, fields)!)
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
      productId: where.productId, channel: where.channel, identity: 'alice', sequence: 1,
      data: { channel: where.channel, namespace: 'room', identity: 'alice', info: { name: 'Alice' }, sequence: 1 },
    })
    expect(events[0]!.id).toMatch(/^rt_\d+_\d+-\d+$/)
  })

  test('flapping (leave and rejoin within the grace, again and again) gives one added, and one removed once gone for the grace', async () => {
    const where = fresh()
    await enter(where, 'bob', 'c1')
    for (let i = 0; i < 5; i++) {
      await leave(where, 'bob', `c${i + 1}`)
      await checkFor(where, 100)
      await enter(where, 'bob', `c${i + 2}`)
    }
    const before = Date.now()
    await leave(where, 'bob', 'c6')
    const after = Date.now()
    await checkFor(where, HOOKS.graceMs / 2)
    expect(await kinds(where)).toEqual([['presence.member_added', 'bob']])
    await checkFor(where, HOOKS.graceMs + 300)
    const events = await eventsOf(where)
    expect(events.map((e) => [e.kind, e.sequence])).toEqual([['presence.member_added', 1], ['presence.member_removed', 2]])
    // A removal happened when the last entry went, not when the grace ended.
    expect(Date.parse(events[1]!.occurredAt)).toBeGreaterThanOrEqual(before - 50) // one host: Redis' clock and ours agree
    expect(Date.parse(events[1]!.occurredAt)).toBeLessThanOrEqual(after + 50)
    expect(events[1]!.data).toEqual({ channel: where.channel, namespace: 'room', identity: 'bob', occurredAt: events[1]!.occurredAt, sequence: 2 })
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
    expect(events[1]!.data).toEqual({ channel: where.channel, namespace: 'room', occurredAt: events[1]!.occurredAt, sequence: 2 })
  })

  test('a lease nobody refreshes (its gateway died) expires: vacated once', async () => {
    const where = fresh()
    await holdChannels('gw-dead', [where], 500, HOOKS)
    await checkFor(where, 500 + HOOKS.graceMs + 400)
    await checkOccupancy([where], HOOKS)
    expect(await kinds(where)).toEqual([['channel.occupied', null], ['channel.vacated', null]])
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
})
