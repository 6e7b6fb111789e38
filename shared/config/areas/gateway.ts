// The WebSocket gateway: per-connection buffers and the abuse bounds of gateway/limits.ts, each per gateway process.
import { area, integer } from '../variable'

export const gateway = area('Gateway',
  'Each gateway process\'s connection bounds; the per-IP limits take the client IP as the public routes do. [Protocol](realtime-protocol.md).', {
    maxBufferedBytes: integer('GATEWAY_MAX_BUFFERED_BYTES', {
      default: 4 * 1024 * 1024, min: 65_536, max: 268_435_456,
      description: 'Most bytes held for one connection that does not read fast enough; past it the connection closes 4200 (slow consumer).',
    }),
    connectTimeoutMs: integer('GATEWAY_CONNECT_TIMEOUT_MS', {
      default: 5000, min: 100, max: 60_000,
      description: 'How long a new WebSocket has to send its `connect` frame before it is closed 4001, in ms.',
    }),
    ipUpgradesPerMinute: integer('GATEWAY_IP_UPGRADES_PER_MINUTE', {
      default: 300, min: 1, max: 1_000_000_000,
      description: 'WebSocket upgrades per client IP per minute; beyond, an upgrade is 429 with Retry-After.',
    }),
    ipConnectsPerMinute: integer('GATEWAY_IP_CONNECTS_PER_MINUTE', {
      default: 300, min: 1, max: 1_000_000_000,
      description: '`connect` frames per client IP per minute; beyond, the socket closes 4300.',
    }),
    maxConnectionsPerSubject: integer('GATEWAY_MAX_CONNECTIONS_PER_SUBJECT', {
      default: 100, min: 1, max: 1_000_000_000,
      description: 'Open connections per product and token subject; beyond, a `connect` closes 4300.',
    }),
    ipTrackedMax: integer('GATEWAY_IP_TRACKED_MAX', {
      default: 100_000, min: 1000, max: 10_000_000,
      description: 'Client addresses (IPv6 by /64) each per-IP count holds in one minute (about 100 bytes each); past it a new address is refused until the minute rolls.',
    }),
    readsPerSecond: integer('GATEWAY_READS_PER_SECOND', {
      default: 10, min: 1, max: 100_000,
      description: 'Reads that cost Redis work (`history`, `subscribe` with a cursor, `presence.read`) per connection per second.',
    }),
    readBurst: integer('GATEWAY_READ_BURST', {
      default: 50, min: 1, max: 1_000_000,
      description: 'The burst of those reads (a reconnect recovering many channels at once fits); beyond it `rate_limited`.',
    }),
    presenceWritesPerSecond: integer('GATEWAY_PRESENCE_WRITES_PER_SECOND', {
      default: 2, min: 1, max: 10_000,
      description: 'Presence writes (`presence.enter`, `presence.update`) per connection per second.',
    }),
    presenceWriteBurst: integer('GATEWAY_PRESENCE_WRITE_BURST', {
      default: 10, min: 1, max: 100_000,
      description: 'The burst of presence writes (entering a few rosters at connect fits); beyond it `rate_limited`.',
    }),
    presenceSweepMs: integer('GATEWAY_PRESENCE_SWEEP_MS', {
      default: 5000, min: 100, max: 60_000,
      description: 'How often a gateway takes expired presence entries off its channels\' rosters, in ms.',
    }),
    revocationSweepMs: integer('GATEWAY_REVOCATION_SWEEP_MS', {
      default: 10_000, min: 100, max: 600_000,
      description: 'How often a gateway asks PostgreSQL whether its live connections\' API keys were revoked (closing those 4001), in ms.',
    }),
    occupancyLeaseMs: integer('GATEWAY_OCCUPANCY_LEASE_MS', {
      default: 30_000, min: 1000, max: 300_000,
      description: 'How long a gateway\'s claim "I have subscribers on this channel" lives unrefreshed (refreshed at half), in ms.',
    }),
  })
