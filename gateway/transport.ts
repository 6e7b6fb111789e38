// The socket side of the gateway: the Transport a connection writes to, and its Bun WebSocket implementation. A frame
// for one connection goes through the Writer (outside a fan-out batch at once; during one queued per socket and written
// under one cork when the batch is done); a publication for a topic's live subscribers goes out once through the
// runtime's topic publish (SocketTopics). A socket past the gateway's buffer limit is closed 4200 (slow consumer).
import type { Server, ServerWebSocket } from 'bun'
import type { Connection } from './client'
import { DISCONNECTS } from './disconnect'
import { gatewayMetrics } from './metrics'

/** The socket as the client sees it: Bun's ServerWebSocket is touched only through this. */
export interface Transport {
  send(frame: string): void
  close(code: number, reason: string): void
  /** Joins the runtime topic a live subscription is published on (after writing out what was sent to it before). */
  subscribe(topic: string): void
  unsubscribe(topic: string): void
  /** Bytes written but not yet taken by the client. */
  buffered(): number
}

export type Socket = ServerWebSocket<SocketTransport>

/** The connection a socket carries, closed 4200 when its socket is past the buffer limit. */
const slow = (ws: Socket) => ws.data.connection?.disconnect(DISCONNECTS.slowConsumer)

export class Writer {
  private batching = false
  private readonly queued = new Map<Socket, string[]>()

  /** `limit`: the most bytes a socket may hold unsent (config.realtime.gatewayMaxBufferedBytes). */
  constructor(private readonly limit: number) {}

  /** A fan-out batch starts: frames are queued until `endBatch`. */
  startBatch(): void {
    this.batching = true
  }

  endBatch(): void {
    this.batching = false
    for (const ws of [...this.queued.keys()]) this.flush(ws)
  }

  send(ws: Socket, frame: string): void {
    if (!this.batching) return this.write(ws, frame)
    const frames = this.queued.get(ws)
    if (frames) frames.push(frame)
    else this.queued.set(ws, [frame])
  }

  /** Writes out what waits for `ws`, in order. */
  flush(ws: Socket): void {
    const frames = this.queued.get(ws)
    if (!frames) return
    this.queued.delete(ws)
    ws.cork(() => {
      for (const frame of frames) this.write(ws, frame)
    })
  }

  private write(ws: Socket, frame: string): void {
    if (ws.send(frame) === 0 || ws.getBufferedAmount() > this.limit) slow(ws)
  }
}

/**
 * A connection's view of its socket, and the socket's data (one object per connection, its methods shared: no
 * closures per socket). Made at the upgrade; bound to its socket and connection when the socket opens.
 */
export class SocketTransport implements Transport {
  private ws!: Socket
  connection: Connection | undefined
  private closing = false

  /** `ip`: the client's address (gateway/limits.ts counts `connect` frames by it). */
  constructor(private readonly writer: Writer, readonly ip = '127.0.0.1') {}

  bind(ws: Socket, connection: Connection): void {
    this.ws = ws
    this.connection = connection
  }

  send(frame: string): void {
    this.writer.send(this.ws, frame)
  }

  close(code: number, reason: string): void {
    // Set before the flush: the flush may find the socket past the limit and close it 4200 from inside this call; the
    // close under way wins, so a socket is closed, and counted, once.
    if (this.closing) return
    this.closing = true
    this.writer.flush(this.ws)
    gatewayMetrics.closed(code)
    this.ws.close(code, reason)
  }

  /** What was queued for it goes out first: the topic's frames are written at once, and must come after. */
  subscribe(topic: string): void {
    this.writer.flush(this.ws)
    this.ws.subscribe(topic)
  }

  unsubscribe(topic: string): void {
    this.ws.unsubscribe(topic)
  }

  buffered(): number {
    return this.ws.getBufferedAmount()
  }
}

/**
 * The runtime's topic publish, one native call per publication for every live subscriber of this gateway, and the
 * sockets open here by connection id (a client event skips its sender). It keeps which topics it published to, and
 * how many bytes, since the last buffer check: the runtime drops silently what would pass its own limit, so the
 * dispatcher checks those topics' sockets against the gateway's (gateway/dispatch.ts).
 */
export class SocketTopics {
  private server: Server<SocketTransport> | undefined
  private readonly sockets = new Map<string, Socket>()
  private published = new Set<string>()
  /** Bytes published since the last `takePublished`. */
  unchecked = 0

  /** The server whose topics are published to (made after the dispatcher that publishes through this). */
  attach(server: Server<SocketTransport>): void {
    this.server = server
  }

  /** A socket opened: its connection can be found by id (and skipped as the sender of a client event). */
  opened(ws: Socket, connection: Connection): void {
    ws.data.bind(ws, connection)
    this.sockets.set(connection.id, ws)
  }

  closed(ws: Socket): void {
    if (ws.data.connection) this.sockets.delete(ws.data.connection.id)
  }

  /** The connection open on this gateway under this id, if any. */
  connectionOf(connectionId: string): Connection | undefined {
    return this.sockets.get(connectionId)?.data.connection
  }

  /** Writes `frame` to every socket subscribed to `topic` but the connection `skip`. A property: handed to Hub.publish as is. */
  readonly publish = (topic: string, frame: string, skip?: string): void => {
    // Published from the skipped connection's socket, when it is here and subscribed, the runtime leaves that socket out.
    const sender = skip ? this.sockets.get(skip) : undefined
    if (sender?.isSubscribed(topic)) sender.publish(topic, frame)
    else this.server!.publish(topic, frame)
    this.published.add(topic)
    this.unchecked += frame.length
  }

  /** The topics published to since the last call (forgotten, with their byte count). */
  takePublished(): Set<string> {
    const published = this.published
    this.published = new Set()
    this.unchecked = 0
    return published
  }
}
