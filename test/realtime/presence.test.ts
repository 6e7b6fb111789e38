// Presence rosters against a real Redis: dedupe by identity, the 100-member cap under concurrency, info limit, expiry.
import { afterAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { ApiError } from '../../shared/errors'
import { closeRedis, redis } from '../../shared/redis/client'
import { channelKeys } from '../../shared/realtime/keys'
import { enterPresence, leavePresence, listPresence, PRESENCE_KEY_GRACE_MS, presenceCount } from '../../shared/realtime/presence'
import { FAN_ENTRY_OVERHEAD_BYTES, publish } from '../../shared/realtime/broker'

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const fresh = () => ({ productId: randomUUID(), channel: 'room:lobby' })

afterAll(async () => {
  await closeRedis()
})

describe('presence', () => {
  test('two connections of one identity are one member with connections: 2; leaving one leaves 1', async () => {
    const where = fresh()
    await enterPresence({ ...where, identity: 'alice', connectionId: 'c1', info: { name: 'Alice' } })
    await enterPresence({ ...where, identity: 'alice', connectionId: 'c2', info: { name: 'Alice' } })
    await enterPresence({ ...where, identity: 'bob', connectionId: 'c3' })
    expect(await listPresence(where.productId, where.channel)).toEqual([
      { identity: 'alice', connections: 2, info: { name: 'Alice' } },
      { identity: 'bob', connections: 1, info: null },
    ])
    expect(await presenceCount(where.productId, where.channel)).toEqual({ members: 2, connections: 3 })

    await leavePresence({ ...where, identity: 'alice', connectionId: 'c1' })
    expect((await listPresence(where.productId, where.channel))[0]).toEqual({ identity: 'alice', connections: 1, info: { name: 'Alice' } })
    await leavePresence({ ...where, identity: 'alice', connectionId: 'c1' }) // twice is harmless
    await leavePresence({ ...where, identity: 'alice', connectionId: 'c2' })
    expect(await listPresence(where.productId, where.channel)).toEqual([{ identity: 'bob', connections: 1, info: null }])
    expect(await presenceCount(where.productId, where.channel)).toEqual({ members: 1, connections: 1 })
  })

  test('entering again with the same connection refreshes it without counting it twice; newer info wins', async () => {
    const where = fresh()
    await enterPresence({ ...where, identity: 'carol', connectionId: 'c1', info: { v: 1 } })
    await enterPresence({ ...where, identity: 'carol', connectionId: 'c1', info: { v: 2 } })
    await enterPresence({ ...where, identity: 'carol', connectionId: 'c1' }) // no info: keeps the last one
    expect(await listPresence(where.productId, where.channel)).toEqual([{ identity: 'carol', connections: 1, info: { v: 2 } }])
  })

  test('identities with unusual characters round-trip', async () => {
    const where = fresh()
    const identity = 'zoë:1:ü'
    await enterPresence({ ...where, identity, connectionId: 'x:y' })
    await enterPresence({ ...where, identity, connectionId: 'x:z' })
    expect(await listPresence(where.productId, where.channel)).toEqual([{ identity, connections: 2, info: null }])
    await leavePresence({ ...where, identity, connectionId: 'x:y' })
    expect((await listPresence(where.productId, where.channel))[0]!.connections).toBe(1)
  })

  test('150 concurrent enters with distinct identities: exactly 100 succeed, 50 get 429', async () => {
    const where = fresh()
    const outcomes = await Promise.allSettled(
      Array.from({ length: 150 }, (_, i) => enterPresence({ ...where, identity: `user-${i}`, connectionId: `conn-${i}` })),
    )
    const ok = outcomes.filter((o) => o.status === 'fulfilled')
    const refused = outcomes.flatMap((o) => (o.status === 'rejected' ? [o.reason] : []))
    expect(ok.length).toBe(100)
    expect(refused.length).toBe(50)
    for (const error of refused) {
      expect(error).toBeInstanceOf(ApiError)
      expect(error.status).toBe(429)
      expect(error.code).toBe('presence_full')
    }
    expect(await presenceCount(where.productId, where.channel)).toEqual({ members: 100, connections: 100 })
    expect((await listPresence(where.productId, where.channel)).length).toBe(100)
  })

  test('a full roster still accepts more connections of a present identity, and frees a seat when one leaves', async () => {
    const where = fresh()
    await Promise.all(Array.from({ length: 100 }, (_, i) => enterPresence({ ...where, identity: `u${i}`, connectionId: `c${i}` })))
    await enterPresence({ ...where, identity: 'u7', connectionId: 'second-tab' })
    const error = await enterPresence({ ...where, identity: 'newcomer', connectionId: 'n1' }).catch((e) => e)
    expect(error.status).toBe(429)
    await leavePresence({ ...where, identity: 'u3', connectionId: 'c3' })
    await enterPresence({ ...where, identity: 'newcomer', connectionId: 'n1' })
    expect(await presenceCount(where.productId, where.channel)).toEqual({ members: 100, connections: 101 })
  })

  test('info above 10 240 bytes serialized is refused with 400 invalid; exactly 10 240 is accepted', async () => {
    const where = fresh()
    const tooBig = 'x'.repeat(10_240 - 1) // JSON adds two quotes: 10 241 bytes
    const error = await enterPresence({ ...where, identity: 'dave', connectionId: 'c1', info: tooBig }).catch((e) => e)
    expect(error).toBeInstanceOf(ApiError)
    expect(error.status).toBe(400)
    expect(error.code).toBe('invalid')
    const multibyte = 'é'.repeat(5_120) // 10 240 characters of UTF-8 + quotes > limit though its length is 5 122
    expect((await enterPresence({ ...where, identity: 'dave', connectionId: 'c1', info: multibyte }).catch((e) => e)).status).toBe(400)
    await enterPresence({ ...where, identity: 'dave', connectionId: 'c1', info: 'x'.repeat(10_238) })
    expect((await listPresence(where.productId, where.channel))[0]!.info).toBe('x'.repeat(10_238))
  })

  test('ttlSeconds outside 1..3600 is refused', async () => {
    const where = fresh()
    for (const ttlSeconds of [0, 3601, 1.5]) {
      const error = await enterPresence({ ...where, identity: 'erin', connectionId: 'c1', ttlSeconds }).catch((e) => e)
      expect(error.status).toBe(400)
    }
  })

  test('expired connections drop off the roster, and the keys are set to disappear a grace period after the last expiry', async () => {
    const where = fresh()
    await enterPresence({ ...where, identity: 'frank', connectionId: 'short', ttlSeconds: 1 })
    await enterPresence({ ...where, identity: 'grace', connectionId: 'short', ttlSeconds: 1 })
    await enterPresence({ ...where, identity: 'grace', connectionId: 'long', ttlSeconds: 60 })
    expect(await presenceCount(where.productId, where.channel)).toEqual({ members: 2, connections: 3 })
    await sleep(1100)
    expect(await listPresence(where.productId, where.channel)).toEqual([{ identity: 'grace', connections: 1, info: null }])
    expect(await presenceCount(where.productId, where.channel)).toEqual({ members: 1, connections: 1 })

    const other = fresh()
    await enterPresence({ ...other, identity: 'henry', connectionId: 'c', ttlSeconds: 1 })
    const keys = channelKeys(other.productId, other.channel)
    for (const key of [keys.pres, keys.presCount, keys.presExp]) {
      const ttl = await redis().pttl(key)
      expect(ttl).toBeGreaterThan(PRESENCE_KEY_GRACE_MS)
      expect(ttl).toBeLessThanOrEqual(1000 + PRESENCE_KEY_GRACE_MS)
    }
    await sleep(1100)
    expect(await listPresence(other.productId, other.channel)).toEqual([])
  })

  test('an expired identity frees its seat on a full roster', async () => {
    const where = fresh()
    await enterPresence({ ...where, identity: 'ghost', connectionId: 'g', ttlSeconds: 1 })
    await Promise.all(Array.from({ length: 99 }, (_, i) => enterPresence({ ...where, identity: `u${i}`, connectionId: `c${i}` })))
    expect((await enterPresence({ ...where, identity: 'late', connectionId: 'l' }).catch((e) => e)).status).toBe(429)
    await sleep(1100)
    await enterPresence({ ...where, identity: 'late', connectionId: 'l' })
    const members = await listPresence(where.productId, where.channel)
    expect(members.length).toBe(100)
    expect(members.some((m) => m.identity === 'ghost')).toBe(false)
  })

  test('joins and leaves are charged to the product\'s fan-out byte budget: a join past it is refused 429 and writes nothing; a refresh and a leave never are', async () => {
    const where = fresh()
    const budget = { fanoutRetentionMs: 60_000, fanoutMaxBytes: 64 * 1024 }
    const keys = channelKeys(where.productId, where.channel)
    const info = { blob: 'i'.repeat(10_000) }
    const cost = (kind: string, identity: string, text: string) => where.productId.length + where.channel.length + kind.length + identity.length + text.length + FAN_ENTRY_OVERHEAD_BYTES
    const [last] = await redis().xrevrange(keys.fan, '+', '-', 'COUNT', 1)
    await enterPresence({ ...where, identity: 'bob', connectionId: 'b1' }, budget)
    // The hostile loop: enter and leave with the largest info, as fast as Redis answers.
    let joins = 0
    let refusal: unknown
    for (let i = 0; i < 50 && !refusal; i++) {
      try {
        await enterPresence({ ...where, identity: 'mallory', connectionId: 'm1', info }, budget)
        joins++
        await leavePresence({ ...where, identity: 'mallory', connectionId: 'm1' }, budget)
      } catch (error) {
        refusal = error
      }
    }
    const join = cost('join', 'mallory', JSON.stringify(info))
    const leave = cost('leave', 'mallory', '')
    const bobJoin = cost('join', 'bob', 'null')
    // Exactly at the bound: every join that fits is taken, the next is refused.
    expect(joins).toBe(Math.floor((budget.fanoutMaxBytes - bobJoin - join) / (join + leave)) + 1)
    expect(refusal).toBeInstanceOf(ApiError)
    expect(refusal).toMatchObject({ status: 429, code: 'fanout_budget_exceeded' })
    const retryAfter = Number((refusal as ApiError).headers?.['retry-after'])
    expect(retryAfter).toBeGreaterThanOrEqual(1)
    expect(retryAfter).toBeLessThanOrEqual(66) // the oldest slice (a tenth of the window) leaves the window
    // The refused enter wrote nothing: mallory is not on the roster and no join of hers went out after the last leave.
    expect(await listPresence(where.productId, where.channel)).toEqual([{ identity: 'bob', connections: 1, info: null }])
    // Past the budget a refresh of a present connection still works (it emits nothing), and so does a leave.
    expect(await enterPresence({ ...where, identity: 'bob', connectionId: 'b1' }, budget)).toEqual({ joined: false })
    await leavePresence({ ...where, identity: 'bob', connectionId: 'b1' }, budget)
    expect(await listPresence(where.productId, where.channel)).toEqual([])
    const rows = await redis().xrange(keys.fan, last ? `(${last[0]}` : '-', '+')
    const events = rows.map(([, f]) => Object.fromEntries(Array.from({ length: f.length / 2 }, (_, i) => [f[2 * i]!, f[2 * i + 1]!])))
      .filter((e) => e.product === where.productId)
    expect(events.map((e) => `${e.kind} ${e.identity}`)).toEqual(['join bob', ...Array(joins).fill(['join mallory', 'leave mallory']).flat(), 'leave bob'])
    // Everything emitted was charged, the leave past the budget included.
    // Each slice (a numbered field) holds the window's bytes as counted in it: its base (`b<slice>`: what the earlier
    // slices held) and what was charged in it; the newest holds them all.
    const hash = await redis().hgetall(keys.fanBudget)
    const slices = Object.keys(hash).filter((field) => /^\d+$/.test(field)).map(Number)
    const charged = slices.reduce((sum, slice) => sum + Number(hash[slice]) - Number(hash[`b${slice}`] ?? 0), 0)
    expect(Number(hash[Math.max(...slices)])).toBe(charged)
    expect(charged).toBe(bobJoin + joins * (join + leave) + cost('leave', 'bob', ''))
    expect(charged).toBeGreaterThan(budget.fanoutMaxBytes - join)
    // The same budget as publications: a publication as large as what presence left of it does not fit.
    const room = JSON.stringify('p'.repeat(Math.max(0, budget.fanoutMaxBytes - charged)))
    const publishing = await publish({ ...where, policy: { historyTtlSeconds: 0, historySize: 0 }, data: room }, { ...budget, historyMaxBytes: 1 << 20 }).catch((e) => e)
    expect(publishing).toMatchObject({ status: 429, code: 'fanout_budget_exceeded' })
  })
})
