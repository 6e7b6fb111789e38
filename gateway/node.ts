// The gateway node: the WebSocket server (Bun-native), the hub of local subscriptions, the fan-out reader that feeds it,
// cache invalidations (policies, revoked keys), health endpoints, and draining on shutdown.
import type { Server } from 'bun'
import { config } from '../shared/config'
import { ApiError, logUnlessOutage, toErrorResponse, unavailable } from '../shared/errors'
import { tooMany } from '../shared/fixed-window'
import { liveness, readiness } from '../shared/http/health'
import { clientIpOf, normalizeIp } from '../shared/http/serve'
import { invalidHost, parseTarget } from '../shared/http/target'
import { describeError, log } from '../shared/log'
import { listenForInvalidations } from '../shared/cache/invalidation-listener'
import { namespaceOf } from '../shared/realtime/names'
import { policyCache, type ProductPolicies, productPolicies } from '../shared/realtime/policies'
import { sweepPresence } from '../shared/realtime/presence'
import { revocations, revokedAmong } from '../shared/realtime/revocations'
import { reloadSigningKeys } from '../shared/realtime/tokens'
import { usage } from '../shared/realtime/usage'
import { everyUnlessRunning } from '../shared/rounds'
import { Connection, type GatewayContext } from './client'
import { Deadlines } from './deadlines'
import { DISCONNECTS } from './disconnect'
import { FanoutReader } from './fanout'
import { Hub } from './hub'
import { gatewayLimits } from './limits'
import { MAX_FRAME_BYTES, presenceFrame, publicationFrame } from './protocol'
import { type Socket, SocketTransport, Writer } from './writer'

/** How often the live connections' API keys are checked for a revocation this gateway may have missed. */
const REVOCATION_SWEEP_MS = Math.max(100, config.realtime.gatewayRevocationSweepMs)

/** The path WebSocket clients connect to (the path of GATEWAY_URL). */
export const WEBSOCKET_PATH = new URL(config.gatewayUrl).pathname


export interface Gateway {
  server: Server<SocketTransport>
  /** Closes every connection with 4100, stops reading, and releases its connections. */
  drain(): Promise<void>
}

