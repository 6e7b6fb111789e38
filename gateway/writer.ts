// Writes frames to the gateway's sockets. Outside a fan-out batch a frame is written at once; while a batch is being
// delivered, frames wait per socket and go out under one cork per socket when it is done (one write instead of one
// per frame). A socket past the gateway's buffer limit is reported as a slow consumer (closed 4200 by the caller).
import type { ServerWebSocket } from 'bun'
import type { Connection, Transport } from './client'

export type Socket = ServerWebSocket<SocketTransport>

export class Writer {
  private batching = false
  private readonly queued = new Map<Socket, string[]>()

  constructor(private readonly limit: number, private readonly slow: (ws: Socket) => void) {}

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
    if (ws.send(frame) === 0 || ws.getBufferedAmount() > this.limit) this.slow(ws)
  }
}

/**
 * A connection's view of its socket, and the socket's data (one object per connection, its methods shared: no
 * closures per socket). Made at the upgrade; bound to its socket and connection when the socket opens.
 */
export class SocketTransport implements Transport {
  private ws!: Socket
  connection: Connection | undefined

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
    this.writer.flush(this.ws)
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
