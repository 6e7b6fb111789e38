// realtime_channels_list: the product's active channels across gateways, as the leases of real gateways (and of
// gateways played by this file through the data plane's own functions) put them in Redis: sums, presence counts,
// pages, filters, bounds, a dead gateway's channels leaving, and never another product's.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { productChannelIndex } from '../../shared/realtime/keys'
import { holdChannels, releaseChannels } from '../../shared/realtime/occupancy'
import { enterPresence, leavePresence } from '../../shared/realtime/presence'
import { redis } from '../../shared/redis/client'
import { call, eventually, failingFields, newPlatformKey, newProduct, ok } from '../helpers'
import { replied, startGateway, type GatewayProcess, WsClient } from '../gateway/ws-helpers'
import { manage } from './public-helpers'

type Owner = Awaited<ReturnType<typeof newProduct>>
interface Listed { channel: string; namespace: string; subscribers: number; presence: { members: number; connections: number } | null }

let owner: Owner
let other: Owner
let gateway: GatewayProcess
beforeAll(async () => {
  ;[owner, other] = await Promise.all([newProduct('Active channels'), newProduct('Someone else')])
  await manage(owner, 'POST', '/realtime/namespaces', { name: 'chat', presence: true })
  await manage(owner, 'POST', '/realtime/namespaces', { name: 'feed' })
  await manage(other, 'POST', '/realtime/namespaces', { name: 'chat', presence: true })
  gateway = await startGateway()
}, 30_000)
afterAll(() => gateway?.stop())

const list = (who: Owner, query = '') => call('GET', `/realtime/channels${query}`, { token: who.token, productId: who.productId })
const listed = async (who: Owner, query = '') => ok(await list(who, query), 'list').body as { channels: Listed[]; has_more: boolean }
/** The product's active channels whose name starts with `prefix` (one page of 100). */
const named = async (who: Owner, prefix: string) => (await listed(who, `?prefix=${encodeURIComponent(prefix)}&limit=100`)).channels
const unique = () => randomUUID().slice(0, 8)

describe('what is listed', () => {
  test("a channel held by two gateways is listed once with both gateways' subscribers, and leaves with the last lease", async () => {
    const channel = `feed:prices-${unique()}`
    const where = { productId: owner.productId, channel }
    await holdChannels('gw-a', [{ ...where, subscriptions: 2 }], 30_000)
    await holdChannels('gw-b', [{ ...where, subscriptions: 3 }], 30_000)
    expect(await named(owner, channel)).toEqual([{ channel, namespace: 'feed', subscribers: 5, presence: null }])
    // A count reported again replaces that gateway's; a refresh without one keeps it.
    await holdChannels('gw-a', [{ ...where, subscriptions: 1 }], 30_000)
    await holdChannels('gw-b', [where], 30_000)
    expect((await named(owner, channel)).map((c) => c.subscribers)).toEqual([4])
    await releaseChannels('gw-b', [where])
    expect((await named(owner, channel)).map((c) => c.subscribers)).toEqual([1])
    await releaseChannels('gw-a', [where])
    expect(await named(owner, channel)).toEqual([])
  })

  test('presence counts where the namespace keeps a roster', async () => {
    const channel = `chat:room-${unique()}`
    const where = { productId: owner.productId, channel }
    await holdChannels('gw-a', [{ ...where, subscriptions: 3 }], 30_000)
    await enterPresence({ ...where, identity: 'ext:alice', connectionId: 'c1' })
    await enterPresence({ ...where, identity: 'ext:alice', connectionId: 'c2' })
    await enterPresence({ ...where, identity: 'ext:bob', connectionId: 'c3' })
    expect(await named(owner, channel)).toEqual([{ channel, namespace: 'chat', subscribers: 3, presence: { members: 2, connections: 3 } }])
    for (const [identity, connectionId] of [['ext:alice', 'c1'], ['ext:alice', 'c2'], ['ext:bob', 'c3']] as const) await leavePresence({ ...where, identity, connectionId })
    await releaseChannels('gw-a', [where])
  })

  test("a dead gateway's channels leave the list once its lease expires", async () => {
    const channel = `feed:orphan-${unique()}`
    // Never refreshed; long enough to be listed first even on a busy machine.
    await holdChannels('gw-dead', [{ productId: owner.productId, channel, subscriptions: 1 }], 4000)
    expect((await named(owner, channel)).map((c) => c.channel)).toEqual([channel])
    await eventually(async () => (await named(owner, channel)).length === 0, 15_000, 'the expired lease left the list')
  })

  test("a real gateway's subscriptions: listed on subscribe, counted per connection, gone when the last leaves", async () => {
    const channel = `chat:live-${unique()}`
    const token = ok(await call('POST', '/realtime/tokens', { token: owner.token, productId: owner.productId, body: { channels: [{ name: channel, ops: ['subscribe'] }] } }), 'token').body.token
    const connect = async () => {
      const client = await WsClient.open(gateway.wsUrl)
      replied(await client.request({ type: 'connect', token }), 'connect')
      replied(await client.request({ type: 'subscribe', channel }), 'subscribe')
      return client
    }
    const subscribersNow = async () => (await named(owner, channel)).map((c) => c.subscribers)
    const first = await connect()
    await eventually(async () => (await subscribersNow())[0] === 1, 10_000, 'listed with one subscriber')
    const second = await connect()
    await eventually(async () => (await subscribersNow())[0] === 2, 10_000, 'two subscribers')
    replied(await second.request({ type: 'unsubscribe', channel }), 'unsubscribe')
    await eventually(async () => (await subscribersNow())[0] === 1, 10_000, 'one subscriber again')
    first.close()
    await eventually(async () => (await subscribersNow()).length === 0, 10_000, 'gone with the last subscriber')
    second.close()
  })
})

