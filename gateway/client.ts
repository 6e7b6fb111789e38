// One WebSocket connection's state machine: waiting for `connect` (a delegated token), then connected with its token's
// channels; subscribe, unsubscribe, ping. Errors answer one request and never close the connection; a missing, invalid,
// expired or revoked token closes it with 4001.
import { randomUUID } from 'node:crypto'
import { config } from '../shared/config'
import { ApiError, logUnlessOutage } from '../shared/errors'
import { type HistoryPolicy, keepsHistory } from '../shared/realtime/broker'
import type { ReportedConnection } from '../shared/realtime/connection-reports'
import { isConsoleIdentity } from '../shared/realtime/console-identity'
import { namespaceOf } from '../shared/realtime/names'
import type { NamespacePolicy } from '../shared/realtime/policies'
import { PRESENCE_TTL_DEFAULT_SECONDS } from '../shared/realtime/presence'
import { type Claims, TokenError } from '../shared/realtime/tokens'
import { type Budget, ConnectionBudgets } from './connection-budgets'
import type { CredentialIndex } from './credential-index'
import type { Deadlines } from './deadlines'
import { DISCONNECTS, type Disconnect, revokedReason } from './disconnect'
import type { GatewayLimits } from './limits'
import { type Hub, type Position, topicOf } from './hub'
import { CLIENT_EVENT_MAX_BYTES, encode, type FrameErrorCode, historyFrame, parseFrame, type Request } from './protocol'
import type { GatewayBackends } from './ports'
import { gatewayMetrics } from './metrics'
import { merge, type Positioned } from './recovery'
import { Rosters } from './rosters'
import type { Transport } from './transport'


/** What a connection needs from its gateway. */
export interface GatewayContext {
  hub: Hub<Connection>
  /** The fan-out reader's shards (gateway/fanout.ts). */
  shards: {
    /** Makes a channel's shard read (resolves once the reader stands on it; rejects when Redis cannot be read). */
    add(shard: number): Promise<void>
    /** Its last channel here left. */
    remove(shard: number): void
  }
  /** Every live connection, for revocations and draining. */
  connections: Set<Connection>
  /** The connect timeout, then the token's expiry: one shared timer for all connections. */
  deadlines: Deadlines<Connection>
  /** Per-IP `connect` frames and per-subject connections (gateway/limits.ts); none when absent. */
  limits?: GatewayLimits
  /** Broker, presence, policies, revocations, tokens and usage (./ports.ts). */
  backends: GatewayBackends
  /** The connections by the credential their token names, for revocations (none when absent). */
  credentials?: CredentialIndex<Connection>
}

/** One subscription's state (see Connection.channels). */
interface ChannelState {
  buffer?: Positioned[]
  /** Set while the subscription is being set up: frames without a position (presence events, client events) wait here. */
  held?: string[]
  sent?: Position
}

/**
 * What one history read over the socket may carry (entry bytes): half the socket's buffer limit, so that a recovery
 * replay or a history reply, written at once, never by itself passes the limit and closes a healthy client 4200. A
 * larger gap is `recovered: false` (all or nothing), and a larger window is `truncated`, as on the public route.
 */
const SOCKET_HISTORY_BYTES = Math.min(config.realtime.historyMaxReplyBytes, Math.floor(config.realtime.gatewayMaxBufferedBytes / 2))

/** The inbox of a connection with nothing in flight (one shared promise, not one per connection). */
const SETTLED: Promise<void> = Promise.resolve()

/**
 * When a token expires: the instant, and `ttl`, the seconds left by this gateway's clock, so a client with a wrong
 * clock still refreshes in time (centrifuge-js does the same with its `ttl`).
 */
const lifetime = (claims: Claims) => ({ expiresAt: new Date(claims.exp * 1000).toISOString(), ttl: Math.max(0, Math.floor(claims.exp - Date.now() / 1000)) })

