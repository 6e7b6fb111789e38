// The gateway node: the WebSocket server (Bun-native), the hub of local subscriptions, the fan-out reader that feeds it,
// cache invalidations (policies, revoked keys), health endpoints, and draining on shutdown.
import type { Server, ServerWebSocket } from 'bun'
import { config } from '../shared/config'
import { ApiError, toErrorResponse, unavailable } from '../shared/errors'
import { liveness, readiness } from '../shared/http/health'
import { invalidHost, parseTarget } from '../shared/http/target'
import { describeError, log } from '../shared/log'
import { listenForInvalidations } from '../shared/realtime/invalidation-listener'
import { policyCache } from '../shared/realtime/policies'
import { Connection, type GatewayContext } from './client'
import { DISCONNECTS } from './disconnect'
import { FanoutReader } from './fanout'
import { Hub } from './hub'
import { MAX_FRAME_BYTES, presenceFrame, publicationFrame } from './protocol'

/** The path WebSocket clients connect to (the path of GATEWAY_URL). */
export const WEBSOCKET_PATH = new URL(config.gatewayUrl).pathname


type Socket = ServerWebSocket<SocketData>

interface SocketData {
  connection?: Connection
  /** Sends one frame now, closing the connection 4200 if the runtime refuses it. */
  send?: (frame: string) => void
}

export interface Gateway {
  server: Server<SocketData>
  /** Closes every connection with 4100, stops reading, and releases its connections. */
  drain(): Promise<void>
}

export function startGateway(port: number): Gateway {
  const hub = new Hub<Connection>()
  const connections = new Set<Connection>()
  // Frames of the fan-out batch being delivered, per socket: written with one cork per socket (one write instead of
  // one per frame), in order, when the batch is done.
  let batching = false
  const queued = new Map<Socket, string[]>()
  const queue = (ws: Socket, frame: string) => {
    const frames = queued.get(ws)
    if (frames) frames.push(frame)
    else queued.set(ws, [frame])
  }
  const flushOne = (ws: Socket) => {
    const frames = queued.get(ws)
    if (!frames) return
    queued.delete(ws)
    ws.cork(() => {
      for (const frame of frames) ws.data.send!(frame)
    })
  }
  const reader = new FanoutReader(
    (entry) => {
      batching = true
      if (entry.kind) return void hub.publish(entry.product, entry.channel, undefined, presenceFrame(entry))
      const position = entry.offset !== undefined && entry.epoch !== undefined ? { offset: entry.offset, epoch: entry.epoch } : undefined
      hub.publish(entry.product, entry.channel, position, publicationFrame(entry), entry.sender)
    },
    // Continuity lost on a shard: its subscriptions end, and their clients subscribe again with their cursors.
    (shard) => {
      for (const { subscriber, channel } of hub.subscriptionsOf(shard)) subscriber.endSubscription(channel, 'recover')
    },
    () => {
      batching = false
      for (const ws of [...queued.keys()]) flushOne(ws)
    },
  )
  const context: GatewayContext = { hub, connections, wantShard: (shard) => reader.add(shard), unwantShard: (shard) => reader.remove(shard) }
  reader.start()
  const invalidations = listenForInvalidations({
    caches: [policyCache],
    onMessage: (message) => {
      if (message.kind !== 'public_key') return policyCache.forget(message.productId)
      // Revoking an API key ends the tokens it issued, live connections included.
      for (const connection of connections) {
        if (connection.claims?.akid === message.keyId) connection.disconnect(DISCONNECTS.invalidToken, 'api key revoked')
      }
    },
  })
  let draining = false

  const server = Bun.serve<SocketData>({
    port,
    reusePort: true,
    development: config.developmentErrors,
    async fetch(request, srv) {
      const target = parseTarget(request.url, request.headers.get('host'))
      if (!target) return toErrorResponse(invalidHost())
      if (target.path === WEBSOCKET_PATH) {
        if (draining) return toErrorResponse(unavailable('This gateway is draining; connect again (another gateway answers)'))
        if (srv.upgrade(request, { data: {} })) return undefined
        return toErrorResponse(new ApiError(426, 'upgrade_required', 'Connect with a WebSocket client'))
      }
      if (target.path === '/healthz') return Response.json(liveness())
      if (target.path === '/readyz') {
        const { status, body } = await readiness([{ name: 'invalidations', ready: invalidations.live }, { name: 'accepting', ready: () => !draining }])
        return Response.json(body, { status })
      }
      return toErrorResponse(new ApiError(404, 'not_found', `No route ${request.method} ${target.path}`))
    },
    error: (error) => toErrorResponse(error, (e) => log('error', 'unhandled', describeError(e))),
    websocket: {
      // Frames above MAX_FRAME_BYTES are read and answered `invalid`; above this hard limit the runtime closes with 1009.
      maxPayloadLength: MAX_FRAME_BYTES * 16,
      // Past this many buffered bytes Bun drops a message (send() answers 0): that connection is then closed 4200, so
      // a message is delivered exactly once or the client knows to recover; Bun never picks the close code itself.
      backpressureLimit: config.realtime.gatewayMaxBufferedBytes,
      closeOnBackpressureLimit: false,
      open(ws: Socket) {
        const send = (frame: string) => {
          if (ws.send(frame) === 0) connection.disconnect(DISCONNECTS.slowConsumer)
        }
        const connection: Connection = new Connection({
          // While a fan-out batch is being delivered, frames wait and go out together, corked, when it is done.
          send: (frame) => (batching ? queue(ws, frame) : send(frame)),
          close: (code, reason) => {
            flushOne(ws)
            ws.close(code, reason)
          },
        }, context)
        ws.data.connection = connection
        ws.data.send = send
      },
      message(ws: Socket, message) {
        void ws.data.connection?.onMessage(message)
      },
      close(ws: Socket) {
        ws.data.connection?.cleanup()
      },
    },
  })
  log('info', 'listening', { name: 'gateway', port: server.port, path: WEBSOCKET_PATH })

  return {
    server,
    async drain() {
      draining = true
      // Stop listening first, so the clients told to reconnect at once reach another gateway (reusePort), not this one.
      const stopped = server.stop()
      for (const connection of [...connections]) connection.disconnect(DISCONNECTS.draining)
      // Let the close frames go out; then stop for good.
      await Promise.race([stopped, Bun.sleep(2000)])
      server.stop(true)
      await reader.stop()
      await invalidations.stop()
    },
  }
}
