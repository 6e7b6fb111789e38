// The gateway's listening socket (Bun-native): the WebSocket upgrade at WEBSOCKET_PATH (refused while draining, counted
// per client address first), the health endpoints, and each socket's events handed to its connection.
import type { Server } from 'bun'
import { config } from '../shared/config'
import { ApiError, noRoute, toErrorResponse, unavailable } from '../shared/errors'
import { tooMany } from '../shared/fixed-window'
import { liveness, readiness } from '../shared/http/health'
import { clientIpOf, normalizeIp } from '../shared/http/serve'
import { invalidHost, parseTarget } from '../shared/http/target'
import { describeError, log } from '../shared/log'
import { Connection, type GatewayContext } from './client'
import type { LocalWindows } from './limits'
import { gatewayMetrics } from './metrics'
import { MAX_FRAME_BYTES } from './protocol'
import { type Socket, type SocketTopics, SocketTransport, type Writer } from './transport'

/** The path WebSocket clients connect to (the path of GATEWAY_URL). */
export const WEBSOCKET_PATH = new URL(config.gatewayUrl).pathname

/** What the listening socket needs of its gateway. */
export interface Endpoint {
  /** What each connection is made with. */
  context: GatewayContext
  writer: Writer
  topics: SocketTopics
  /** WebSocket upgrades per client address (gateway/limits.ts). */
  upgrades: LocalWindows
  /** False once the gateway drains: upgrades are refused 503, and /readyz says so. */
  accepting(): boolean
  /** Whether invalidations are being heard (/readyz). */
  invalidationsLive(): boolean
}

export function serveGateway(port: number, endpoint: Endpoint): Server<SocketTransport> {
  const { context, writer, topics, upgrades } = endpoint
  const server = Bun.serve<SocketTransport>({
    port,
    reusePort: true,
    development: config.developmentErrors,
    async fetch(request, srv) {
      const target = parseTarget(request.url, request.headers.get('host'))
      if (!target) return toErrorResponse(invalidHost())
      if (target.path === WEBSOCKET_PATH) {
        if (!endpoint.accepting()) return toErrorResponse(unavailable('This gateway is draining; connect again (another gateway answers)'))
        // Counted before the upgrade, in this process: a flood of upgrades from one address costs a map lookup.
        const ip = clientIpOf(request.headers, normalizeIp(srv.requestIP(request)?.address ?? '127.0.0.1'))
        const upgrade = upgrades.hit(ip)
        if (!upgrade.allowed) {
          const why = upgrade.crowded
            ? `more than ${config.realtime.gatewayIpTrackedMax} client addresses this minute on this gateway`
            : `more than ${config.realtime.gatewayIpUpgradesPerMinute} WebSocket upgrades a minute from this address`
          return toErrorResponse(tooMany('rate_limited', why, upgrade.retryAfter))
        }
        if (srv.upgrade(request, { data: new SocketTransport(writer, ip) })) return undefined
        return toErrorResponse(new ApiError('upgrade_required', 'Connect with a WebSocket client'))
      }
      if (target.path === '/healthz') return Response.json(liveness())
      if (target.path === '/readyz') {
        const { status, body } = await readiness([{ name: 'invalidations', ready: endpoint.invalidationsLive }, { name: 'accepting', ready: endpoint.accepting }])
        return Response.json(body, { status })
      }
      return toErrorResponse(noRoute(request.method, target.path))
    },
    error: (error) => toErrorResponse(error, (e) => log('error', 'unhandled', describeError(e))),
    websocket: {
      // Frames above MAX_FRAME_BYTES are read and answered `invalid`; above this hard limit the runtime closes with 1009.
      maxPayloadLength: MAX_FRAME_BYTES * 16,
      // Past this many buffered bytes Bun drops a message. The gateway closes a socket 4200 at half of it (see
      // gateway/dispatch.ts), so a message is delivered exactly once or the client knows to recover; Bun never picks
      // the close code itself.
      backpressureLimit: 2 * config.realtime.gatewayMaxBufferedBytes + 1024 * 1024,
      closeOnBackpressureLimit: false,
      open(ws: Socket) {
        gatewayMetrics.connectionOpened()
        topics.opened(ws, new Connection(ws.data, context, ws.data.ip))
      },
      message(ws: Socket, message) {
        void ws.data.connection?.onMessage(message)
      },
      close(ws: Socket) {
        topics.closed(ws)
        ws.data.connection?.cleanup()
      },
    },
  })
  topics.attach(server)
  log('info', 'listening', { name: 'gateway', port: server.port, path: WEBSOCKET_PATH })
  return server
}
