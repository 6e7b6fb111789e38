// The gateway node: wires the hub of local subscriptions, the fan-out reader and the dispatcher it feeds, the sockets,
// the sweeps, and cache invalidations (policies, signing keys, revoked credentials) to the backends; drains on shutdown.
// A publication: fanout.ts (read) -> dispatch.ts (policy) -> hub.ts (who) -> transport.ts / client.ts (write).
import type { Server } from 'bun'
import { config } from '../shared/config'
import { listenForInvalidations } from '../shared/cache/invalidation-listener'
import { policyCache } from '../shared/realtime/policies'
import { reloadSigningKeys } from '../shared/realtime/tokens'
import { redisBackends } from './backends'
import type { Connection, GatewayContext } from './client'
import { ConnectionReports } from './connection-reports'
import { CredentialIndex } from './credential-index'
import { Deadlines } from './deadlines'
import { DISCONNECTS } from './disconnect'
import { Dispatcher } from './dispatch'
import { FanoutReader } from './fanout'
import { Hub } from './hub'
import { gatewayLimits } from './limits'
import { watchGateway } from './metrics'
import { OccupancyLeases } from './occupancy'
import type { GatewayBackends } from './ports'
import { serveGateway } from './server'
import { RevocationSweep, startPresenceSweep } from './sweeps'
import { SocketTopics, type SocketTransport, Writer } from './transport'

export interface Gateway {
  server: Server<SocketTransport>
  /** Closes every connection with 4100, stops reading, and releases its connections. */
  drain(): Promise<void>
}

export function startGateway(port: number, backends: GatewayBackends = redisBackends()): Gateway {
  const limit = config.realtime.gatewayMaxBufferedBytes
  // Occupancy leases tell Redis which channels have subscribers here (channel.occupied / vacated webhooks).
  const leases = backends.occupancy ? new OccupancyLeases(backends.occupancy, config.realtime.gatewayOccupancyLeaseMs) : undefined
  const hub = new Hub<Connection>(leases)
  const credentials = new CredentialIndex<Connection>()
  const writer = new Writer(limit)
  const topics = new SocketTopics()
  const dispatcher = new Dispatcher(hub, topics, writer, backends.usage, limit)
  const reader = new FanoutReader(dispatcher.deliver, dispatcher.gap, dispatcher.batchDone)
  const limits = gatewayLimits()
  const context: GatewayContext = {
    hub, shards: reader, connections: new Set(), credentials, limits, backends,
    deadlines: new Deadlines<Connection>((connection) => connection.deadlinePassed()),
  }
  // The signing key ids that may verify, loaded now so the first `connect` does not wait for them; re-read on each
  // `signing_keys` invalidation, each time the subscription is back (one may have been missed), and every 30 s.
  void reloadSigningKeys()
  reader.start()
  const revocationSweep = new RevocationSweep(context.connections, credentials, backends.revocations)
  const presenceSweep = startPresenceSweep(hub, backends.policies, backends.presence)
  // The product's connections, reported only while someone looks (realtime_connections_list).
  const reports = backends.connectionReports ? new ConnectionReports(context.connections, backends.connectionReports) : undefined
  const invalidations = listenForInvalidations({
    caches: [policyCache],
    onLive: () => {
      void reloadSigningKeys()
      void revocationSweep.afterGap()
    },
    onMessage: (message) => {
      if (message.kind === 'signing_keys') return void reloadSigningKeys()
      if (message.kind === 'namespaces' || message.kind === 'payload_storage') return policyCache.forget(message.productId)
      // Revoking an API key ends the tokens it issued, live connections included (a scope change does not); so does
      // ending the login session or revoking the platform key a console token was asked for, or removing its user.
      if (message.kind === 'public_key' && message.revoked) revocationSweep.heard(message.keyId)
      else if (message.kind === 'credential_ended') revocationSweep.heard(message.keyId)
      else if (message.kind === 'member_removed') void revocationSweep.memberRemoved(message.userId)
    },
  })
  watchGateway({ connections: () => context.connections.size, subscriptions: () => hub.subscriptionCount(), fanoutLag: () => reader.lag() })
  let draining = false
  const server = serveGateway(port, {
    context, writer, topics, upgrades: limits.upgrades, accepting: () => !draining, invalidationsLive: invalidations.live,
  })

  return {
    server,
    async drain() {
      draining = true
      revocationSweep.stop()
      // Stop listening first, so the clients told to reconnect at once reach another gateway (reusePort), not this one.
      const stopped = server.stop()
      for (const connection of [...context.connections]) connection.disconnect(DISCONNECTS.draining)
      // Let the close frames go out; then stop for good.
      await Promise.race([stopped, Bun.sleep(2000)])
      server.stop(true)
      clearInterval(presenceSweep)
      leases?.stop()
      await reports?.stop()
      await reader.stop()
      await invalidations.stop()
    },
  }
}