/**
 * What a connection may have waiting to be handled (a client resubscribing to many channels at once fits); past it a
 * frame is answered `rate_limited` at once, unhandled, so a client flooding frames cannot grow the queue without bound.
 */
const MAX_QUEUED_FRAMES = 1000
const MAX_QUEUED_BYTES = 2 * 1024 * 1024

/** The operations a token carries on a channel (none when it does not name it). */
const opsOf = (claims: Claims, channel: string): readonly string[] => claims.channels.find((c) => c.name === channel)?.ops ?? []

export class Connection {
  readonly id = randomUUID()
  claims: Claims | null = null
  /** When its `connect` was accepted (ms since the epoch); unset before. */
  connectedAt: number | undefined
  /**
   * Subscriptions, one record each instead of parallel maps:
   * - `buffer`: set while the subscription is being set up; live publications wait there until history is merged in;
   * - `sent`: the last position sent; a live publication at or below it was already sent from history (the reader may
   *   deliver an entry after the history read that covered it), so it is dropped, never sent twice.
   */
  private readonly channels = new Map<string, ChannelState>()
  private closed = false
  /** The rosters this connection entered (made on its first presence.enter). */
  private rosters: Rosters | undefined
  /** Its own rate limits: client events, reads, presence writes (made on first use). */
  private budgets: ConnectionBudgets | undefined
  /** True while this connection holds a place in its subject's connection count. */
  private countedForSubject = false

  /** `ip`: the client's address, as the upgrade saw it. */
  constructor(private readonly transport: Transport, private readonly gateway: GatewayContext, private readonly ip = '127.0.0.1') {
    gateway.connections.add(this)
    gateway.deadlines.set(this, Date.now() + config.realtime.gatewayConnectTimeoutMs)
  }

  /** The gateway's edges: broker, presence, policies, revocations, tokens, usage. */
  private get backends(): GatewayBackends {
    return this.gateway.backends
  }

  /** Its deadline passed: no `connect` frame in time, or the token expired (no `auth` swapped in a newer one). */
  deadlinePassed(): void {
    this.disconnect(DISCONNECTS.invalidToken, this.claims ? 'token expired' : 'no connect frame in time')
  }

  send(frame: string): void {
    if (!this.closed) this.transport.send(frame)
  }

  /**
   * A publication of a pending subscription (see Hub): buffered while history is read; after that, sent unless history
   * already gave it. The first one newer than what history gave proves the reader has caught up: the subscription goes
   * live on the channel's topic, and the runtime delivers the rest.
   */
  deliver(channel: string, position: Position | undefined, frame: string): void {
    const state = this.channels.get(channel)
    if (!state) return
    // Nothing of a channel reaches the client before its subscribe reply.
    if (position === undefined) return state.held ? void state.held.push(frame) : this.send(frame)
    if (state.buffer) return void state.buffer.push({ offset: position.offset, frame })
    const sent = state.sent
    // Same epoch, not newer: already sent. A new epoch (the channel's history was lost) starts its offsets again.
    if (sent && sent.epoch === position.epoch && position.offset <= sent.offset) return
    state.sent = position
    this.send(frame)
    this.goLive(channel)
  }

  /** Bytes written to this connection but not yet taken by the client. */
  buffered(): number {
    return this.transport.buffered()
  }

  private goLive(channel: string): void {
    const topic = this.closed ? null : this.gateway.hub.goLive(this.claims!.pid, channel, this)
    if (topic) this.transport.subscribe(topic)
  }

  disconnect(reason: Disconnect, detail?: string): void {
    if (this.closed) return
    this.transport.close(reason.code, detail ? `${reason.reason}: ${detail}`.slice(0, 120) : reason.reason)
    this.cleanup()
  }

