// One gateway connection driven through its life with in-memory backends (test/unit/gateway-fakes.ts): connect,
// subscribe with a cursor while publications arrive, live delivery through the dispatcher, unsubscribe; a forbidden
// subscribe; a slow consumer closed 4200.
import { expect, setSystemTime, test } from 'bun:test'
import { Dispatcher } from '../../gateway/dispatch'
import { DISCONNECTS } from '../../gateway/disconnect'
import { topicOf } from '../../gateway/hub'
import type { Op } from '../../shared/realtime/names'
import { memoryGateway, namespace, noBatching, PRODUCT, request } from './gateway-fakes'

const LIMIT = 1024

/** Two connections, connected and subscribed to `channel` with a token carrying `ops` on it. */
async function subscribers(gateway: ReturnType<typeof memoryGateway>, channel: string, ops: Op[]) {
  const clients = [gateway.open(), gateway.open()] as const
  for (const { connection } of clients) {
    await request(connection, { type: 'connect', id: 1, token: gateway.token([{ name: channel, ops }]) })
    await request(connection, { type: 'subscribe', id: 2, channel })
  }
  return clients
}

const kinds = (frames: Record<string, unknown>[]) => frames.map((f) => (f.type === 'publication' ? `publication ${f.offset}` : `${f.type} ${f.to ?? f.code ?? ''}`.trim()))

test('connect, subscribe with a cursor while publications arrive, a live publication, unsubscribe: each message once, in order', async () => {
  const gateway = memoryGateway([namespace('chat', { history: true })])
  const dispatcher = new Dispatcher(gateway.hub, gateway.topics, noBatching, gateway.backends.usage, LIMIT)
  const channel = 'chat:room'
  for (const n of [1, 2, 3]) gateway.broker.append(PRODUCT, channel, { n })
  const { transport, connection } = gateway.open()

  await request(connection, { type: 'connect', id: 1, token: gateway.token([{ name: channel, ops: ['subscribe'] }]) })
  expect(transport.take()).toEqual([expect.objectContaining({ type: 'reply', id: 1, to: 'connect', client: connection.id, subject: 'ext:tester' })])
  expect(gateway.usage).toEqual([{ productId: PRODUCT, change: 1 }])

  // The shard read is slow: publications 4 and 5 reach the subscription while it is set up, and are in the history
  // read after it too (buffered and replayed: sent once).
  let release!: () => void
  gateway.shards.ready = new Promise((resolve) => (release = resolve))
  const subscribed = request(connection, { type: 'subscribe', id: 2, channel, offset: 1, epoch: 'epoch-1' })
  await Bun.sleep(1)
  dispatcher.deliver(gateway.broker.append(PRODUCT, channel, { n: 4 }))
  dispatcher.deliver(gateway.broker.append(PRODUCT, channel, { n: 5 }))
  dispatcher.batchDone()
  expect(transport.take()).toEqual([]) // nothing before the subscribe reply
  release()
  await subscribed
  const replayed = transport.take()
  expect(kinds(replayed)).toEqual(['reply subscribe', 'publication 2', 'publication 3', 'publication 4', 'publication 5'])
  expect(replayed[0]).toEqual({ type: 'reply', id: 2, to: 'subscribe', channel, offset: 5, epoch: 'epoch-1', recovered: true })

  // The next publication proves the reader caught up: delivered, and the subscription goes live on the channel's topic.
  dispatcher.deliver(gateway.broker.append(PRODUCT, channel, { n: 6 }))
  expect(kinds(transport.take())).toEqual(['publication 6'])
  expect([...transport.topics]).toEqual([topicOf(PRODUCT, channel)])
  dispatcher.deliver(gateway.broker.append(PRODUCT, channel, { n: 7 }))
  dispatcher.batchDone()
  expect(transport.take()).toEqual([{ type: 'publication', channel, id: 'm7', offset: 7, epoch: 'epoch-1', data: { n: 7 } }])
  expect(gateway.usage.filter((u) => u.add).map((u) => u.add)).toEqual([{ deliveries: 1 }, { deliveries: 1 }, { deliveries: 1 }, { deliveries: 1 }])

  await request(connection, { type: 'unsubscribe', id: 3, channel })
  expect(transport.take()).toEqual([{ type: 'reply', id: 3, to: 'unsubscribe', channel }])
  expect(transport.topics.size).toBe(0)
  expect(gateway.hub.subscriberCount(PRODUCT, channel)).toBe(0)
  expect(gateway.shards.wanted.size).toBe(0) // its shard is no longer read
  dispatcher.deliver(gateway.broker.append(PRODUCT, channel, { n: 8 }))
  expect(transport.take()).toEqual([])
  connection.cleanup()
  expect(gateway.context.connections.size).toBe(0)
})

