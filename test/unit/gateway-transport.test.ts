// The gateway's socket side as it runs (gateway/transport.ts: Writer, SocketTransport, SocketTopics) over a recording
// stand-in for Bun's ServerWebSocket: frames queued during a fan-out batch go out before a topic joined after them,
// a write that takes a socket past the limit closes its connection 4200, and the sender of a client event is skipped.
import { expect, test } from 'bun:test'
import type { Server } from 'bun'
import type { Connection } from '../../gateway/client'
import { type Socket, SocketTopics, SocketTransport, Writer } from '../../gateway/transport'
import { registry } from '../../shared/metrics/registry'

const LIMIT = 100

/** What the runtime's socket does, as far as the gateway uses it; `out` is everything that reached the client. */
class RecordingSocket {
  readonly out: string[] = []
  readonly subscriptions = new Set<string>()
  buffered = 0
  closed: { code: number; reason: string } | undefined
  constructor(readonly data: SocketTransport, private readonly server: RecordingServer) {}
  send(frame: string): number {
    this.out.push(frame)
    this.buffered += frame.length
    return frame.length
  }
  cork(write: () => void): void {
    write()
  }
  subscribe(topic: string): void {
    this.subscriptions.add(topic)
  }
  unsubscribe(topic: string): void {
    this.subscriptions.delete(topic)
  }
  isSubscribed(topic: string): boolean {
    return this.subscriptions.has(topic)
  }
  /** From this socket: every subscriber of the topic but itself. */
  publish(topic: string, frame: string): void {
    this.server.publish(topic, frame, this)
  }
  getBufferedAmount(): number {
    return this.buffered
  }
  close(code: number, reason: string): void {
    this.closed = { code, reason }
  }
}

class RecordingServer {
  readonly sockets: RecordingSocket[] = []
  publish(topic: string, frame: string, except?: RecordingSocket): void {
    for (const socket of this.sockets) if (socket !== except && socket.isSubscribed(topic)) socket.send(frame)
  }
}

/** A socket opened on the gateway, bound to a connection that records how it was told to close. */
function open(server: RecordingServer, writer: Writer, topics: SocketTopics, id: string) {
  const transport = new SocketTransport(writer)
  const socket = new RecordingSocket(transport, server)
  server.sockets.push(socket)
  const disconnects: number[] = []
  const connection = { id, disconnect: (reason: { code: number }) => void disconnects.push(reason.code) } as unknown as Connection
  topics.opened(socket as unknown as Socket, connection)
  return { socket, transport, connection, disconnects }
}

function gateway() {
  const server = new RecordingServer()
  const writer = new Writer(LIMIT)
  const topics = new SocketTopics()
  topics.attach(server as unknown as Server<SocketTransport>)
  return { server, writer, topics }
}

test('frames queued for a socket during a batch are written before the topic it joins, and topic frames after them', () => {
  const { server, writer, topics } = gateway()
  const { socket, transport } = open(server, writer, topics, 'a')
  writer.startBatch()
  transport.send('history 1')
  transport.send('history 2')
  expect(socket.out).toEqual([]) // held until the batch ends
  transport.subscribe('t') // going live: what waited goes out first
  topics.publish('t', 'live 3')
  writer.endBatch()
  expect(socket.out).toEqual(['history 1', 'history 2', 'live 3'])
})

test('a direct write that takes a socket past the limit closes its connection 4200; a socket within it stays', () => {
  const { server, writer, topics } = gateway()
  const slow = open(server, writer, topics, 'slow')
  const fine = open(server, writer, topics, 'fine')
  slow.socket.buffered = LIMIT - 5
  slow.transport.send('0123456789')
  fine.transport.send('0123456789')
  expect(slow.disconnects).toEqual([4200])
  expect(fine.disconnects).toEqual([])
  // Queued in a batch: checked when the batch writes it out.
  fine.socket.buffered = LIMIT
  writer.startBatch()
  fine.transport.send('x')
  expect(fine.disconnects).toEqual([])
  writer.endBatch()
  expect(fine.disconnects).toEqual([4200])
})

test('a topic publish skips the sender of a client event when it is subscribed; the published topics are handed over once', () => {
  const { server, writer, topics } = gateway()
  const sender = open(server, writer, topics, 'sender')
  const other = open(server, writer, topics, 'other')
  for (const { transport } of [sender, other]) transport.subscribe('t')
  topics.publish('t', 'event', 'sender')
  expect(sender.socket.out).toEqual([])
  expect(other.socket.out).toEqual(['event'])
  topics.publish('t', 'publication')
  expect(sender.socket.out).toEqual(['publication'])
  expect(topics.unchecked).toBe('event'.length + 'publication'.length)
  expect([...topics.takePublished()]).toEqual(['t'])
  expect([...topics.takePublished()]).toEqual([])
  expect(topics.unchecked).toBe(0)
  expect(topics.connectionOf('sender')).toBe(sender.connection)
  topics.closed(sender.socket as unknown as Socket)
  expect(topics.connectionOf('sender')).toBeUndefined()
})

/** platform_gateway_closes_total by code, all codes together under `all`. */
async function closesByCode(): Promise<Record<string, number>> {
  const metric = registry.getSingleMetric('platform_gateway_closes_total')
  const values = metric ? (await metric.get()).values : []
  const counts: Record<string, number> = { all: 0 }
  for (const { labels, value } of values) {
    counts[String(labels.code)] = value
    counts.all! += value
  }
  return counts
}

test('a close whose last frames take the socket past the limit closes it once, counted once under its own code', async () => {
  const { server, writer, topics } = gateway()
  const transport = new SocketTransport(writer)
  const socket = new RecordingSocket(transport, server)
  const closeCalls: number[] = []
  const close = socket.close.bind(socket)
  socket.close = (code, reason) => {
    closeCalls.push(code)
    close(code, reason)
  }
  // As Connection.disconnect does: close the transport (the slow-consumer check may call back in here while it flushes).
  let closed = false
  const connection = {
    id: 'closing',
    disconnect: (reason: { code: number; reason: string }) => {
      if (closed) return
      transport.close(reason.code, reason.reason)
      closed = true
    },
  } as unknown as Connection
  topics.opened(socket as unknown as Socket, connection)
  const before = await closesByCode()
  writer.startBatch()
  transport.send('a frame queued before the close')
  socket.buffered = LIMIT // the flush finds it over the limit
  connection.disconnect({ code: 4001, reason: 'invalid token', reconnect: false } as never)
  writer.endBatch()
  const after = await closesByCode()
  expect(closeCalls).toEqual([4001])
  expect(after.all! - before.all!).toBe(1)
  expect((after['4001'] ?? 0) - (before['4001'] ?? 0)).toBe(1)
})