  /** The socket closed (either side): forget everything this connection held. */
  cleanup(): void {
    if (this.closed) return
    this.closed = true
    if (this.claims) this.backends.usage.connection(this.claims.pid, -1)
    if (this.countedForSubject) this.gateway.limits?.subjects.release(this.claims!.pid, this.claims!.sub)
    this.gateway.deadlines.clear(this)
    for (const channel of [...this.channels.keys()]) this.leave(channel)
    this.rosters?.leaveAll()
    this.gateway.connections.delete(this)
    this.gateway.credentials?.release(this)
  }

  /** Frames are handled one after another, in the order sent: a client may send `connect` and `subscribe` at once. */
  onMessage(message: string | Buffer): Promise<void> {
    // A client that sends faster than its frames are handled must not grow the queue without bound.
    const size = typeof message === 'string' ? message.length : message.byteLength
    if (this.queued > 0 && (this.queued >= MAX_QUEUED_FRAMES || this.queuedBytes + size > MAX_QUEUED_BYTES)) {
      const parsed = parseFrame(message)
      gatewayMetrics.frameReceived(parsed.ok ? parsed.request.type : undefined)
      this.refuse(parsed.ok ? parsed.request : { id: parsed.id }, 'rate_limited', 'too many frames waiting to be handled; wait for replies')
      return this.inbox
    }
    this.queued++
    this.queuedBytes += size
    const handled = () => {
      this.queued--
      this.queuedBytes -= size
    }
    // A failure must not stop the queue: every later frame still gets its answer.
    this.inbox = this.inbox.then(() => this.handle(message)).catch((error) => logUnlessOutage('gateway frame failed', error)).finally(handled)
    return this.inbox
  }

  private inbox: Promise<void> = SETTLED
  private queued = 0
  private queuedBytes = 0

  private async handle(message: string | Buffer): Promise<void> {
    if (this.closed) return
    const parsed = parseFrame(message)
    gatewayMetrics.frameReceived(parsed.ok ? parsed.request.type : undefined)
    if (!parsed.ok) return this.refuse({ id: parsed.id }, 'invalid', parsed.message)
    const request = parsed.request
    try {
      if (request.type === 'connect') return await this.connect(request)
      if (!this.claims) return this.refuse(request, 'invalid', 'send a connect frame with a token first')
      if (request.type === 'auth') return await this.auth(request)
      if (request.type === 'subscribe') return await this.subscribe(request)
      if (request.type === 'unsubscribe') return this.unsubscribe(request)
      if (request.type === 'publish') return await this.publish(request)
      if (request.type === 'history') return await this.history(request)
      if (request.type === 'presence.enter' || request.type === 'presence.update') return await this.enter(request)
      if (request.type === 'presence.leave') return await this.leavePresence(request)
      if (request.type === 'presence.read') return await this.readPresence(request)
      return this.send(encode.reply(request.id, 'ping'))
    } catch (error) {
      // A backing service could not answer: this request fails, the connection stays.
      logUnlessOutage('gateway request failed', error, { type: request.type })
      this.refuse(request, 'unavailable', 'the service cannot serve this request now; retry with backoff')
    }
  }

  /** The token's claims, or why it is refused (a TokenError reason, or a revoked credential). Throws when it cannot be told. */
  private async check(token: string): Promise<Claims | string> {
    let claims: Claims
    try {
      claims = await this.backends.tokens.verify(token)
    } catch (error) {
      if (error instanceof TokenError) return error.reason
      throw error // the database could not tell: unavailable, not 4001
    }
    return (await this.backends.revocations.isRevoked(claims)) ? revokedReason(claims) : claims
  }

  /** Takes `claims` as the connection's token: it closes the connection 4001 when it expires. */
  private adopt(claims: Claims): void {
    this.claims = claims
    this.gateway.deadlines.set(this, claims.exp * 1000)
    if (!this.closed) this.gateway.credentials?.hold(this, claims.akid)
  }

  /** The connection as a connection report shows it (shared/realtime/connection-reports.ts): null until connected. */
  reported(channelsShown: number): ReportedConnection | null {
    if (!this.claims || this.closed || this.connectedAt === undefined) return null
    const channels: string[] = []
    for (const channel of this.channels.keys()) {
      if (channels.length >= channelsShown) break
      channels.push(channel)
    }
    return { id: this.id, subject: this.claims.sub, connectedAt: this.connectedAt, subscriptions: this.channels.size, channels }
  }