test('a publication that arrives after the history read but before the reply reaches the client once, after the history', async () => {
  const gateway = memoryGateway([namespace('chat', { history: true })])
  const dispatcher = new Dispatcher(gateway.hub, gateway.topics, noBatching, gateway.backends.usage, LIMIT)
  const channel = 'chat:race'
  for (const n of [1, 2, 3]) gateway.broker.append(PRODUCT, channel, { n })
  const { transport, connection } = gateway.open()
  await request(connection, { type: 'connect', id: 1, token: gateway.token([{ name: channel, ops: ['subscribe'] }]) })
  transport.take()
  // The history read has its entries (2 and 3) and is held: publication 4 is not in it, only in the subscription's buffer.
  let read!: () => void
  let release!: () => void
  const wasRead = new Promise<void>((resolve) => (read = resolve))
  gateway.broker.afterRead = () => (read(), new Promise<void>((resolve) => (release = resolve)))
  const subscribed = request(connection, { type: 'subscribe', id: 2, channel, offset: 1, epoch: 'epoch-1' })
  await wasRead
  dispatcher.deliver(gateway.broker.append(PRODUCT, channel, { n: 4 }))
  dispatcher.batchDone()
  expect(transport.take()).toEqual([])
  release()
  await subscribed
  expect(kinds(transport.take())).toEqual(['reply subscribe', 'publication 2', 'publication 3', 'publication 4'])
  dispatcher.deliver(gateway.broker.append(PRODUCT, channel, { n: 5 }))
  expect(kinds(transport.take())).toEqual(['publication 5'])
  connection.cleanup()
})

test('a subscribe the token does not carry, or on a namespace no longer registered, is answered forbidden; the connection stays', async () => {
  const gateway = memoryGateway([namespace('chat')])
  const { transport, connection } = gateway.open()
  await request(connection, { type: 'connect', id: 1, token: gateway.token([{ name: 'chat:a', ops: ['subscribe'] }, { name: 'gone:a', ops: ['subscribe'] }]) })
  await request(connection, { type: 'subscribe', id: 2, channel: 'chat:b' })
  await request(connection, { type: 'subscribe', id: 3, channel: 'gone:a' })
  await request(connection, { type: 'subscribe', id: 4, channel: 'chat:a' })
  expect(transport.take().map((f) => [f.id, f.type, f.code ?? f.to])).toEqual([
    [1, 'reply', 'connect'], [2, 'error', 'forbidden'], [3, 'error', 'forbidden'], [4, 'reply', 'subscribe'],
  ])
  expect(transport.closed).toBeUndefined()
  expect(gateway.hub.subscriberCount(PRODUCT, 'chat:b')).toBe(0)
  connection.cleanup()
})

test('a token whose API key is revoked closes the connection 4001 at connect', async () => {
  const gateway = memoryGateway([namespace('chat')])
  gateway.revoked.add('00000000-0000-4000-8000-0000000000cc')
  const { transport, connection } = gateway.open()
  await request(connection, { type: 'connect', id: 1, token: gateway.token([], '00000000-0000-4000-8000-0000000000cc') })
  expect(transport.closed).toEqual({ code: 4001, reason: expect.stringContaining('api key revoked') })
  expect(gateway.context.connections.size).toBe(0)
})

