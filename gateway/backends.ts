// The gateway's edges (./ports.ts) as the running gateway has them: Redis for the broker, presence and the client-event
// budget; PostgreSQL (cached) for policies, revoked credentials and signing keys; usage flushed to PostgreSQL.
import { readHistoryWithArchive } from '../shared/realtime/archive-recovery'
import { subscriptionPosition } from '../shared/realtime/broker'
import { reportConnections, watchedProducts, withdrawConnections } from '../shared/realtime/connection-reports'
import { namespaceOf } from '../shared/realtime/names'
import { holdChannels, releaseChannels } from '../shared/realtime/occupancy'
import { productPolicies } from '../shared/realtime/policies'
import { enterPresence, leavePresence, listPresence, sweepPresence } from '../shared/realtime/presence'
import { revocations, revokedAmong } from '../shared/realtime/revocations'
import { verifyToken } from '../shared/realtime/tokens'
import { usage } from '../shared/realtime/usage'
import { publishClientEvent } from './event-budget'
import type { GatewayBackends } from './ports'

export function redisBackends(): GatewayBackends {
  return {
    broker: {
      position: (productId, channel, policy) => subscriptionPosition(productId, channel, policy),
      // A cursor whose entries left Redis is recovered from the archive when the namespace archives (and proves continuity).
      history: (productId, channel, policy, query, maxBytes) => readHistoryWithArchive(productId, channel, policy,
        async () => (await productPolicies(productId)).namespaces.get(namespaceOf(channel))?.archiveDays ?? 0, query, maxBytes),
      publish: (event) => publishClientEvent(event),
    },
    presence: {
      enter: (entry) => enterPresence(entry),
      leave: (entry) => leavePresence(entry),
      list: (productId, channel) => listPresence(productId, channel),
      sweep: (channels) => sweepPresence(channels),
    },
    policies: { policies: (productId) => productPolicies(productId) },
    revocations: {
      isRevoked: (credential) => revocations.isRevoked(credential),
      revokedAmong: (credentials) => revokedAmong(credentials),
      markRevoked: (akid, held) => revocations.markRevoked(akid, held),
      remember: (answer) => revocations.remember(answer),
      forgetActive: () => revocations.forgetActive(),
      forgetUser: (userId) => revocations.forgetUser(userId),
    },
    tokens: { verify: (token) => verifyToken(token) },
    usage,
    occupancy: {
      hold: (holder, channels, leaseMs) => holdChannels(holder, channels, leaseMs),
      release: (holder, channels) => releaseChannels(holder, channels),
    },
    connectionReports: {
      watched: () => watchedProducts(),
      report: (gateway, productId, connections, total) => reportConnections(gateway, productId, connections, total),
      withdraw: (gateway, productId) => withdrawConnections(gateway, productId),
    },
  }
}
