// In-memory implementations of the gateway's edges (gateway/ports.ts) and of its sockets, for the unit tier: a
// connection, the hub and the dispatcher run as in a gateway, with no Redis, PostgreSQL or socket behind them.
import { Connection, type GatewayContext } from '../../gateway/client'
import { CredentialIndex } from '../../gateway/credential-index'
import { Deadlines } from '../../gateway/deadlines'
import type { Batching, LiveTopics } from '../../gateway/dispatch'
import type { FanEntry } from '../../gateway/fanout'
import { Hub } from '../../gateway/hub'
import type { Broker, GatewayBackends, Presence } from '../../gateway/ports'
import type { Transport } from '../../gateway/transport'
import { config } from '../../shared/config'
import type { HistoryEntry, HistoryPolicy, HistoryQuery, HistoryResult } from '../../shared/realtime/broker'
import type { NamespacePolicy } from '../../shared/realtime/policies'
import type { PresenceMember } from '../../shared/realtime/presence'
import { credentialKey } from '../../shared/realtime/revocations'
import { shardOf } from '../../shared/realtime/shards'
import { type Claims, TokenError } from '../../shared/realtime/tokens'

export const PRODUCT = '00000000-0000-4000-8000-0000000000aa'
export const KEY = '00000000-0000-4000-8000-0000000000bb'

/** A namespace policy as the policy source gives it. */
export function namespace(name: string, options: { history?: boolean; presence?: boolean; clientEvents?: boolean } = {}): NamespacePolicy {
  const broker = options.history ? { historyTtlSeconds: 300, historySize: 100 } : { historyTtlSeconds: 0, historySize: 0 }
  return {
    name, presence: options.presence ?? false, clientEvents: options.clientEvents ?? false,
    history: options.history ? { ttlSeconds: 300, size: 100 } : null, broker,
  }
}

/** Channels with history, one epoch each: publishing appends; a cursor of another epoch is not recovered. */
export class MemoryBroker implements Broker {
  readonly channels = new Map<string, { epoch: string; entries: HistoryEntry[] }>()
  readonly events: { channel: string; data: string; sender: string }[] = []
  /** Awaited by a history read after it has read its entries (a test holds a subscription between the two). */
  afterRead: (() => Promise<void>) | undefined

  private channel(productId: string, channel: string) {
    const key = `${productId}:${channel}`
    let found = this.channels.get(key)
    if (!found) this.channels.set(key, (found = { epoch: `epoch-${this.channels.size + 1}`, entries: [] }))
    return found
  }

  /** Stores a publication and returns its fan-out entry, as the publish script would write both. */
  append(productId: string, channel: string, data: unknown): FanEntry {
    const stored = this.channel(productId, channel)
    const offset = stored.entries.length + 1
    const id = `m${offset}`
    stored.entries.push({ id, offset, epoch: stored.epoch, publishedAt: new Date(0).toISOString(), data })
    return { shard: shardOf(productId, channel), product: productId, channel, id, t: 0, offset, epoch: stored.epoch, d: JSON.stringify(data) }
  }

  async position(productId: string, channel: string, _policy: HistoryPolicy) {
    const stored = this.channel(productId, channel)
    return { offset: stored.entries.length, epoch: stored.epoch }
  }

  async history(productId: string, channel: string, _policy: HistoryPolicy, query: HistoryQuery): Promise<HistoryResult> {
    const stored = this.channel(productId, channel)
    const top = { offset: stored.entries.length, epoch: stored.epoch }
    let result: HistoryResult
    if ('offset' in query) {
      result = query.epoch !== stored.epoch
        ? { entries: [], ...top, recovered: false }
        : { entries: stored.entries.filter((e) => e.offset > query.offset), ...top, recovered: true }
    } else {
      result = { entries: 'last_n' in query ? stored.entries.slice(-query.last_n) : [...stored.entries], ...top, recovered: true }
    }
    await this.afterRead?.()
    return result
  }

  async publish(event: { productId: string; channel: string; data: string; senderConnectionId: string }) {
    this.events.push({ channel: event.channel, data: event.data, sender: event.senderConnectionId })
    return { id: `event${this.events.length}` }
  }
}

/** Rosters in a map: one member per identity, counting its connections. */
export class MemoryPresence implements Presence {
  readonly entries = new Map<string, Map<string, { identity: string; info: unknown }>>()

  async enter(entry: { productId: string; channel: string; identity: string; connectionId: string; info?: unknown }) {
    const roster = this.entries.get(entry.channel) ?? new Map()
    this.entries.set(entry.channel, roster)
    roster.set(entry.connectionId, { identity: entry.identity, info: entry.info ?? null })
  }

  async leave(entry: { channel: string; connectionId: string }) {
    this.entries.get(entry.channel)?.delete(entry.connectionId)
  }

  async list(_productId: string, channel: string): Promise<PresenceMember[]> {
    const byIdentity = new Map<string, PresenceMember>()
    for (const { identity, info } of this.entries.get(channel)?.values() ?? []) {
      const member = byIdentity.get(identity)
      if (member) member.connections++
      else byIdentity.set(identity, { identity, connections: 1, info })
    }
    return [...byIdentity.values()]
  }

  async sweep() {}
}

