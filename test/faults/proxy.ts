// A TCP fault-injection proxy for tests: it stands between worker processes and PostgreSQL or Redis and can cut, stall
// and restore the link, as a crashed server or a frozen network would. Bun's native sockets, no dependencies.
import type { Socket, TCPSocketListener } from 'bun'

export interface FaultProxy {
  /** The 127.0.0.1 port the proxy listens on; the same across cut and restore. */
  readonly port: number
  /** A service URL with its host and port replaced by the proxy's: redis://127.0.0.1:56379/1 → redis://127.0.0.1:<port>/1. */
  url(serviceUrl: string): string
  /** Closes every proxied connection (both sides) and refuses new ones (connection refused), like a crashed server. */
  cut(): void
  /** Forwards nothing in either direction and holds new connections, like a frozen network; nothing is dropped. */
  stall(): void
  /** Back to normal: after a stall what was held flows in order; after a cut the same port accepts again. */
  restore(): Promise<void>
  /** Live client connections. */
  readonly connections: number
  close(): Promise<void>
}

/** One side's outgoing bytes not yet written: held during a stall, or left over when the kernel buffer was full. */
class Outbox {
  private chunks: Uint8Array[] = []
  private retry: ReturnType<typeof setTimeout> | undefined
  constructor(private readonly isHeld: () => boolean) {}

  push(socket: Socket<unknown> | undefined, data: Uint8Array): void {
    this.chunks.push(new Uint8Array(data)) // copy: Bun reuses the buffer it hands to `data`
    this.flush(socket)
  }

  /** Writes in order what the socket takes; keeps the rest for the next `drain`. */
  flush(socket: Socket<unknown> | undefined): void {
    if (!socket || this.isHeld()) return
    while (this.chunks.length) {
      const chunk = this.chunks[0]!
      const written = socket.write(chunk)
      if (written < chunk.byteLength) {
        this.chunks[0] = chunk.subarray(Math.max(0, written))
        // `drain` flushes the rest; retry soon as well, in case the runtime reports no drain for a short write
        this.retry ??= setTimeout(() => {
          this.retry = undefined
          this.flush(socket)
        }, 5)
        return
      }
      this.chunks.shift()
    }
  }
}

interface Link {
  client: Socket<Link>
  upstream?: Socket<Link>
  /** Bytes from the client, for the upstream; and the other way. */
  toUpstream: Outbox
  toClient: Outbox
  closed: boolean
}

export async function startFaultProxy(target: { host: string; port: number }): Promise<FaultProxy> {
  let stalled = false
  const links = new Set<Link>()
  const held = () => stalled

  const close = (link: Link) => {
    if (link.closed) return
    link.closed = true
    links.delete(link)
    link.client.end()
    link.upstream?.end()
  }

  const connectUpstream = async (link: Link) => {
    try {
      await Bun.connect<Link>({
        hostname: target.host,
        port: target.port,
        data: link,
        socket: {
          open(upstream) {
            if (link.closed) return void upstream.end()
            link.upstream = upstream
            link.toUpstream.flush(upstream)
          },
          data: (_upstream, data) => link.toClient.push(link.client, data),
          drain: (upstream) => link.toUpstream.flush(upstream),
          close: () => close(link),
          error: () => close(link),
        },
      })
    } catch {
      close(link) // the real server is down: the client sees its connection close, as it would
    }
  }

  const listen = (port: number): TCPSocketListener<Link> =>
    Bun.listen<Link>({
      hostname: '127.0.0.1',
      port,
      socket: {
        open(client) {
          const link: Link = { client, toUpstream: new Outbox(held), toClient: new Outbox(held), closed: false }
          client.data = link
          links.add(link)
          if (!stalled) void connectUpstream(link) // during a stall the connection is held, and connected on restore
        },
        data: (client, data) => client.data.toUpstream.push(client.data.upstream, data),
        drain: (client) => client.data.toClient.flush(client),
        close: (client) => client.data && close(client.data),
        error: (client) => client.data && close(client.data),
      },
    })

  let listener: TCPSocketListener<Link> | undefined = listen(0)
  const port = listener.port

  return {
    port,
    url(serviceUrl) {
      const url = new URL(serviceUrl)
      url.hostname = '127.0.0.1'
      url.port = String(port)
      return url.toString()
    },
    cut() {
      stalled = false
      listener?.stop(true)
      listener = undefined
      for (const link of [...links]) close(link)
    },
    stall() {
      stalled = true
    },
    async restore() {
      stalled = false
      for (const link of [...links]) {
        if (!link.upstream) void connectUpstream(link)
        link.toUpstream.flush(link.upstream)
        link.toClient.flush(link.client)
      }
      // The port was just released by stop(): listening again can fail for a moment.
      for (let attempt = 0; !listener; attempt++) {
        try {
          listener = listen(port)
        } catch (error) {
          if (attempt >= 50) throw error
          await Bun.sleep(20)
        }
      }
    },
    get connections() {
      return links.size
    },
    async close() {
      listener?.stop(true)
      listener = undefined
      for (const link of [...links]) close(link)
    },
  }
}
