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
  /** Forwards nothing in either direction, holds new connections and closes, like a frozen network; nothing is dropped. */
  stall(): void
  /**
   * Every connection open now goes silent for good: bytes either way are dropped and no close is passed on, as when the
   * path of a connection dies without a reset. New connections pass normally.
   */
  blackhole(): void
  /**
   * New connections go to `target` from now on (open ones stay where they are: cut and restore to move them), as a
   * virtual IP or a DNS name moved to a promoted replica.
   */
  retarget(target: { host: string; port: number }): void
  /** Back to normal: after a stall what was held flows in order; after a cut the same port accepts again. */
  restore(): Promise<void>
  /** Live client connections, held ones included. */
  readonly connections: number
  /** Stops listening and closes every connection; the proxy cannot be restored afterwards. */
  close(): Promise<void>
}

/** Listening again on the port a cut just released can fail for a moment: 50 tries 20 ms apart. */
const RELISTEN_TRIES = 50
const RELISTEN_PAUSE_MS = 20

/** One end of a proxied connection and the bytes waiting to be written to it. */
interface Side {
  socket?: Socket<Tagged>
  /** In order; copies, because Bun reuses the buffer it hands to `data`. */
  pending: Uint8Array[]
  /** Its peer closed; outside a stall the other side is ended once its pending bytes are written. */
  gone: boolean
}

interface Link {
  client: Side
  upstream: Side
  /** An upstream connect is in flight: restore must not start a second one. */
  connecting: boolean
  closed: boolean
  /** Blackholed: nothing passes, in either direction, ever again. */
  dead?: boolean
}

/** What each Bun socket carries: its link and which side of it it is. */
interface Tagged {
  link: Link
  side: Side
}

export async function startFaultProxy(target: { host: string; port: number }): Promise<FaultProxy> {
  let stalled = false
  let shut = false
  const links = new Set<Link>()

  const peer = (link: Link, side: Side) => (side === link.client ? link.upstream : link.client)

  const finish = (link: Link) => {
    if (link.closed) return
    link.closed = true
    links.delete(link)
    link.client.socket?.end()
    link.upstream.socket?.end()
  }

  /** Writes a side's pending bytes in order, as far as the kernel takes them; `drain` calls it again for the rest. */
  const pump = (link: Link, side: Side) => {
    const socket = side.socket
    if (stalled || link.closed || !socket || side.gone) return
    while (side.pending.length) {
      const chunk = side.pending[0]!
      const written = socket.write(chunk)
      if (written < chunk.byteLength) {
        side.pending[0] = chunk.subarray(Math.max(0, written))
        return
      }
      side.pending.shift()
    }
    // Everything its peer sent before closing has been written: now pass the close on.
    if (peer(link, side).gone) finish(link)
  }

  /** Bytes one side sent, for the other. */
  const forward = (link: Link, to: Side, data: Uint8Array) => {
    if (link.closed || to.gone || link.dead) return
    to.pending.push(new Uint8Array(data))
    pump(link, to)
  }

  /** Passes on closes and held bytes; nothing moves during a stall. */
  const settle = (link: Link) => {
    if (stalled || link.closed) return
    if (link.dead) return void (link.client.gone && finish(link)) // the client gave up on it: release the upstream
    // Both gone, or a client that left before its upstream was connected: nothing left to pass on.
    if (link.client.gone && (link.upstream.gone || !link.upstream.socket)) return finish(link)
    pump(link, link.client)
    pump(link, link.upstream)
  }

  const lost = (tagged: Tagged | undefined) => {
    if (!tagged || tagged.link.closed) return
    tagged.side.gone = true
    tagged.side.pending = [] // nobody left to read them
    settle(tagged.link)
  }

  const handlers = {
    data: (socket: Socket<Tagged>, data: Uint8Array) => forward(socket.data.link, peer(socket.data.link, socket.data.side), data),
    drain: (socket: Socket<Tagged>) => pump(socket.data.link, socket.data.side),
    close: (socket: Socket<Tagged>) => lost(socket.data),
    error: (socket: Socket<Tagged>) => lost(socket.data),
  }

  const connectUpstream = async (link: Link) => {
    link.connecting = true
    try {
      await Bun.connect<Tagged>({
        hostname: target.host,
        port: target.port,
        data: { link, side: link.upstream },
        socket: {
          ...handlers,
          open(upstream) {
            link.connecting = false
            if (link.closed) return void upstream.end()
            link.upstream.socket = upstream
            settle(link) // sends what the client wrote before the upstream was open, unless stalled
          },
        },
      })
    } catch {
      // The real server is down: the client sees its connection close, as it would (after a stall, if one is on).
      link.connecting = false
      lost({ link, side: link.upstream })
    }
  }

  const listen = (port: number): TCPSocketListener<Tagged> =>
    Bun.listen<Tagged>({
      hostname: '127.0.0.1',
      port,
      socket: {
        ...handlers,
        open(client) {
          const link: Link = { client: { socket: client, pending: [], gone: false }, upstream: { pending: [], gone: false }, connecting: false, closed: false }
          client.data = { link, side: link.client }
          links.add(link)
          if (!stalled) void connectUpstream(link) // during a stall the connection is held, and connected on restore
        },
      },
    })

  let listener: TCPSocketListener<Tagged> | undefined = listen(0)
  const port = listener.port

  const closeAll = () => {
    stalled = false
    listener?.stop(true)
    listener = undefined
    for (const link of [...links]) finish(link)
  }

  return {
    port,
    url(serviceUrl) {
      const url = new URL(serviceUrl)
      url.hostname = '127.0.0.1'
      url.port = String(port)
      return url.toString()
    },
    cut: closeAll,
    stall() {
      stalled = true
    },
    blackhole() {
      for (const link of links) link.dead = true
    },
    retarget(to) {
      target = to
    },
    async restore() {
      if (shut) throw new Error('fault proxy is closed')
      stalled = false
      for (const link of [...links]) {
        if (!link.upstream.socket && !link.connecting && !link.client.gone) void connectUpstream(link)
        settle(link)
      }
      for (let attempt = 1; !listener; attempt++) {
        try {
          listener = listen(port)
        } catch (error) {
          if (attempt >= RELISTEN_TRIES) throw error
          await Bun.sleep(RELISTEN_PAUSE_MS)
        }
      }
    },
    get connections() {
      return links.size
    },
    async close() {
      shut = true
      closeAll()
    },
  }
}
