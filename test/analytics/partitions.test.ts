// Event partitions: months made ahead, the default partition's rows given their own month, retention dropping whole
// months (and their rollups), and an existing deployment's upgrade (migration 0015) moving its events in batches while
// every one stays readable exactly once.
import { describe, expect, test } from 'bun:test'
import {
  dropExpiredMonths, ensureMonthsAround, giveDefaultRowsTheirMonths, LEGACY_MOVER_LOCK, MONTH_MAKER_LOCK, monthPartitions, moveLegacyEvents, type PartitionPolicy,
} from '../../shared/analytics/partitions'
import { rollupUntilCurrent } from '../../shared/analytics/rollups'
import { sql } from '../../shared/db/client'
import { migrate } from '../../shared/db/migrate'
import { captureEvents } from '../../shared/analytics/capture'
import { newProduct, scratchDatabase } from '../helpers'

// Years of their own for each run, so that a run against a database an earlier run used finds no month made already.
const year = (from: number, span: number) => from + Math.floor(Math.random() * span)
const AHEAD_YEAR = year(2100, 800)
const BACKDATED_YEAR = year(2100, 800)
const EXPIRED_YEAR = year(1700, 200)
const POLICY: PartitionPolicy = { ahead: 2, retentionMonths: 0, moveBatch: 250, lockTimeoutMs: 2000 }
const partitionOf = async (productId: string, event: string) =>
  (await sql`select tableoid::regclass::text as part from tracked_events where product_id = ${productId} and event = ${event}`).map((r) => r.part as string)

describe('partitions', () => {
  test('a month is made ahead when due, and events captured before it existed move out of the default partition into it', async () => {
    const owner = await newProduct('Partitions')
    const y = AHEAD_YEAR
    // No partition yet, so the event waits in the default one.
    await captureEvents(owner.productId, [{ event: 'early', timestamp: `${y}-06-10T12:00:00Z`, identity: { users_id: 'u' } }])
    expect(await partitionOf(owner.productId, 'early')).toEqual(['tracked_events_default'])
    const made = await ensureMonthsAround(sql, new Date(`${y}-05-15T00:00:00Z`), POLICY)
    expect(made).toEqual([`${y}-04-01`, `${y}-05-01`, `${y}-06-01`, `${y}-07-01`])
    expect(await partitionOf(owner.productId, 'early')).toEqual([`tracked_events_p${y}06`])
    // Made once: a second round changes nothing.
    expect(await ensureMonthsAround(sql, new Date(`${y}-05-15T00:00:00Z`), POLICY)).toEqual([])
  })

  test('months the default partition holds events of get their own, but only back to 36 months and forward to the months ahead', async () => {
    const owner = await newProduct('Backdated')
    const y = BACKDATED_YEAR
    await captureEvents(owner.productId, [
      { event: 'recent', timestamp: `${y - 1}-02-03T00:00:00Z`, identity: { users_id: 'u' } },
      { event: 'ancient', timestamp: `${y - 30}-02-03T00:00:00Z`, identity: { users_id: 'u' } },
    ])
    const made = await giveDefaultRowsTheirMonths(sql, new Date(`${y}-01-15T00:00:00Z`), POLICY, 1000)
    expect(made).toContain(`${y - 1}-02-01`)
    expect(made).not.toContain(`${y - 30}-02-01`)
    expect(await partitionOf(owner.productId, 'recent')).toEqual([`tracked_events_p${y - 1}02`])
    expect(await partitionOf(owner.productId, 'ancient')).toEqual(['tracked_events_default'])
  })

  test('retention drops whole months older than the kept ones, with their rollups, and old events of the default partition', async () => {
    const owner = await newProduct('Retention')
    const y = EXPIRED_YEAR
    await captureEvents(owner.productId, [
      { event: 'old', timestamp: `${y}-01-10T00:00:00Z`, identity: { users_id: 'u' } },
      { event: 'kept', timestamp: `${y}-03-10T00:00:00Z`, identity: { users_id: 'u' } },
      { event: 'older', timestamp: `${y - 11}-03-10T00:00:00Z`, identity: { users_id: 'u' } },
    ])
    const now = new Date(`${y}-04-15T00:00:00Z`)
    await giveDefaultRowsTheirMonths(sql, now, POLICY, 1000)
    await ensureMonthsAround(sql, now, POLICY)
    await rollupUntilCurrent(sql, { chunkIds: 100_000, lockTimeoutMs: 2000, maxValues: 1000, maxSets: 10 })
    const rollupHours = async () => (await sql`select distinct hour from analytics_event_rollups where product_id = ${owner.productId} order by hour`).map((r) => (r.hour as Date).toISOString())
    expect(await rollupHours()).toEqual([`${y - 11}-03-10T00:00:00.000Z`, `${y}-01-10T00:00:00.000Z`, `${y}-03-10T00:00:00.000Z`])
    expect(await partitionOf(owner.productId, 'old')).toEqual([`tracked_events_p${y}01`])
    const dropped = await dropExpiredMonths(sql, now, { ...POLICY, retentionMonths: 2 })
    expect(dropped).toContain(`${y}-01-01`)
    expect(dropped).not.toContain(`${y}-02-01`)
    expect(await monthPartitions(sql)).not.toContain(`${y}-01-01`)
    expect(await monthPartitions(sql)).toContain(`${y}-03-01`)
    const left = await sql`select event from tracked_events where product_id = ${owner.productId}`
    expect(left.map((r) => r.event)).toEqual(['kept'])
    expect(await rollupHours()).toEqual([`${y}-03-10T00:00:00.000Z`])
  })
})

