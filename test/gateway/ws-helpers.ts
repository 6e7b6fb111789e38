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

  static open(url: string): Promise<WsClient> {
    const ws = new WebSocket(url)
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

export interface GatewayProcess extends Worker {
  wsUrl: string
}

/** A real gateway process on its own port. */
export async function startGateway(env: Record<string, string> = {}): Promise<GatewayProcess> {
  const port = await freePort()
  const worker = await startWorker('gateway/main.ts', {
    GATEWAY_PORT: String(port), GATEWAY_URL: `ws://127.0.0.1:${port}/connection/websocket`, ...env,
  }, port)
  return { ...worker, wsUrl: `ws://127.0.0.1:${port}/connection/websocket` }
}
