// WebSocket test helpers: real gateway processes and real WebSocket clients with a frame queue.
import { freePort, startWorker, type Worker } from '../helpers'

export interface Frame {
  type: string
  id?: string | number | null
  [field: string]: any
}

/** A WebSocket client that keeps every frame it receives and can wait for the next matching one. */
export class WsClient {
  readonly frames: Frame[] = []
  readonly closed: Promise<{ code: number; reason: string }>
  private nextId = 1
  private listeners: (() => void)[] = []

  private constructor(readonly ws: WebSocket) {
    ws.addEventListener('message', (event) => {
      this.frames.push(JSON.parse(String(event.data)))
      for (const listener of this.listeners.splice(0)) listener()
    })
    this.closed = new Promise((resolve) => ws.addEventListener('close', (event) => {
      resolve({ code: event.code, reason: event.reason })
      for (const listener of this.listeners.splice(0)) listener()
    }))
  }

  /** `headers` on the upgrade request (Bun's WebSocket takes them), e.g. an X-Forwarded-For. */
  static open(url: string, headers?: Record<string, string>): Promise<WsClient> {
    const ws = headers ? new WebSocket(url, { headers } as unknown as string[]) : new WebSocket(url)
    return new Promise((resolve, reject) => {
      ws.addEventListener('open', () => resolve(new WsClient(ws)), { once: true })
      ws.addEventListener('error', () => reject(new Error(`cannot open ${url}`)), { once: true })
    })
  }

  send(frame: unknown): void {
    this.ws.send(typeof frame === 'string' ? frame : JSON.stringify(frame))
  }

  /** Waits for (and removes) the first frame matching `match`. */
  async next(match: (frame: Frame) => boolean = () => true, timeoutMs = 5000): Promise<Frame> {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const index = this.frames.findIndex(match)
      if (index >= 0) return this.frames.splice(index, 1)[0]!
      if (this.ws.readyState === WebSocket.CLOSED) throw new Error(`closed while waiting; frames: ${JSON.stringify(this.frames)}`)
      const left = deadline - Date.now()
      if (left <= 0) throw new Error(`no matching frame in ${timeoutMs} ms; frames: ${JSON.stringify(this.frames).slice(0, 500)}`)
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left)
        this.listeners.push(() => (clearTimeout(timer), resolve()))
      })
    }
  }

  /** Sends a request with a fresh id and waits for its reply or error frame. */
  async request(frame: Record<string, unknown>): Promise<Frame> {
    const id = `r${this.nextId++}`
    this.send({ ...frame, id })
    return this.next((f) => f.id === id && (f.type === 'reply' || f.type === 'error'))
  }

  /** Publications received so far on `channel`, removed from the queue. */
  publications(channel: string): Frame[] {
    const taken = this.frames.filter((f) => f.type === 'publication' && f.channel === channel)
    for (const f of taken) this.frames.splice(this.frames.indexOf(f), 1)
    return taken
  }

  close(): void {
    this.ws.close()
  }
}

/** A setup request's answer, checked: unless it is a reply, throws naming the request with the frame it got instead. */
export function replied(frame: Frame, what: string): Frame {
  if (frame.type !== 'reply') throw new Error(`${what}: ${JSON.stringify(frame).slice(0, 2000)}`)
  return frame
}

export interface GatewayProcess extends Worker {
  wsUrl: string
}

/**
 * A real gateway process on its own port, or on `port` beside others (reusePort); awaited ready, or only live
 * (`/healthz`) for one that cannot be ready (its PostgreSQL refuses it).
 */
export async function startGateway(env: Record<string, string> = {}, port?: number, waitFor: '/readyz' | '/healthz' = '/readyz'): Promise<GatewayProcess> {
  port ??= await freePort()
  const worker = await startWorker('gateway/main.ts', {
    GATEWAY_PORT: String(port), GATEWAY_URL: `ws://127.0.0.1:${port}/connection/websocket`, ...env,
  }, port, waitFor)
  return { ...worker, wsUrl: `ws://127.0.0.1:${port}/connection/websocket` }
}

/**
 * A WebSocket client on a raw TCP socket that can stop reading (a slow consumer), which no WebSocket API allows.
 * Client frames are masked as the protocol requires; server frames are parsed only far enough to find text and close.
 */
export class RawWsClient {
  private buffer: Buffer = Buffer.alloc(0)
  readonly texts: string[] = []
  closeCode: number | null = null
  /** True once the TCP connection ended. */
  ended = false
  private constructor(private readonly socket: import('node:net').Socket) {
    socket.on('close', () => (this.ended = true))
    socket.on('data', (chunk: Buffer) => {
      this.buffer = Buffer.concat([this.buffer, chunk])
      this.parse()
    })
    socket.on('error', () => {})
  }

  static async open(port: number, path = '/connection/websocket'): Promise<RawWsClient> {
    const { connect } = await import('node:net')
    const socket = connect(port, '127.0.0.1')
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve)
      socket.once('error', reject)
    })
    const key = Buffer.from(crypto.getRandomValues(new Uint8Array(16))).toString('base64')
    socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`)
    const head = await new Promise<Buffer>((resolve) => {
      let data = Buffer.alloc(0)
      const onData = (chunk: Buffer) => {
        data = Buffer.concat([data, chunk])
        const end = data.indexOf('\r\n\r\n')
        if (end >= 0) {
          socket.off('data', onData)
          resolve(data)
        }
      }
      socket.on('data', onData)
    })
    const end = head.indexOf('\r\n\r\n') + 4
    if (!head.subarray(0, end).toString().startsWith('HTTP/1.1 101')) throw new Error(`no upgrade: ${head.toString().slice(0, 100)}`)
    const client = new RawWsClient(socket)
    if (head.length > end) {
      client.buffer = head.subarray(end)
      client.parse()
    }
    return client
  }

  sendText(text: string): void {
    const payload = Buffer.from(text)
    const mask = Buffer.from(crypto.getRandomValues(new Uint8Array(4)))
    const header = payload.length < 126
      ? Buffer.from([0x81, 0x80 | payload.length])
      : Buffer.from([0x81, 0x80 | 126, payload.length >> 8, payload.length & 0xff])
    const masked = Buffer.from(payload.map((byte, i) => byte ^ mask[i % 4]!))
    this.socket.write(Buffer.concat([header, mask, masked]))
  }

  pause(): void {
    this.socket.pause()
  }

  resume(): void {
    this.socket.resume()
  }

  destroy(): void {
    this.socket.destroy()
  }

  private parse(): void {
    for (;;) {
      if (this.buffer.length < 2) return
      const opcode = this.buffer[0]! & 0x0f
      let length = this.buffer[1]! & 0x7f
      let offset = 2
      if (length === 126) {
        if (this.buffer.length < 4) return
        length = this.buffer.readUInt16BE(2)
        offset = 4
      } else if (length === 127) {
        if (this.buffer.length < 10) return
        length = Number(this.buffer.readBigUInt64BE(2))
        offset = 10
      }
      if (this.buffer.length < offset + length) return
      const payload = this.buffer.subarray(offset, offset + length)
      if (opcode === 0x1) this.texts.push(payload.toString())
      if (opcode === 0x8) this.closeCode = payload.length >= 2 ? payload.readUInt16BE(0) : 1005
      this.buffer = this.buffer.subarray(offset + length)
    }
  }
}