  private async connect(request: Extract<Request, { type: 'connect' }>): Promise<void> {
    if (this.claims) return this.refuse(request, 'invalid', 'already connected')
    // Counted before the token is even parsed: a flood of connect frames from one address costs a map lookup each.
    const limits = this.gateway.limits
    const hit = limits?.connects.hit(this.ip)
    if (hit && !hit.allowed) return this.disconnect(DISCONNECTS.limited, hit.crowded ? 'too many client addresses this minute' : 'too many connect frames from this address')
    const claims = await this.check(request.token)
    if (typeof claims === 'string') return this.disconnect(DISCONNECTS.invalidToken, claims)
    if (this.closed) return
    if (limits) {
      if (!limits.subjects.take(claims.pid, claims.sub)) return this.disconnect(DISCONNECTS.limited, 'too many connections for this subject')
      this.countedForSubject = true
    }
    this.adopt(claims)
    this.connectedAt = Date.now()
    this.backends.usage.connection(claims.pid, 1)
    this.send(encode.reply(request.id, 'connect', { client: this.id, subject: claims.sub, ...lifetime(claims) }))
  }

  /**
   * A newer token for the same subject and product, before the current one expires: the connection keeps its
   * subscriptions (those the new token no longer reaches are ended by the server). A token the service does not accept
   * is an `invalid` error frame; the connection keeps its current token until that one expires.
   */
  private async auth(request: Extract<Request, { type: 'auth' }>): Promise<void> {
    const current = this.claims!
    const claims = await this.check(request.token)
    if (typeof claims === 'string') return this.refuse(request, 'invalid', `token not accepted: ${claims}`)
    if (claims.sub !== current.sub || claims.pid !== current.pid) {
      return this.refuse(request, 'invalid', 'token not accepted: it is for another subject or product')
    }
    if (this.closed) return
    this.adopt(claims)
    for (const channel of [...this.channels.keys()]) {
      if (opsOf(claims, channel).includes('subscribe')) continue
      this.endSubscription(channel, 'token')
    }
    this.send(encode.reply(request.id, 'auth', lifetime(claims)))
  }

  private async subscribe(request: Extract<Request, { type: 'subscribe' }>): Promise<void> {
    const claims = this.claims!
    const { channel } = request
    if ((request.offset === undefined) !== (request.epoch === undefined)) {
      return this.refuse(request, 'invalid', 'a cursor needs both offset and epoch')
    }
    if (request.offset !== undefined && !this.allowed('read', request)) return
    const { ops, policy } = await this.access(channel)
    if (!ops.includes('subscribe')) return this.refuse(request, 'forbidden', `the token does not allow subscribe on ${channel}`)
    if (this.channels.has(channel)) return this.refuse(request, 'invalid', `already subscribed to ${channel}`)
    // The namespace may have been removed since the token was issued: a token never reaches more than its namespace allows.
    if (!policy) return this.refuse(request, 'forbidden', `namespace ${namespaceOf(channel)} is not registered`)
    if (this.closed || this.channels.has(channel)) return

    // Live first (buffered), then the position or the history after the cursor: no gap, no duplicate.
    const history = keepsHistory(policy.broker)
    const state: ChannelState = history ? { buffer: [], held: [] } : { held: [] }
    this.channels.set(channel, state)
    const shard = this.gateway.hub.subscribe(claims.pid, channel, this)
    let position: { offset: number; epoch: string; recovered?: boolean; missed: Positioned[]; after: number } | null = null
    try {
      // Every subscription waits until its shard is read (not only the one that made it wanted): a reply must never
      // come before the reader stands on the shard, or publications in between would be missed.
      await this.gateway.shards.add(shard)
      if (history) position = await this.position(claims.pid, channel, policy.broker, request)
    } catch (error) {
      this.leave(channel)
      throw error
    }
    if (this.closed) return
    if (this.channels.get(channel) !== state) {
      // Ended by the server while it was being set up (a gap on its shard, or a narrower token): the client was told.
      return this.refuse(request, 'unavailable', 'the subscription ended while it was being set up; subscribe again')
    }
    const buffered = state.buffer ?? []
    state.buffer = undefined
    if (request.offset !== undefined) gatewayMetrics.recovery(position?.recovered === true)
    // Without history nothing can be recovered (a cursor is answered `recovered: false`) and nothing is deduplicated:
    // the subscription goes live at once.
    if (!position) {
      this.send(encode.reply(request.id, 'subscribe', { channel, ...(request.offset !== undefined ? { recovered: false } : {}) }))
      this.release(state)
      return this.goLive(channel)
    }
    const { missed, after, ...where } = position
    // The reply first, then what was missed and what arrived meanwhile, each once and in offset order.
    this.send(encode.reply(request.id, 'subscribe', { channel, ...where }))
    let last = after
    for (const item of merge(missed, buffered, after)) {
      this.send(item.frame)
      last = item.offset
    }
    state.sent = { offset: last, epoch: where.epoch }
    this.release(state)
  }

