// Realtime's webhook events delivered end to end: a real gateway and real WebSocket clients produce them, a real
// webhooks process reads the shards' hooks streams and delivers them to a real receiver on loopback, every signature
// verified with standardwebhooks. Each event arrives once, with the documented payload; an event read twice (a process
// killed between recording a batch and acknowledging it) is recorded once.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { sql } from '../../shared/db/client'
import type { HookEvent } from '../../shared/realtime/hook-events'
import { signToken, type TokenChannel } from '../../shared/realtime/tokens'
import { recordHookEvents } from '../../services/webhooks/realtime-events'
import { eventually, startProcess, type Worker } from '../helpers'
import { manage, realtimeProduct, type RealtimeProduct } from '../realtime/public-helpers'
import { replied, startGateway, type GatewayProcess, WsClient } from '../gateway/ws-helpers'
import { type Receiver, startReceiver, verified } from './receiver'

const GRACE_MS = 1000
const ENV = { REALTIME_HOOK_GRACE_MS: String(GRACE_MS), GATEWAY_OCCUPANCY_LEASE_MS: '1500' }
const PATH = '/realtime-events'

let receiver: Receiver
let gateway: GatewayProcess
let webhooks: Worker
let product: RealtimeProduct
let secret: string

beforeAll(async () => {
  receiver = startReceiver()
  product = await realtimeProduct([{ name: 'chat', presence: true }])
  secret = (await manage(product, 'POST', '/realtime/webhooks', { url: receiver.url(PATH), eventKinds: ['*'] })).secret
  ;[gateway, webhooks] = await Promise.all([startGateway(ENV), startProcess('webhooks', { ...ENV, WEBHOOK_POLL_MS: '50' })])
}, 30_000)
afterAll(async () => {
  await Promise.all([gateway?.stop(), webhooks?.stop()])
  receiver?.stop()
})

async function as(subject: string, channel: string, ops: TokenChannel['ops']) {
  const client = await WsClient.open(gateway.wsUrl)
  const signed = await signToken({ productId: product.productId, apiKeyId: product.keyId, subject, channels: [{ name: channel, ops }] })
  replied(await client.request({ type: 'connect', token: signed.token }), 'connect')
  return client
}

/** What the receiver got for `channel` so far, each verified (a bad signature throws). */
const received = (channel: string) => receiver.received(PATH)
  .map((request) => ({ id: request.headers['webhook-id'], ...verified(secret, request) }))
  .filter((event) => event.data.channel === channel)

test('a subscriber entering presence in two tabs, then leaving: occupied, member_added, member_removed and vacated, once each, signed, with the documented data', async () => {
  const channel = `chat:room-${randomUUID().slice(0, 8)}`
  const tab1 = await as('alice', channel, ['subscribe', 'presence'])
  const tab2 = await as('alice', channel, ['subscribe', 'presence'])
  // Both tabs subscribe and enter: closing one leaves the channel occupied and the identity present.
  replied(await tab1.request({ type: 'subscribe', channel }), 'subscribe')
  replied(await tab2.request({ type: 'subscribe', channel }), 'subscribe')
  replied(await tab1.request({ type: 'presence.enter', channel, info: { name: 'Alice' } }), 'enter')
  replied(await tab2.request({ type: 'presence.enter', channel }), 'enter')
  await eventually(() => received(channel).length >= 2, 10_000, 'occupied and added')
  tab1.close()
  await Bun.sleep(GRACE_MS + 1500) // the second tab still holds the identity and a subscription: no removal, no vacate
  expect(received(channel).map((e) => e.type).sort()).toEqual(['channel.occupied', 'presence.member_added'])
  tab2.close()
  await eventually(() => received(channel).length >= 4, 10_000, 'removed and vacated')
  await Bun.sleep(500) // nothing more comes
  const events = received(channel)
  expect(events.map((e) => e.type).sort()).toEqual(['channel.occupied', 'channel.vacated', 'presence.member_added', 'presence.member_removed'])
  expect(new Set(events.map((e) => e.id)).size).toBe(4)
  const added = events.find((e) => e.type === 'presence.member_added')!
  expect(added).toEqual({
    id: expect.stringMatching(/^msg_/), type: 'presence.member_added', timestamp: expect.any(String),
    data: { channel, namespace: 'chat', identity: 'ext:alice', info: { name: 'Alice' }, occurredAt: expect.any(String), sequence: expect.any(Number) },
  })
  const vacated = events.find((e) => e.type === 'channel.vacated')!
  expect(vacated.data).toEqual({ channel, namespace: 'chat', occurredAt: expect.any(String), sequence: expect.any(Number) })
  // The channel's sequence orders its events at the receiver, whatever order they arrived in (increasing, not contiguous).
  const ordered = [...events].sort((a, b) => a.data.sequence - b.data.sequence)
  expect(new Set(events.map((e) => e.data.sequence)).size).toBe(4)
  expect(ordered.slice(0, 2).map((e) => e.type)).toEqual(['channel.occupied', 'presence.member_added'])
}, 30_000)