test('a console token reads presence but cannot enter it: its identity never joins a roster; an end user\'s token enters', async () => {
  const gateway = memoryGateway([namespace('chat', { presence: true })])
  const channel = 'chat:watched'
  const ops: Op[] = ['subscribe', 'presence']
  const watcher = gateway.open()
  await request(watcher.connection, { type: 'connect', id: 1, token: gateway.token([{ name: channel, ops }], undefined, 'ext:console:00000000-0000-4000-8000-0000000000dd') })
  await request(watcher.connection, { type: 'presence.enter', id: 2, channel })
  await request(watcher.connection, { type: 'presence.update', id: 3, channel, info: { x: 1 } })
  await request(watcher.connection, { type: 'presence.read', id: 4, channel })
  expect(watcher.transport.take().map((f) => [f.id, f.type, f.code ?? f.to])).toEqual([
    [1, 'reply', 'connect'], [2, 'error', 'forbidden'], [3, 'error', 'forbidden'], [4, 'reply', 'presence.read'],
  ])
  expect(gateway.presence.entries.get(channel)?.size ?? 0).toBe(0)
  const user = gateway.open()
  await request(user.connection, { type: 'connect', id: 1, token: gateway.token([{ name: channel, ops }]) })
  await request(user.connection, { type: 'presence.enter', id: 2, channel })
  expect(user.transport.take().map((f) => [f.id, f.type, f.code ?? f.to])).toEqual([[1, 'reply', 'connect'], [2, 'reply', 'presence.enter']])
  expect([...gateway.presence.entries.get(channel)!.values()].map((e) => e.identity)).toEqual(['ext:tester'])
  expect(watcher.transport.closed).toBeUndefined()
  watcher.connection.cleanup()
  user.connection.cleanup()
})

test('a live subscriber whose socket holds more than the limit unread after a batch is closed 4200; the others stay', async () => {
  const gateway = memoryGateway([namespace('chat')])
  const dispatcher = new Dispatcher(gateway.hub, gateway.topics, noBatching, gateway.backends.usage, LIMIT)
  const channel = 'chat:busy'
  const clients = await subscribers(gateway, channel, ['subscribe'])
  // Without history the subscriptions are live at once: one topic publish reaches both.
  expect(clients.map(({ transport }) => transport.topics.size)).toEqual([1, 1])
  const [slow, fine] = clients
  slow.transport.unread = LIMIT + 1
  dispatcher.deliver({ shard: 0, product: PRODUCT, channel, id: 'x', t: 0, d: '"hello"' })
  dispatcher.batchDone()
  expect(slow.transport.closed?.code).toBe(4200)
  expect(fine.transport.closed).toBeUndefined()
  expect(fine.transport.frames.at(-1)).toEqual({ type: 'publication', channel, id: 'x', data: 'hello' })
  expect(gateway.hub.subscriberCount(PRODUCT, channel)).toBe(1)
  fine.connection.cleanup()
})

test('a client event reaches every subscriber here but its sender, and counts only those deliveries', async () => {
  const gateway = memoryGateway([namespace('chat', { clientEvents: true })])
  const dispatcher = new Dispatcher(gateway.hub, gateway.topics, noBatching, gateway.backends.usage, LIMIT)
  const channel = 'chat:talk'
  const clients = await subscribers(gateway, channel, ['subscribe', 'publish'])
  const [sender, other] = clients
  for (const { transport } of clients) transport.take()
  await request(sender.connection, { type: 'publish', id: 3, channel, data: { hi: 1 } })
  expect(sender.transport.take()).toEqual([{ type: 'reply', id: 3, to: 'publish', channel, messageId: 'event1' }])
  expect(gateway.broker.events).toEqual([{ channel, data: '{"hi":1}', sender: sender.connection.id }])
  gateway.usage.length = 0
  dispatcher.deliver({ shard: 0, product: PRODUCT, channel, id: 'event1', t: 0, d: '{"hi":1}', sender: sender.connection.id })
  expect(sender.transport.take()).toEqual([])
  expect(other.transport.take()).toEqual([{ type: 'publication', channel, id: 'event1', data: { hi: 1 } }])
  expect(gateway.usage).toEqual([{ productId: PRODUCT, channel, add: { deliveries: 1 } }])
  for (const { connection } of clients) connection.cleanup()
})