  /** The subscription is set up: what arrived without a position meanwhile goes out, after its reply and replay. */
  private release(state: ChannelState): void {
    const held = state.held ?? []
    state.held = undefined
    for (const frame of held) this.send(frame)
  }

  /**
   * Where the subscription starts, and after which offset publications are sent. Without a cursor: the channel's top
   * (an epoch is started when it has none, so the client's cursor can recover the epoch's first publications).
   * With one: everything after it from history, all or nothing (`recovered: false`, and delivery from the current
   * position on, when the epoch changed or entries aged out).
   */
  private async position(productId: string, channel: string, policy: HistoryPolicy, request: Extract<Request, { type: 'subscribe' }>) {
    if (request.offset === undefined) {
      const top = await this.backends.broker.position(productId, channel, policy)
      return { ...top, missed: [], after: top.offset }
    }
    const result = await this.backends.broker.history(productId, channel, policy, { offset: request.offset, epoch: request.epoch! }, SOCKET_HISTORY_BYTES)
    if (!result.recovered) {
      // A channel without an epoch (its history expired, or Redis lost it) starts one, as a subscription without a
      // cursor does: the new cursor then names the epoch the next publications go to, and can recover them.
      const top = result.epoch === '' ? await this.backends.broker.position(productId, channel, policy) : result
      return { offset: top.offset, epoch: top.epoch, recovered: false, missed: [], after: top.offset }
    }
    const missed = result.entries.map((entry) => ({ offset: entry.offset, frame: historyFrame(channel, entry) }))
    return { offset: result.offset, epoch: result.epoch, recovered: true, missed, after: request.offset }
  }

  private unsubscribe(request: Extract<Request, { type: 'unsubscribe' }>): void {
    if (!this.channels.has(request.channel)) return this.refuse(request, 'invalid', `not subscribed to ${request.channel}`)
    this.leave(request.channel)
    this.send(encode.reply(request.id, 'unsubscribe', { channel: request.channel }))
  }

  /** The token's operations on a channel, and the channel's namespace policy (null when no longer registered). */
  private async access(channel: string): Promise<{ ops: readonly string[]; policy: NamespacePolicy | null }> {
    const claims = this.claims!
    const ops = opsOf(claims, channel)
    return { ops, policy: ops.length ? ((await this.backends.policies.policies(claims.pid)).namespaces.get(namespaceOf(channel)) ?? null) : null }
  }