test('a batch recorded twice (read again after a crash before its acknowledgement) is one message per event', async () => {
  const channel = `chat:direct-${randomUUID().slice(0, 8)}`
  const event = (n: number): HookEvent => ({
    id: `rt_0_${Date.now()}-${n}-${randomUUID().slice(0, 4)}`, productId: product.productId, kind: 'channel.occupied', channel,
    occurredAt: new Date().toISOString(), sequence: n, data: { channel, namespace: 'chat', occurredAt: new Date().toISOString(), sequence: n },
  })
  const batch = [event(1), event(2)]
  await recordHookEvents(batch)
  await recordHookEvents(batch)
  const [row] = await sql`select count(*)::int as n from webhook_messages where product_id = ${product.productId} and payload like ${`%${channel}%`}`
  expect(row!.n).toBe(2)
  await eventually(() => received(channel).length >= 2, 10_000, 'both delivered')
  await Bun.sleep(300)
  expect(received(channel).map((e) => e.data.sequence).sort()).toEqual([1, 2])
})

test('an entry no script writes (a foreign product id, an unknown kind) is dropped, not retried forever: the rest of its batch is recorded', async () => {
  const channel = `chat:odd-${randomUUID().slice(0, 8)}`
  const good: HookEvent = {
    id: `rt_0_${Date.now()}-9-${randomUUID().slice(0, 4)}`, productId: product.productId, kind: 'channel.vacated', channel,
    occurredAt: new Date().toISOString(), sequence: 1, data: { channel, namespace: 'chat', occurredAt: new Date().toISOString(), sequence: 1 },
  }
  await recordHookEvents([{ ...good, id: `${good.id}a`, productId: 'not-a-uuid' }, { ...good, id: `${good.id}b`, kind: 'message.deleted' as never }, good])
  await eventually(() => received(channel).length >= 1, 10_000, 'the good event')
  expect(received(channel).map((e) => e.type)).toEqual(['channel.vacated'])
})

test('a batch of a product with no realtime endpoint and one with: only the wanted events are recorded', async () => {
  const channel = `chat:mixed-${randomUUID().slice(0, 8)}`
  const event = (productId: string, n: number): HookEvent => ({
    id: `rt_0_${Date.now()}-${n}-${randomUUID().slice(0, 4)}`, productId, kind: 'channel.occupied', channel,
    occurredAt: new Date().toISOString(), sequence: n, data: { channel, namespace: 'chat', occurredAt: new Date().toISOString(), sequence: n },
  })
  const other = randomUUID() // no endpoint (no product, even): nothing recorded, nothing thrown
  await recordHookEvents([event(other, 1), event(product.productId, 2), event(other, 3)])
  const rows = await sql`select product_id from webhook_messages where payload like ${`%${channel}%`}`
  expect(rows.map((r) => r.product_id)).toEqual([product.productId])
})
