// The gateway's edges: what it needs of the broker, presence, namespace policies, revocations, token verification and
// usage, each the narrow interface the gateway consumes. node.ts passes the Redis- and PostgreSQL-backed ones
// (./backends.ts); the unit tier passes in-memory ones, so a connection is tested with nothing started.
import type { HistoryPolicy, HistoryQuery, HistoryResult } from '../shared/realtime/broker'
import type { ReportedConnection } from '../shared/realtime/connection-reports'
import type { NamespacePolicy } from '../shared/realtime/policies'
import type { Revoked, TokenCredential } from '../shared/realtime/revocations'
import type { PresenceMember } from '../shared/realtime/presence'
import type { Claims } from '../shared/realtime/tokens'

/** A channel's history and its client events (shared/realtime/broker.ts). */
export interface Broker {
  /** Where a subscription without a cursor starts: the channel's top (an epoch is started when it has none). */
  position(productId: string, channel: string, policy: HistoryPolicy): Promise<{ offset: number; epoch: string }>
  /** A window, or everything after a cursor (all or nothing: `recovered: false`), of at most `maxBytes` of entries. */
  history(productId: string, channel: string, policy: HistoryPolicy, query: HistoryQuery, maxBytes: number): Promise<HistoryResult>
  /**
   * Fans a client event out through the channel's shard stream, never stored; its entry names the sender, whom every
   * gateway skips. Counted in the product's client events per second, across its connections and gateways: past them
   * null, nothing published (gateway/event-budget.ts). Throws ApiError 429 past the product's fan-out byte budget on the shard.
   */
  publish(event: { productId: string; channel: string; policy: HistoryPolicy; data: string; senderConnectionId: string }): Promise<{ id: string } | null>
}

/** Channel rosters (shared/realtime/presence.ts). */
export interface Presence {
  /**
   * On the roster for `ttlSeconds`, or refreshed (same connection). Throws ApiError 429 (roster full, past the fan-out
   * budget) or 400 (info too large), nothing written.
   */
  enter(entry: { productId: string; channel: string; identity: string; connectionId: string; info?: unknown; ttlSeconds: number }): Promise<unknown>
  /** Off the roster; the identity leaves with its last connection. Leaving twice is harmless. */
  leave(entry: { productId: string; channel: string; identity: string; connectionId: string }): Promise<void>
  list(productId: string, channel: string): Promise<PresenceMember[]>
  /** Takes expired connections off these channels' rosters (their leaves reach the subscribers). */
  sweep(channels: Iterable<{ productId: string; channel: string }>): Promise<void>
}

/** Channel occupancy across gateways, by leases (shared/realtime/occupancy.ts). */
export interface Occupancy {
  /**
   * `holder` has subscribers on these channels: each lease (re)starts for `leaseMs`, with the holder's subscriptions
   * on it when given (the product's active channels list them).
   */
  hold(holder: string, channels: { productId: string; channel: string; subscriptions?: number }[], leaseMs: number): Promise<void>
  /** `holder` has no subscriber left on these channels. */
  release(holder: string, channels: { productId: string; channel: string }[]): Promise<void>
}

/** A product's namespace policies (shared/realtime/policies.ts); rejects when they cannot be read. */
export interface PolicySource {
  policies(productId: string): Promise<{ namespaces: ReadonlyMap<string, NamespacePolicy> }>
}

/**
 * Revoked token credentials (shared/realtime/revocations.ts): the API key, login session or platform key that asked for
 * a token, and whether it still reaches the token's product. PostgreSQL is the authority, the gateway caches its answers.
 */
export interface RevocationSource {
  /** True when a token's credential is revoked for its product (cached); throws when that cannot be told. */
  isRevoked(credential: TokenCredential): Promise<boolean>
  /** Asks the authority about these tokens' credentials (a sweep of the live connections); throws when it cannot answer. */
  revokedAmong(credentials: Iterable<TokenCredential>): Promise<Revoked>
  /**
   * A credential's end heard (an invalidation): remembered, whatever the product, when a live connection here holds it
   * (`held`) or an answer or a check in flight names it.
   */
  markRevoked(akid: string, held: boolean): void
  /** What a sweep learned: remembered. */
  remember(answer: Revoked): void
  /** Drops the cached "not revoked" answers: after a gap in invalidations anything may have been revoked. */
  forgetActive(): void
  /** Drops the cached "not revoked" answers about this user's login sessions: the user left an organization. */
  forgetUser(userId: string): void
}

/** Delegated token verification (shared/realtime/tokens.ts). */
export interface TokenVerifier {
  /** The token's claims; throws TokenError when refused, anything else when it cannot be told now. */
  verify(token: string): Promise<Claims>
}

/** Usage counted for analytics (shared/realtime/usage.ts). */
export interface Usage {
  count(productId: string, channel: string, add: { publishes?: number; deliveries?: number; bytes?: number }): void
  connection(productId: string, change: 1 | -1): void
}

/** A product's connections, reported while someone looks (shared/realtime/connection-reports.ts). */
export interface ConnectionReportsPort {
  /** The products whose connections are wanted now. */
  watched(): Promise<string[]>
  report(gateway: string, productId: string, connections: ReportedConnection[], total: number): Promise<void>
  withdraw(gateway: string, productId: string): Promise<void>
}

/** Everything the gateway needs from outside the process. */
export interface GatewayBackends {
  broker: Broker
  presence: Presence
  policies: PolicySource
  revocations: RevocationSource
  tokens: TokenVerifier
  usage: Usage
  /** Absent in the unit tier: nothing is told which channels are occupied. */
  occupancy?: Occupancy
  /** Absent in the unit tier: no connection is reported. */
  connectionReports?: ConnectionReportsPort
}