describe('pages and filters', () => {
  const run = unique()
  const channels = [...Array.from({ length: 7 }, (_, i) => `feed:page-${run}-${i}`), `chat:page-${run}-x`, `chat:page-${run}-Y`]
  beforeAll(() => holdChannels('gw-pages', channels.map((channel) => ({ productId: owner.productId, channel, subscriptions: 1 })), 30_000))
  afterAll(() => releaseChannels('gw-pages', channels.map((channel) => ({ productId: owner.productId, channel }))))

  test('walking pages of 3 with `after` gives every channel once, by name, and has_more ends it', async () => {
    const seen: string[] = []
    let after: string | undefined
    for (let pages = 0; pages < 10; pages++) {
      const page = await listed(owner, `?prefix=feed:page-${run}&limit=3${after ? `&after=${encodeURIComponent(after)}` : ''}`)
      expect(page.channels.length).toBeLessThanOrEqual(3)
      seen.push(...page.channels.map((c) => c.channel))
      if (!page.has_more) break
      after = page.channels.at(-1)!.channel
    }
    expect(seen).toEqual(channels.slice(0, 7))
  })

  test('namespace narrows to one namespace; names compare by byte (case kept)', async () => {
    const page = await listed(owner, '?namespace=chat&limit=100')
    const ours = page.channels.map((c) => c.channel).filter((name) => name.includes(run))
    expect(ours).toEqual([`chat:page-${run}-Y`, `chat:page-${run}-x`])
    expect(page.channels.every((c) => c.namespace === 'chat')).toBe(true)
    // A cursor is a channel name as given, not lower-cased.
    const after = await listed(owner, `?prefix=chat:page-${run}&after=${encodeURIComponent(`chat:page-${run}-Y`)}`)
    expect(after).toEqual({ channels: [expect.objectContaining({ channel: `chat:page-${run}-x` })], has_more: false })
  })

  test("another product's channel of the same name is never listed, even by name", async () => {
    const channel = `chat:secret-${unique()}`
    await holdChannels('gw-x', [{ productId: other.productId, channel, subscriptions: 7 }], 30_000)
    expect((await named(other, channel)).map((c) => [c.channel, c.subscribers])).toEqual([[channel, 7]])
    expect(await named(owner, channel)).toEqual([])
    expect((await listed(owner, '?limit=100&namespace=chat')).channels.map((c) => c.channel)).not.toContain(channel)
    // Naming the other product is 404 (a platform key of one product cannot read another's).
    const key = await newPlatformKey(owner, ['realtime'])
    const foreign = await call('GET', '/realtime/channels', { token: key.key, productId: other.productId })
    expect(foreign.status).toBe(404)
    await releaseChannels('gw-x', [{ productId: other.productId, channel }])
  })
})

describe('after gateways died holding many channels', () => {
  test('a page cut short by stale entries says has_more; asking again goes on, and no live channel is skipped', async () => {
    const fresh = await newProduct('Stale index')
    await manage(fresh, 'POST', '/realtime/namespaces', { name: 'feed' })
    const live = ['feed:b-1', 'feed:b-2']
    await holdChannels('gw-live', live.map((channel) => ({ productId: fresh.productId, channel, subscriptions: 1 })), 30_000)
    // What gateways that died holding 7 000 channels of the product on one shard leave in its index: entries long
    // expired, sorted before the live ones (written as the occupancy script writes them; holding them for real would
    // take 16 times as many channels to fill one shard).
    const index = productChannelIndex(fresh.productId, 0)
    const stale = Array.from({ length: 7000 }, (_, i) => `feed:a-${String(i).padStart(5, '0')}`)
    await redis().zadd(index.names, ...stale.flatMap((name) => [0, name]))
    await redis().zadd(index.expiry, ...stale.flatMap((name) => [1, name]))
    await redis().pexpire(index.names, 60_000)
    await redis().pexpire(index.expiry, 60_000)

    // 1 000 dropped by age, then 5 000 looked at (and dropped): the live channels lie past what this page could read.
    expect(await listed(fresh, '?prefix=feed:&limit=5')).toEqual({ channels: [], has_more: true })
    // The same question again reads on, and finds them.
    expect((await listed(fresh, '?prefix=feed:&limit=5')).channels.map((c) => c.channel)).toEqual(live)
    expect(await redis().zcard(index.names)).toBeLessThanOrEqual(live.length)
    await releaseChannels('gw-live', live.map((channel) => ({ productId: fresh.productId, channel })))
  })
})

describe('bad input', () => {
  test.each([
    ['?limit=0', ['/query/limit']],
    ['?limit=101', ['/query/limit']],
    ['?limit=ten', ['/query/limit']],
    [`?prefix=${encodeURIComponent('chat:with space')}`, ['/query/prefix']],
    [`?prefix=${'a'.repeat(129)}`, ['/query/prefix']],
    ['?namespace=bad:name', ['/query/namespace']],
    ['?after=nocolon', ['/query/after']],
    ['?prefix=chat:&namespace=chat', ['/query/prefix', '/query/namespace']],
    ['?unknown=1', ['/query/unknown']],
  ])('%s is 400 naming %p', async (query, fields) => {
    expect(failingFields(await list(owner, query)).sort()).toEqual([...fields].sort())
  })
})