/** A client's socket: what it was sent, the topics it joined, and how much it holds unread (settable). */
export class RecordingTransport implements Transport {
  readonly frames: Record<string, unknown>[] = []
  readonly topics = new Set<string>()
  closed: { code: number; reason: string } | undefined
  unread = 0
  /** Called once the socket is closed, as the runtime's close event (the gateway forgets the socket). */
  onClosed: (() => void) | undefined

  send(frame: string): void {
    this.frames.push(JSON.parse(frame))
  }

  close(code: number, reason: string): void {
    this.closed = { code, reason }
    queueMicrotask(() => this.onClosed?.())
  }

  subscribe(topic: string): void {
    this.topics.add(topic)
  }

  unsubscribe(topic: string): void {
    this.topics.delete(topic)
  }

  buffered(): number {
    return this.unread
  }

  /** The frames sent since the last call. */
  take(): Record<string, unknown>[] {
    return this.frames.splice(0)
  }
}

/** The runtime's topic publish over recording transports: one frame to each subscribed socket but the skipped one. */
export class MemoryTopics implements LiveTopics {
  readonly sockets = new Map<string, RecordingTransport>()
  readonly connections = new Map<string, Connection>()
  private published = new Set<string>()
  unchecked = 0

  readonly publish = (topic: string, frame: string, skip?: string): void => {
    for (const [id, transport] of this.sockets) if (id !== skip && transport.topics.has(topic)) transport.send(frame)
    this.published.add(topic)
    this.unchecked += frame.length
  }

  connectionOf(connectionId: string): Connection | undefined {
    return this.connections.get(connectionId)
  }

  takePublished(): Set<string> {
    const published = this.published
    this.published = new Set()
    this.unchecked = 0
    return published
  }
}

export const noBatching: Batching = { startBatch() {}, endBatch() {} }

/** A gateway made of the fakes: `backends` and `context` to make connections with, and what each fake recorded. */
export function memoryGateway(namespaces: NamespacePolicy[]) {
  const broker = new MemoryBroker()
  const presence = new MemoryPresence()
  const tokens = new Map<string, Claims>()
  // Ended credentials (`akid`), and pairs (`credentialKey`) that do not reach their product: what a check answers.
  const revoked = new Set<string>()
  const denied = new Set<string>()
  const forgottenUsers: string[] = []
  const usage: { productId: string; channel?: string; add?: Record<string, number>; change?: number }[] = []
  const shards = { wanted: new Set<number>(), ready: Promise.resolve() }
  const backends: GatewayBackends = {
    broker,
    presence,
    policies: { policies: async () => ({ namespaces: new Map(namespaces.map((n) => [n.name, n])) }) },
    revocations: {
      isRevoked: async (credential) => revoked.has(credential.akid) || denied.has(credentialKey(credential)),
      revokedAmong: async (credentials) => ({
        ended: new Set([...credentials].flatMap((c) => (revoked.has(c.akid) ? [c.akid] : []))),
        denied: new Set([...credentials].flatMap((c) => (denied.has(credentialKey(c)) ? [credentialKey(c)] : []))),
        sessions: new Map(),
      }),
      markRevoked: (akid) => void revoked.add(akid),
      remember: (answer) => answer.ended.forEach((akid) => revoked.add(akid)),
      forgetActive: () => {},
      forgetUser: (userId) => void forgottenUsers.push(userId),
    },
    tokens: {
      verify: async (token) => {
        const claims = tokens.get(token)
        if (!claims) throw new TokenError('malformed')
        if (claims.exp <= Date.now() / 1000) throw new TokenError('expired')
        return claims
      },
    },
    usage: {
      count: (productId, channel, add) => void usage.push({ productId, channel, add }),
      connection: (productId, change) => void usage.push({ productId, change }),
    },
  }
  const hub = new Hub<Connection>()
  const context: GatewayContext = {
    hub, connections: new Set(), credentials: new CredentialIndex(), backends, deadlines: new Deadlines<Connection>(() => {}),
    shards: {
      add: async (shard) => {
        await shards.ready
        shards.wanted.add(shard)
      },
      remove: (shard) => void shards.wanted.delete(shard),
    },
  }
  const topics = new MemoryTopics()
  /** A token for the test subject (or `sub`) reaching these channels, and a connection (not yet connected) on a recording socket. */
  const token = (channels: Claims['channels'], keyId = KEY, sub = 'ext:tester') => {
    const name = `token${tokens.size + 1}`
    const now = Math.floor(Date.now() / 1000)
    tokens.set(name, { sub, ext: true, pid: PRODUCT, akid: keyId, env: config.environment, channels, iat: now, exp: now + 600, jti: name })
    return name
  }
  const open = () => {
    const transport = new RecordingTransport()
    const connection = new Connection(transport, context)
    topics.sockets.set(connection.id, transport)
    topics.connections.set(connection.id, connection)
    transport.onClosed = () => {
      topics.sockets.delete(connection.id)
      topics.connections.delete(connection.id)
      connection.cleanup()
    }
    return { transport, connection }
  }
  return { backends, broker, presence, revoked, denied, forgottenUsers, usage, shards, hub, context, topics, token, open }
}

/** Sends one frame and waits until it is handled. */
export const request = (connection: Connection, frame: Record<string, unknown>) => connection.onMessage(JSON.stringify(frame))
