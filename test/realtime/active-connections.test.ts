// realtime_connections_list: a product's connections as real gateway processes report them while someone asks, per
// gateway, paged by id; another product's never; a gateway's report withdrawn once it has none of the product's left.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { call, eventually, failingFields, newProduct, ok } from '../helpers'
import { replied, startGateway, type GatewayProcess, WsClient } from '../gateway/ws-helpers'
import { manage } from './public-helpers'
import { redis } from '../../shared/redis/client'
import { reportConnections, reportingGateways } from '../../shared/realtime/connection-reports'

type Owner = Awaited<ReturnType<typeof newProduct>>
interface Listed {
  gateways: { gateway: string; connections: number; reportedAt: string }[]
  gateway: string | null
  connections: { id: string; subject: string; connectedAt: string; subscriptions: number; channels: string[] }[]
  has_more: boolean
}

let owner: Owner
let other: Owner
let gateways: GatewayProcess[]
beforeAll(async () => {
  ;[owner, other] = await Promise.all([newProduct('Connections'), newProduct('Other connections')])
  await Promise.all([owner, other].map((who) => manage(who, 'POST', '/realtime/namespaces', { name: 'chat' })))
  gateways = await Promise.all([startGateway(), startGateway()])
}, 30_000)
afterAll(() => Promise.all(gateways?.map((g) => g.stop()) ?? []))

const list = (who: Owner, query = '') => call('GET', `/realtime/connections${query}`, { token: who.token, productId: who.productId })
const listed = async (who: Owner, query = '') => ok(await list(who, query), 'connections').body as Listed

/** A raw client of `who` on `on`, connected with a console token for `channels` and subscribed to each. */
async function client(who: Owner, on: GatewayProcess, channels: string[]): Promise<{ ws: WsClient; id: string }> {
  const token = ok(await call('POST', '/realtime/tokens', { token: who.token, productId: who.productId, body: { channels: channels.map((name) => ({ name, ops: ['subscribe'] })) } }), 'token').body.token
  const ws = await WsClient.open(on.wsUrl)
  const connected = replied(await ws.request({ type: 'connect', token }), 'connect')
  for (const channel of channels) replied(await ws.request({ type: 'subscribe', channel }), `subscribe ${channel}`)
  return { ws, id: connected.client as string }
}

/** Every connection of `who` over every reporting gateway, once all of `ids` are reported. */
async function reported(who: Owner, ids: string[]) {
  return eventually(async () => {
    const first = await listed(who, '?limit=100')
    const all = await Promise.all(first.gateways.map((g) => listed(who, `?limit=100&gateway=${g.gateway}`)))
    const connections = all.flatMap((page) => page.connections.map((c) => ({ ...c, gateway: page.gateway })))
    return ids.every((id) => connections.some((c) => c.id === id)) && { gateways: first.gateways, connections }
  }, 10_000, `connections ${ids.join(', ')} reported`)
}

describe('what is listed', () => {
  test("each gateway's connections of the product, with subject, subscriptions and channels; totals per gateway", async () => {
    const room = `chat:room-${randomUUID().slice(0, 8)}`
    const a = await client(owner, gateways[0]!, [room, `${room}-2`])
    const b = await client(owner, gateways[1]!, [room])
    const { gateways: reporting, connections } = await reported(owner, [a.id, b.id])
    const ours = connections.filter((c) => c.id === a.id || c.id === b.id)
    expect(new Set(ours.map((c) => c.gateway)).size).toBe(2) // one on each gateway
    const shown = ours.find((c) => c.id === a.id)!
    expect(shown).toMatchObject({ subject: expect.stringMatching(/^ext:console:/), subscriptions: 2, channels: [room, `${room}-2`] })
    expect(Date.parse(shown.connectedAt)).toBeGreaterThan(Date.now() - 60_000)
    expect(reporting).toHaveLength(2)
    expect(reporting.every((g) => g.connections >= 1)).toBe(true)
    // A gateway with none of the product's connections left withdraws its report.
    b.ws.close()
    await eventually(async () => (await listed(owner)).gateways.length === 1, 10_000, 'the emptied gateway withdrew its report')
    a.ws.close()
    await eventually(async () => (await listed(owner)).gateways.length === 0, 10_000, 'no gateway reports')
    expect(await listed(owner)).toEqual({ gateways: [], gateway: null, connections: [], has_more: false })
  })

  test("another product's connections are never listed", async () => {
    const theirs = await client(other, gateways[0]!, ['chat:theirs'])
    const mine = await client(owner, gateways[0]!, ['chat:mine'])
    await reported(other, [theirs.id])
    const { connections } = await reported(owner, [mine.id])
    expect(connections.map((c) => c.id)).not.toContain(theirs.id)
    theirs.ws.close()
    mine.ws.close()
  })
})

describe('pages and bounds', () => {
  test('pages of 2 by id on one gateway give every connection once', async () => {
    const clients = await Promise.all(Array.from({ length: 5 }, (_, i) => client(owner, gateways[1]!, [`chat:page-${i}`])))
    const ids = clients.map((c) => c.id)
    const { connections } = await reported(owner, ids)
    const gateway = connections.find((c) => c.id === ids[0])!.gateway
    const seen: string[] = []
    let after: string | undefined
    for (let pages = 0; pages < 10; pages++) {
      const page = await listed(owner, `?gateway=${gateway}&limit=2${after ? `&after=${after}` : ''}`)
      expect(page.connections.length).toBeLessThanOrEqual(2)
      seen.push(...page.connections.map((c) => c.id))
      if (!page.has_more) break
      after = page.connections.at(-1)!.id
    }
    expect(seen).toEqual([...seen].sort())
    expect(seen.filter((id) => ids.includes(id)).sort()).toEqual([...ids].sort())
    for (const c of clients) c.ws.close()
  })

  test.each([
    ['?limit=0', ['/query/limit']],
    ['?limit=101', ['/query/limit']],
    ['?gateway=not-a-uuid', ['/query/gateway']],
    ['?after=7', ['/query/after']],
    ['?unknown=1', ['/query/unknown']],
  ])('%s is 400 naming %p', async (query, fields) => {
    expect(failingFields(await list(owner, query))).toEqual(fields)
  })

  test('a gateway that reports nothing of the product answers an empty page', async () => {
    const page = await listed(owner, `?gateway=${randomUUID()}`)
    expect(page.connections).toEqual([])
    expect(page.has_more).toBe(false)
  })
})

describe('upkeep', () => {
  test("a gateway whose report expired leaves the product's list and totals at the next read (a watched product keeps no dead gateway)", async () => {
    const productId = randomUUID()
    const now = Date.now()
    const one = { id: 'c1', subject: 'ext:a', connectedAt: now, subscriptions: 1, channels: ['chat:x'] }
    await reportConnections('gw-dead', productId, [one], 1, now - 60_000) // reported a minute ago, never again
    await reportConnections('gw-live', productId, [one], 1, now)
    expect((await reportingGateways(productId, now)).map((g) => g.gateway)).toEqual(['gw-live'])
    const tag = `rt:{c:${productId}}`
    expect(await redis().zrange(`${tag}:gws`, '0', '-1')).toEqual(['gw-live'])
    expect(await redis().hkeys(`${tag}:gwn`)).toEqual(['gw-live'])
  })
})