  /**
   * A client event: allowed where the token carries `publish` (issued only where the namespace enables client events)
   * and the namespace still does; at most 32 KiB serialized; 5 a second, burst 10, per connection, and within the product's
   * budgets (client events per second across all its connections, fan-out bytes on the shard). Fanned out through
   * the shard stream like any publication, never stored, no offset or epoch, skipped for this connection on every
   * gateway; the reply is the sender's only confirmation.
   */
  private async publish(request: Extract<Request, { type: 'publish' }>): Promise<void> {
    const { ops, policy } = await this.access(request.channel)
    if (!ops.includes('publish')) return this.refuse(request, 'forbidden', `the token does not allow publish on ${request.channel}`)
    if (!policy?.clientEvents) return this.refuse(request, 'forbidden', `client events are not enabled for ${namespaceOf(request.channel)}`)
    const data = JSON.stringify(request.data)
    const size = Buffer.byteLength(data, 'utf8')
    if (size > CLIENT_EVENT_MAX_BYTES) return this.refuse(request, 'invalid', `client event is ${size} bytes serialized; at most ${CLIENT_EVENT_MAX_BYTES}`)
    if (!this.allowed('event', request)) return
    const productId = this.claims!.pid
    let id: string
    try {
      const published = await this.backends.broker.publish({ productId, channel: request.channel, policy: policy.broker, data, senderConnectionId: this.id })
      if (published === null) {
        return this.refuse(request, 'rate_limited', `more than ${config.realtime.productClientEventsPerSecond} client events a second across this product's connections`)
      }
      id = published.id
    } catch (error) {
      // Past the product's fan-out byte budget on the channel's shard (429 on the HTTP route): retry later.
      if (error instanceof ApiError && error.status === 429) return this.refuse(request, 'rate_limited', error.message)
      throw error
    }
    this.backends.usage.count(this.claims!.pid, request.channel, { publishes: 1, bytes: size })
    this.send(encode.reply(request.id, 'publish', { channel: request.channel, messageId: id }))
  }

  /** Takes one from this connection's `budget`; without one the request is answered `rate_limited` (see connection-budgets.ts). */
  private allowed(budget: Budget, request: Request): boolean {
    const refused = (this.budgets ??= new ConnectionBudgets()).take(budget)
    if (refused === null) return true
    this.refuse(request, 'rate_limited', refused)
    return false
  }

  /**
   * Answers a request with an error frame, counted by the request's type and the code (a frame that is not a request
   * of the protocol, without a type: `invalid`). Every error frame goes through here.
   */
  private refuse(request: { id: string | number | null; type?: string }, code: FrameErrorCode, message: string): void {
    gatewayMetrics.refused(request.type, code)
    this.send(encode.error(request.id, code, message))
  }

  /** A history read, as the public route's: a window or a cursor; empty on a namespace that keeps no history. */
  private async history(request: Extract<Request, { type: 'history' }>): Promise<void> {
    if (!this.allowed('read', request)) return
    const { ops, policy } = await this.access(request.channel)
    if (!ops.includes('history') || !policy) return this.refuse(request, 'forbidden', `the token does not allow history on ${request.channel}`)
    const window = [request.last_n, request.last_ms].filter((v) => v !== undefined).length
    const cursor = [request.offset, request.epoch].filter((v) => v !== undefined).length
    if (window + (cursor ? 1 : 0) !== 1 || cursor === 1) {
      return this.refuse(request, 'invalid', 'give exactly one of last_n, last_ms, or a cursor (offset and epoch together)')
    }
    const query = request.last_n !== undefined ? { last_n: request.last_n }
      : request.last_ms !== undefined ? { last_ms: request.last_ms } : { offset: request.offset!, epoch: request.epoch! }
    const result = await gatewayMetrics.read('history', () => this.backends.broker.history(this.claims!.pid, request.channel, policy.broker, query, SOCKET_HISTORY_BYTES))
    this.send(encode.reply(request.id, 'history', { channel: request.channel, ...result }))
  }