test('a client event from a connection that does not subscribe to the channel counts a delivery for every subscriber', async () => {
  const gateway = memoryGateway([namespace('chat', { clientEvents: true })])
  const dispatcher = new Dispatcher(gateway.hub, gateway.topics, noBatching, gateway.backends.usage, LIMIT)
  const channel = 'chat:talk'
  const listeners = await subscribers(gateway, channel, ['subscribe'])
  const sender = gateway.open()
  await request(sender.connection, { type: 'connect', id: 1, token: gateway.token([{ name: channel, ops: ['publish'] }]) })
  await request(sender.connection, { type: 'publish', id: 2, channel, data: 'hi' })
  gateway.usage.length = 0
  dispatcher.deliver({ shard: 0, product: PRODUCT, channel, id: 'event1', t: 0, d: '"hi"', sender: sender.connection.id })
  expect(listeners.map(({ transport }) => transport.frames.at(-1))).toEqual([0, 1].map(() => ({ type: 'publication', channel, id: 'event1', data: 'hi' })))
  expect(gateway.usage).toEqual([{ productId: PRODUCT, channel, add: { deliveries: 2 } }])
  // Once the sender's socket is gone, nobody is skipped either.
  sender.connection.disconnect(DISCONNECTS.draining)
  await Bun.sleep(0)
  expect(gateway.topics.connectionOf(sender.connection.id)).toBeUndefined()
  gateway.usage.length = 0
  dispatcher.deliver({ shard: 0, product: PRODUCT, channel, id: 'event2', t: 0, d: '"hi"', sender: sender.connection.id })
  expect(gateway.usage).toEqual([{ productId: PRODUCT, channel, add: { deliveries: 2 } }])
  for (const { connection } of listeners) connection.cleanup()
})

test('presence: enter puts the connection on the roster, update needs an entry, leave and closing take it off', async () => {
  const gateway = memoryGateway([namespace('chat', { presence: true })])
  const channel = 'chat:lobby'
  const { transport, connection } = gateway.open()
  await request(connection, { type: 'connect', id: 1, token: gateway.token([{ name: channel, ops: ['subscribe', 'presence'] }, { name: 'chat:b', ops: ['presence'] }]) })
  await request(connection, { type: 'presence.update', id: 2, channel, info: { away: true } })
  await request(connection, { type: 'presence.enter', id: 3, channel, info: { name: 'Ann' } })
  await request(connection, { type: 'presence.read', id: 4, channel })
  await request(connection, { type: 'presence.leave', id: 5, channel })
  await request(connection, { type: 'presence.leave', id: 6, channel })
  const frames = transport.take().slice(1)
  expect(frames[2]!.members).toEqual([{ identity: 'ext:tester', connections: 1, info: { name: 'Ann' } }])
  expect(frames.map((f) => [f.id, f.type, f.code ?? f.to])).toEqual([
    [2, 'error', 'invalid'], [3, 'reply', 'presence.enter'], [4, 'reply', 'presence.read'],
    [5, 'reply', 'presence.leave'], [6, 'error', 'invalid'],
  ])
  expect(gateway.presence.entries.get(channel)?.size).toBe(0)
  await request(connection, { type: 'presence.enter', id: 7, channel: 'chat:b' })
  expect(gateway.presence.entries.get('chat:b')?.size).toBe(1)
  connection.cleanup()
  await Bun.sleep(0)
  expect(gateway.presence.entries.get('chat:b')?.size).toBe(0)
})

test('client events past 5 a second (burst 10) on one connection are answered rate_limited before reaching the broker', async () => {
  // The clock stands still, so the bucket refills nothing however slowly the eleven requests run. Frozen at the present:
  // Bun's timers follow the set time, and one set in the past would hold back the timers of the tests after this one.
  setSystemTime(new Date())
  try {
    const gateway = memoryGateway([namespace('chat', { clientEvents: true })])
    const channel = 'chat:fast'
    const { transport, connection } = gateway.open()
    await request(connection, { type: 'connect', id: 0, token: gateway.token([{ name: channel, ops: ['publish'] }]) })
    for (let id = 1; id <= 11; id++) await request(connection, { type: 'publish', id, channel, data: id })
    const answers = transport.take().slice(1)
    expect(answers.slice(0, 10).every((f) => f.type === 'reply')).toBe(true)
    expect(answers[10]).toEqual(expect.objectContaining({ type: 'error', id: 11, code: 'rate_limited', message: 'more than 5 client events a second (burst 10) on this connection' }))
    expect(gateway.broker.events.length).toBe(10)
    connection.cleanup()
  } finally {
    setSystemTime()
  }
})