export function startGateway(port: number): Gateway {
  const hub = new Hub<Connection>()
  const connections = new Set<Connection>()
  const limit = config.realtime.gatewayMaxBufferedBytes
  const writer = new Writer(limit, (ws) => ws.data.connection?.disconnect(DISCONNECTS.slowConsumer))
  // Slow consumers. A live subscription is written by the runtime's topic publish, which drops (silently) what would
  // take a socket past Bun's backpressure limit. So that never happens, Bun's limit is set well above ours and the
  // sockets of every topic published to are checked against ours after each batch, and sooner when a batch is big:
  // between two checks a socket takes at most `checkEvery` bytes plus one frame, so it is closed 4200 before the runtime
  // would drop anything. A socket written to directly is checked at each write.
  const checkEvery = Math.max(1, Math.floor(limit / 2))
  let sinceCheck = 0
  const published = new Set<string>()
  const checkBuffers = () => {
    for (const topic of published) {
      for (const connection of [...hub.liveOf(topic)]) {
        if (connection.buffered() > limit) connection.disconnect(DISCONNECTS.slowConsumer)
      }
    }
    published.clear()
    sinceCheck = 0
  }
  const socketsById = new Map<string, Socket>()
  const reader = new FanoutReader(
    (entry) => {
      // Every subscription here of the entry's shard sees it (they share the read), but most entries are for channels
      // without one here: those are not even encoded.
      const here = hub.subscriberCount(entry.product, entry.channel)
      if (here === 0) return
      writer.startBatch()
      const frame = entry.kind ? presenceFrame(entry) : publicationFrame(entry)
      const position = !entry.kind && entry.offset !== undefined && entry.epoch !== undefined ? { offset: entry.offset, epoch: entry.epoch } : undefined
      if (!entry.kind) {
        // Usage for analytics: every local subscriber but the sender of a client event gets it.
        const reached = here - (entry.sender && socketsById.has(entry.sender) ? 1 : 0)
        if (reached > 0) usage.count(entry.product, entry.channel, { deliveries: reached })
      }
      hub.publish(entry.product, entry.channel, position, frame, (topic) => {
        // A client event skips its sender: published from the sender's socket, when it is here, the runtime leaves it out.
        const sender = entry.sender ? socketsById.get(entry.sender) : undefined
        if (sender?.isSubscribed(topic)) sender.publish(topic, frame)
        else server.publish(topic, frame)
        published.add(topic)
        sinceCheck += frame.length
        if (sinceCheck >= checkEvery) checkBuffers()
      }, entry.sender)
    },
    // Continuity lost on a shard: its subscriptions end, and their clients subscribe again with their cursors.
    (shard) => {
      for (const { subscriber, channel } of hub.subscriptionsOf(shard)) subscriber.endSubscription(channel, 'recover')
    },
    () => {
      writer.endBatch()
      checkBuffers()
    },
  )
  let draining = false
  const deadlines = new Deadlines<Connection>((connection) => connection.deadlinePassed())
  const limits = gatewayLimits()
  const context: GatewayContext = { hub, connections, deadlines, limits, wantShard: (shard) => reader.add(shard), unwantShard: (shard) => reader.remove(shard) }
  // The signing key ids that may verify, loaded now so the first `connect` does not wait for them; re-read on each
  // `signing_keys` invalidation, each time the subscription is back (one may have been missed), and every 30 s.
  void reloadSigningKeys()
  reader.start()
  // A revocation this gateway did not hear (announced while Redis was unreachable or the subscription dropping, or never
  // announced because Redis was down when the key was revoked) is found by asking PostgreSQL, the authority, about the
  // live connections' keys: each time the subscription is back, and every REVOCATION_SWEEP_MS whatever Redis does.
  const sweepRevoked = async (): Promise<boolean> => {
    try {
      const revoked = await revokedAmong([...connections].flatMap((c) => (c.claims ? [c.claims.akid] : [])))
      for (const keyId of revoked) revocations.markRevoked(keyId)
      for (const connection of [...connections]) {
        if (connection.claims && revoked.has(connection.claims.akid)) connection.disconnect(DISCONNECTS.invalidToken, 'api key revoked')
      }
      return true
    } catch (error) {
      logUnlessOutage('revocation sweep failed', error)
      return false
    }
  }
  // After a gap in invalidations the cached "not revoked" answers may be wrong: they are dropped, and the live connections
  // swept. PostgreSQL may be unreachable too: keep trying for a minute, after that the periodic sweep takes over.
  const sweepWhenLive = async () => {
    revocations.forgetActive()
    for (const until = Date.now() + 60_000; !draining && !(await sweepRevoked()) && Date.now() < until; ) await Bun.sleep(500)
  }
  // A sweep still running (PostgreSQL slow) when the next is due is skipped, not doubled.
  const sweeping = everyUnlessRunning(REVOCATION_SWEEP_MS, sweepRevoked)
  // Expired presence entries (a dead gateway's connections) leave, and their leaves reach the subscribers here. Only
  // channels whose namespace has presence can have a roster; a round still running when the next is due is not doubled.
  const channelsWithPresence = async () => {
    const policies = new Map<string, ProductPolicies | null>()
    const out: { productId: string; channel: string }[] = []
    for (const here of hub.channelsHere()) {
      if (!policies.has(here.productId)) policies.set(here.productId, await productPolicies(here.productId).catch(() => null))
      const policy = policies.get(here.productId)
      // Policies unknown now (the database is unreachable): sweep the channel anyway, as a roster may exist.
      if (!policy || policy.namespaces.get(namespaceOf(here.channel))?.presence) out.push(here)
    }
    return out
  }
  const presenceSweeping = everyUnlessRunning(config.realtime.gatewayPresenceSweepMs, () => channelsWithPresence()
    .then((channels) => sweepPresence(channels))
    .catch((error) => logUnlessOutage('presence sweep failed', error)))
  const invalidations = listenForInvalidations({
    caches: [policyCache],
    onLive: () => {
      void reloadSigningKeys()
      void sweepWhenLive()
    },
    onMessage: (message) => {
      if (message.kind === 'signing_keys') return void reloadSigningKeys()
      if (message.kind === 'namespaces' || message.kind === 'payload_storage') return policyCache.forget(message.productId)
      if (message.kind !== 'public_key' || !message.revoked) return
      // Revoking an API key ends the tokens it issued, live connections included (a scope change does not).
      revocations.markRevoked(message.keyId)
      for (const connection of connections) {
        if (connection.claims?.akid === message.keyId) connection.disconnect(DISCONNECTS.invalidToken, 'api key revoked')
      }
    },
  })

  const server = Bun.serve<SocketTransport>({
    port,
    reusePort: true,
    development: config.developmentErrors,
    async fetch(request, srv) {
      const target = parseTarget(request.url, request.headers.get('host'))
      if (!target) return toErrorResponse(invalidHost())
      if (target.path === WEBSOCKET_PATH) {
        if (draining) return toErrorResponse(unavailable('This gateway is draining; connect again (another gateway answers)'))
        // Counted before the upgrade, in this process: a flood of upgrades from one address costs a map lookup.
        const ip = clientIpOf(request.headers, normalizeIp(srv.requestIP(request)?.address ?? '127.0.0.1'))
        const upgrade = limits.upgrades.hit(ip)
        if (!upgrade.allowed) {
          const why = upgrade.crowded
            ? `more than ${config.realtime.gatewayIpTrackedMax} client addresses this minute on this gateway`
            : `more than ${config.realtime.gatewayIpUpgradesPerMinute} WebSocket upgrades a minute from this address`
          return toErrorResponse(tooMany('rate_limited', why, upgrade.retryAfter))
        }
        if (srv.upgrade(request, { data: new SocketTransport(writer, ip) })) return undefined
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
      // Past this many buffered bytes Bun drops a message. The gateway closes a socket 4200 at half of it (see
      // checkBuffers above), so a message is delivered exactly once or the client knows to recover; Bun never picks
      // the close code itself.
      backpressureLimit: 2 * config.realtime.gatewayMaxBufferedBytes + 1024 * 1024,
      closeOnBackpressureLimit: false,
      open(ws: Socket) {
        const connection = new Connection(ws.data, context, ws.data.ip)
        ws.data.bind(ws, connection)
        socketsById.set(connection.id, ws)
      },
      message(ws: Socket, message) {
        void ws.data.connection?.onMessage(message)
      },
      close(ws: Socket) {
        if (ws.data.connection) socketsById.delete(ws.data.connection.id)
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
      clearInterval(sweeping)
      clearInterval(presenceSweeping)
      await reader.stop()
      await invalidations.stop()
    },
  }
}