/** A scratch database as a deployment before partitions (migrated through 0014), with one organization's product. */
async function beforePartitions(scratch: ReturnType<typeof scratchDatabase>) {
  const db = await scratch.open()
  await migrate(db, { through: '0014_webhook_indexes.sql' })
  const [product] = await db`with o as (insert into organizations (name) values ('o') returning id)
    insert into products (organization_id, name) select id, 'p' from o returning id`
  return { db, product: product! }
}

describe('upgrading a deployment that has events', () => {
  const scratch = scratchDatabase('platform_upgrade')
  const raced = scratchDatabase('platform_upgrade_race')

  test('events stay readable exactly once while they move in batches, captures go on meanwhile, and the legacy table goes at the end', async () => {
    const { db, product } = await beforePartitions(scratch)
    // 1 000 events over three years, as a deployment before partitions stored them.
    await db`insert into tracked_events (product_id, event, ts, users_id)
      select ${product.id}, 'e' || (i % 3), timestamptz '2024-01-01' + i * interval '1 day 2 hours', 'u' || (i % 50)
      from generate_series(1, 1000) i`
    const totals = async () => (await db`select count(*)::int as n, sum(id)::bigint as ids from tracked_events_all`)[0]!
    await migrate(db)
    expect(await totals()).toEqual({ n: 1000, ids: String(500500) })
    // Capture during the upgrade lands in the partitions with ids after the legacy ones.
    await db`insert into tracked_events (product_id, event, ts, users_id) values (${product.id}, 'new', now(), 'u')`
    const [fresh] = await db`select id from tracked_events where event = 'new'`
    expect(Number(fresh!.id)).toBe(1001)
    const now = new Date()
    const legacyLeft = async () => (await db`select to_regclass('tracked_events_legacy') is not null as there`)[0]!.there as boolean
    // While another aggregator is mid-batch (it holds the mover's lock), a second stands aside and moves nothing:
    // it never takes the other's emptied batch for an empty table.
    const aside = await db.begin(async (tx) => {
      await tx`select pg_advisory_xact_lock(${LEGACY_MOVER_LOCK})`
      return moveLegacyEvents(db, now, POLICY)
    })
    expect(aside).toBe(0)
    expect(await legacyLeft()).toBe(true)
    // Two aggregators at once, as a deployment may run (whether their batches overlap is up to the scheduler): every
    // event is moved exactly once, and readable exactly once all along.
    let moved = 0
    for (let round = 0; await legacyLeft(); round++) {
      expect(round).toBeLessThan(20)
      const both = await Promise.all([moveLegacyEvents(db, now, POLICY), moveLegacyEvents(db, now, POLICY)])
      moved += both[0] + both[1]
      expect(await totals()).toEqual({ n: 1001, ids: String(500500 + 1001) })
    }
    expect(moved).toBe(1000)
    expect((await db`select to_regclass('tracked_events_legacy') as t`)[0]!.t).toBeNull()
    // Months within 36 months back got partitions; older ones wait in the default partition.
    const [spread] = await db`select count(distinct tableoid)::int as parts,
      count(*) filter (where tableoid = 'tracked_events_default'::regclass)::int as in_default from tracked_events`
    expect(spread!.parts).toBeGreaterThan(20)
    const [old] = await db`select count(*)::int as n from tracked_events where ts < date_trunc('month', now() - interval '36 months')`
    expect(spread!.in_default).toBe(old!.n)
    // The view reads the partitions alone now.
    expect((await db`select pg_get_viewdef('tracked_events_all') as v`)[0]!.v).not.toContain('legacy')
  }, 60_000)

  test('a mover whose batch another mover took meanwhile moves no batch whose months it has not made', async () => {
    const { db, product } = await beforePartitions(raced)
    // Two batches of ten, each in a month of its own that has no partition yet.
    await db`insert into tracked_events (product_id, event, ts, users_id)
      select ${product.id}, 'e', case when i <= 10 then timestamptz '2028-01-10' else timestamptz '2029-03-10' end, 'u'
      from generate_series(1, 20) i`
    await migrate(db)
    const policy: PartitionPolicy = { ...POLICY, moveBatch: 10, lockTimeoutMs: 30_000 }
    const now = new Date('2030-06-15T00:00:00Z')
    // A mover to whom both months are older than the 36 kept in partitions: it makes no month and moves at once.
    const otherNow = new Date('2080-06-15T00:00:00Z')
    const inDefault = async () => (await db`select count(*)::int as n from tracked_events_default`)[0]!.n as number
    // The first mover has read its batch (the first ten) and waits to make its month, behind the month makers' lock.
    let first: Promise<number> | undefined
    await db.begin(async (tx) => {
      await tx`select pg_advisory_xact_lock(${MONTH_MAKER_LOCK})`
      first = moveLegacyEvents(db, now, policy)
      const waiting = async () => (await db`select count(*)::int as n from pg_locks
        where locktype = 'advisory' and objid = ${MONTH_MAKER_LOCK} and not granted`)[0]!.n as number
      for (let i = 0; (await waiting()) === 0; i++) {
        expect(i).toBeLessThan(500)
        await Bun.sleep(10)
      }
      // Meanwhile another mover takes that batch.
      expect(await moveLegacyEvents(db, otherNow, policy)).toBe(10)
    })
    // The first makes the first batch's month (drawing those rows out of the default partition), then finds the
    // second batch under the mover's lock, whose month nobody made: it leaves it for the next round.
    const firstMoved = await first!
    expect(await inDefault()).toBe(0)
    expect(firstMoved).toBe(0)
    expect((await db`select count(*)::int as n from tracked_events_legacy`)[0]!.n).toBe(10)
    // The next round makes the month and moves the batch into it.
    expect(await moveLegacyEvents(db, now, policy)).toBe(10)
    expect(await moveLegacyEvents(db, now, policy)).toBe(0)
    const parts = await db`select tableoid::regclass::text as part, count(*)::int as n from tracked_events group by 1 order by 1`
    expect(parts.map((r) => ({ part: r.part, n: r.n }))).toEqual([{ part: 'tracked_events_p202801', n: 10 }, { part: 'tracked_events_p202903', n: 10 }])
    expect((await db`select to_regclass('tracked_events_legacy') as t`)[0]!.t).toBeNull()
  }, 60_000)
})