  /** The presence operation on a channel: the token must carry it and the namespace still have presence on. */
  private async presenceAllowed(request: Extract<Request, { channel: string }>): Promise<boolean> {
    const { ops, policy } = await this.access(request.channel)
    if (ops.includes('presence') && policy?.presence) return true
    this.refuse(request, 'forbidden', `the token does not allow presence on ${request.channel}`)
    return false
  }

  /**
   * Enter (or, with `presence.update`, change the info of an entry this connection already has). The entry lives
   * `ttlSeconds` (default 60) and the gateway refreshes it at half that while the connection lives, so a gateway that
   * dies leaves ghosts for at most one lifetime. Another tab of the same subject is not a second member, and no second join.
   */
  private async enter(request: Extract<Request, { type: 'presence.enter' | 'presence.update' }>): Promise<void> {
    if (!this.allowed('presenceWrite', request)) return
    // The console watches: its identity never joins a product's rosters, join events or presence webhooks.
    if (isConsoleIdentity(this.claims!.sub)) return this.refuse(request, 'forbidden', 'a console token reads presence; it cannot enter it')
    if (!(await this.presenceAllowed(request))) return
    const rosters = (this.rosters ??= new Rosters(this.backends.presence, { productId: this.claims!.pid, identity: this.claims!.sub, connectionId: this.id }))
    const entered = rosters.ttlOf(request.channel)
    if (request.type === 'presence.update' && entered === undefined) {
      return this.refuse(request, 'invalid', `this connection is not on the roster of ${request.channel}; enter first`)
    }
    const ttlSeconds = (request.type === 'presence.enter' ? request.ttlSeconds : undefined) ?? entered ?? PRESENCE_TTL_DEFAULT_SECONDS
    try {
      await rosters.enter(request.channel, request.info, ttlSeconds)
    } catch (error) {
      // A full roster, or a join past the product's fan-out byte budget on the shard: nothing was written, retry later.
      if (error instanceof ApiError && error.status === 429) return this.refuse(request, 'rate_limited', error.message)
      if (error instanceof ApiError && error.status === 400) return this.refuse(request, 'invalid', error.message)
      throw error
    }
    if (this.closed) return void (await rosters.leave(request.channel))
    this.send(encode.reply(request.id, request.type, { channel: request.channel }))
  }

  private async leavePresence(request: Extract<Request, { type: 'presence.leave' }>): Promise<void> {
    if (this.rosters?.ttlOf(request.channel) === undefined) return this.refuse(request, 'invalid', `not on the roster of ${request.channel}`)
    await this.rosters!.leave(request.channel)
    this.send(encode.reply(request.id, 'presence.leave', { channel: request.channel }))
  }

  private async readPresence(request: Extract<Request, { type: 'presence.read' }>): Promise<void> {
    if (!this.allowed('read', request)) return
    if (!(await this.presenceAllowed(request))) return
    const members = await gatewayMetrics.read('presence', () => this.backends.presence.list(this.claims!.pid, request.channel))
    this.send(encode.reply(request.id, 'presence.read', { channel: request.channel, members }))
  }

  /** Ends a subscription from the server side and says why (see encode.unsubscribed). */
  endSubscription(channel: string, why: 'recover' | 'token'): void {
    const state = this.channels.get(channel)
    if (!state) return
    gatewayMetrics.subscriptionEnded(why === 'recover' ? 'gap' : 'token')
    this.leave(channel)
    // Still being set up: its subscribe request is answered `unavailable` instead, one signal for one request.
    if (state.held !== undefined) return
    this.send(why === 'recover'
      ? encode.unsubscribed(channel, 'continuity lost: subscribe again with your cursor to recover', true)
      : encode.unsubscribed(channel, 'the new token does not allow subscribe on this channel'))
  }

  private leave(channel: string): void {
    this.channels.delete(channel)
    if (!this.closed) this.transport.unsubscribe(topicOf(this.claims!.pid, channel))
    const unwanted = this.gateway.hub.unsubscribe(this.claims!.pid, channel, this)
    if (unwanted !== null) this.gateway.shards.remove(unwanted)
  }
}
