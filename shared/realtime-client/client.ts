// The reference Realtime client: the same code in browsers and in Bun, no dependencies. It connects with a token from
// its provider, keeps every subscription's last {offset, epoch} and resubscribes with it after any reconnect (reporting
// whether it recovered), refreshes the token with `auth` before it expires, reconnects at once on 4001 (with a fresh
// token) and 4100, and with full-jitter exponential backoff after any other close (after 4300, a limit, at least 5 s
// more). Protocol: docs/realtime-protocol.md. Its one import is the close-code table it shares with the gateway.
import { closeCodeOf, DISCONNECTS } from '../realtime/close-codes'

/** A message delivered on a channel; `offset`/`epoch` when the namespace keeps history; `data` or `ref`. */
export interface Publication<T = unknown> {
  channel: string
  id: string
  offset?: number
  epoch?: string
  data?: T
  ref?: { bucket_key: string; size: number; content_type?: string }
}

export interface PresenceEvent {
  channel: string
  identity: string
  info: unknown
}

/** Why a subscription (re)started: `recovered` is meaningful when `wasRecovering`. */
export interface SubscribedContext {
  wasRecovering: boolean
  recovered: boolean
  offset?: number
  epoch?: string
}

export interface SubscriptionHandlers<T = unknown> {
  publication?(publication: Publication<T>): void
  join?(event: PresenceEvent): void
  leave?(event: PresenceEvent): void
  /** After every successful subscribe, the first and each one after a reconnect. */
  subscribed?(context: SubscribedContext): void
  /** The server ended the subscription for good (the token no longer reaches the channel), or subscribing failed. */
  unsubscribed?(reason: string): void
}

/** An error frame, as a rejected request. */
export class RealtimeError extends Error {
  constructor(readonly code: string, message: string, readonly temporary: boolean) {
    super(message)
  }
}

export interface ClientOptions {
  /** The gateway URL, as `gatewayUrl` from token issue. */
  url: string
  /** Returns a fresh delegated token (typically by asking the product's backend, which calls POST /tokens/issue). */
  getToken(): Promise<string>
  /** Defaults to the global WebSocket (browsers, Bun, Node ≥ 22). */
  WebSocket?: typeof WebSocket
  /** Backoff bounds after a close other than 4001/4100 (centrifuge-js uses the same defaults). */
  minReconnectDelayMs?: number
  maxReconnectDelayMs?: number
  /** Refresh the token this long before it expires. */
  refreshAheadMs?: number
  /**
   * Liveness: a `ping` this often while connected, and a connection whose ping goes unanswered for `pongTimeoutMs` is
   * taken as dead (a half-open TCP connection never closes by itself) and replaced, with backoff.
   */
  pingIntervalMs?: number
  pongTimeoutMs?: number
  /** Connection state changes, for a UI. */
  onState?(state: 'connecting' | 'connected' | 'disconnected', detail?: { code?: number; reason?: string }): void
}

/** Full jitter (AWS): a random delay in [0, min(max, base × 2^attempt)). Pure, for tests. */
export function backoffDelay(attempt: number, minMs: number, maxMs: number, random: () => number = Math.random): number {
  return Math.floor(random() * Math.min(maxMs, minMs * 2 ** attempt))
}

/**
 * 4300: a gateway limit was crossed (too many connections of this subject, or connect frames from this address). Retrying
 * soon cannot help, so the wait is at least LIMITED_MIN_DELAY_MS on top of the usual backoff: never a tight loop.
 */
export const LIMITED_CLOSE_CODE = DISCONNECTS.limited.code
export const LIMITED_MIN_DELAY_MS = DISCONNECTS.limited.minDelayMs

/**
 * The wait before reconnecting after a close with `code`, the `attempt`-th in a row, by the code's reconnect rule
 * (shared/realtime/close-codes.ts): at once only the first time in a row, else backoff, after a least delay where the
 * rule has one. Pure, for tests.
 */
export function reconnectDelay(code: number, attempt: number, minMs: number, maxMs: number, random: () => number = Math.random): number {
  const close = closeCodeOf(code)
  const atOnce = close?.reconnect === 'at-once' || close?.reconnect === 'at-once-fresh-token'
  if (atOnce && attempt === 0) return 0
  const backoff = backoffDelay(attempt, minMs, maxMs, random)
  return close?.reconnect === 'backoff-after-min-delay' ? (close.minDelayMs ?? 0) + backoff : backoff
}

interface Pending {
  resolve(frame: Record<string, unknown>): void
  reject(error: Error): void
}

export class Subscription<T = unknown> {
  /** The last position handled; sent back on resubscribe to recover what was missed. */
  offset?: number
  epoch?: string
  active = false
  /** The socket a subscribe was sent on (answered or not): the server there holds or is setting up the subscription. */
  sentOn: WebSocket | undefined
  /** Counts subscribe requests: only the answer to the latest one may settle the subscription or plan a retry. */
  attempt = 0
  /** A subscribe request is out and unanswered. */
  inFlight = false
  /** A retry after a temporary failure, and how many came before it (for the backoff). */
  retry: ReturnType<typeof setTimeout> | undefined
  retries = 0

  constructor(readonly channel: string, readonly handlers: SubscriptionHandlers<T>, private readonly client: RealtimeClient) {}

  unsubscribe(): void {
    this.client.unsubscribe(this)
  }
}

export class RealtimeClient {
  private socket: WebSocket | undefined
  private state: 'disconnected' | 'connecting' | 'connected' = 'disconnected'
  private readonly subscriptions = new Map<string, Subscription<any>>()
  private readonly pending = new Map<number, Pending>()
  private nextId = 1
  private attempt = 0
  private wanted = false
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined
  private refreshTimer: ReturnType<typeof setTimeout> | undefined
  private pingTimer: ReturnType<typeof setInterval> | undefined

  constructor(private readonly options: ClientOptions) {}

  get connected(): boolean {
    return this.state === 'connected'
  }

  connect(): void {
    this.wanted = true
    if (this.state === 'disconnected') this.open()
  }

  disconnect(): void {
    this.wanted = false
    clearTimeout(this.reconnectTimer)
    clearTimeout(this.refreshTimer)
    clearInterval(this.pingTimer)
    this.socket?.close(1000, 'client disconnect')
  }

  /** Subscribes now if connected, else on connect; resubscribes with its cursor after every reconnect. */
  subscribe<T = unknown>(channel: string, handlers: SubscriptionHandlers<T> = {}): Subscription<T> {
    const existing = this.subscriptions.get(channel)
    if (existing) return existing as Subscription<T>
    const subscription = new Subscription<T>(channel, handlers, this)
    this.subscriptions.set(channel, subscription)
    if (this.connected) void this.sendSubscribe(subscription)
    return subscription
  }

  unsubscribe(subscription: Subscription<any>): void {
    if (this.subscriptions.get(subscription.channel) !== subscription) return
    this.subscriptions.delete(subscription.channel)
    clearTimeout(subscription.retry)
    // Also while its subscribe is still unanswered: the gateway handles frames in order, so the unsubscribe ends what
    // the subscribe sets up, and subscribing to the channel again right after works.
    if (this.connected && subscription.sentOn === this.socket) void this.request({ type: 'unsubscribe', channel: subscription.channel }).catch(() => {})
    subscription.active = false
    subscription.sentOn = undefined
  }

  /** A client event (the namespace must enable them); resolves with the acknowledgement. */
  publish(channel: string, data: unknown) {
    return this.request({ type: 'publish', channel, data })
  }

  history(channel: string, query: { last_n?: number; last_ms?: number; offset?: number; epoch?: string }) {
    return this.request({ type: 'history', channel, ...query })
  }

  presence(channel: string) {
    return {
      enter: (info?: unknown, ttlSeconds?: number) => this.request({ type: 'presence.enter', channel, ...(info === undefined ? {} : { info }), ...(ttlSeconds ? { ttlSeconds } : {}) }),
      update: (info: unknown) => this.request({ type: 'presence.update', channel, info }),
      leave: () => this.request({ type: 'presence.leave', channel }),
      read: () => this.request({ type: 'presence.read', channel }),
    }
  }

  /** Sends a request and resolves with its reply, or rejects with a RealtimeError (or when the connection closes). */
  request(frame: Record<string, unknown>): Promise<Record<string, unknown>> {
    const socket = this.socket
    if (socket?.readyState !== 1) return Promise.reject(new RealtimeError('disconnected', 'not connected', true))
    const id = this.nextId++
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject })
      socket.send(JSON.stringify({ ...frame, id }))
    })
  }

  private setState(state: 'disconnected' | 'connecting' | 'connected', detail?: { code?: number; reason?: string }): void {
    this.state = state
    this.options.onState?.(state, detail)
  }

  private open(): void {
    this.setState('connecting')
    const Socket = this.options.WebSocket ?? globalThis.WebSocket
    const socket = new Socket(this.options.url)
    this.socket = socket
    socket.onopen = () => void this.handshake(socket)
    socket.onmessage = (event) => this.receive(String(event.data))
    socket.onclose = (event) => this.closed(socket, event.code, event.reason)
  }

  private async handshake(socket: WebSocket): Promise<void> {
    try {
      const token = await this.options.getToken()
      if (socket !== this.socket) return // closed while the token was fetched: the newer socket has its own handshake
      const reply = await this.request({ type: 'connect', token })
      if (socket !== this.socket) return
      this.attempt = 0
      this.setState('connected')
      this.scheduleRefresh(reply)
      this.startPings(socket)
      for (const subscription of this.subscriptions.values()) void this.sendSubscribe(subscription)
    } catch (error) {
      // A token provider failure or an `unavailable` answer: close and retry with backoff.
      if (socket === this.socket && socket.readyState === 1) socket.close(4000, `connect failed: ${(error as Error).message}`.slice(0, 120))
    }
  }

  /**
   * Refreshes the token `refreshAheadMs` before it expires (halfway through a shorter lifetime). The time left is the
   * gateway's `ttl` when the reply has one, so a client whose clock is wrong neither refreshes in a loop nor too late.
   */
  private scheduleRefresh(reply: Record<string, unknown>): void {
    clearTimeout(this.refreshTimer)
    const ahead = this.options.refreshAheadMs ?? 30_000
    const left = typeof reply.ttl === 'number' ? reply.ttl * 1000 : Date.parse(String(reply.expiresAt)) - Date.now()
    const due = Math.max(1000, left > 2 * ahead ? left - ahead : left / 2)
    this.refreshTimer = setTimeout(async () => {
      try {
        this.scheduleRefresh(await this.request({ type: 'auth', token: await this.options.getToken() }))
      } catch {
        // Not accepted or not sent: the gateway closes with 4001 at expiry, and the client reconnects with a fresh token.
      }
    }, due)
  }

  private startPings(socket: WebSocket): void {
    clearInterval(this.pingTimer)
    const timeout = this.options.pongTimeoutMs ?? 10_000
    this.pingTimer = setInterval(() => {
      if (socket !== this.socket) return clearInterval(this.pingTimer)
      const answered = this.request({ type: 'ping' }).then(() => true, (error) => !(error instanceof RealtimeError && error.code === 'disconnected'))
      let lateTimer: ReturnType<typeof setTimeout> | undefined
      const late = new Promise<false>((resolve) => (lateTimer = setTimeout(() => resolve(false), timeout)))
      void Promise.race([answered, late]).then((alive) => {
        clearTimeout(lateTimer) // answered (or the connection closed): the timer must not outlive the ping
        if (alive || socket !== this.socket) return
        // Dead without a close: do not wait for a close handshake that may never come.
        this.closed(socket, 4000, 'no reply to ping')
        socket.close(4000, 'no reply to ping')
      })
    }, this.options.pingIntervalMs ?? 25_000)
  }

  private async sendSubscribe(subscription: Subscription<any>): Promise<void> {
    const wasRecovering = subscription.offset !== undefined && subscription.epoch !== undefined
    const cursor = wasRecovering ? { offset: subscription.offset, epoch: subscription.epoch } : {}
    clearTimeout(subscription.retry)
    subscription.retry = undefined
    const socket = this.socket
    const attempt = ++subscription.attempt
    subscription.sentOn = socket
    subscription.inFlight = true
    try {
      const reply = await this.request({ type: 'subscribe', channel: subscription.channel, ...cursor })
      if (attempt !== subscription.attempt) return
      subscription.inFlight = false
      if (this.subscriptions.get(subscription.channel) !== subscription) return
      subscription.active = true
      subscription.retries = 0
      // A fresh subscription starts at the channel's position; a failed recovery jumps there too (what was missed must
      // be resynced by the application: `recovered: false`). A successful one keeps the cursor: the replayed
      // publications that follow the reply move it.
      if (typeof reply.offset === 'number' && !(wasRecovering && reply.recovered === true)) {
        subscription.offset = reply.offset
        subscription.epoch = String(reply.epoch)
      }
      subscription.handlers.subscribed?.({
        wasRecovering, recovered: reply.recovered === true,
        ...(typeof reply.offset === 'number' ? { offset: reply.offset, epoch: String(reply.epoch) } : {}),
      })
    } catch (error) {
      // An older request's failure says nothing about a newer one (sent on a resubscribe push or a reconnect).
      if (attempt !== subscription.attempt) return
      subscription.inFlight = false
      if (subscription.sentOn === socket) subscription.sentOn = undefined
      if (this.subscriptions.get(subscription.channel) !== subscription) return
      if (!(error instanceof RealtimeError) || error.code === 'disconnected') return // the reconnect subscribes again
      if (!error.temporary) {
        this.subscriptions.delete(subscription.channel)
        return subscription.handlers.unsubscribed?.(error.message)
      }
      // Temporary (`unavailable`, `rate_limited`): try again on this connection, with full-jitter backoff.
      const delay = backoffDelay(subscription.retries++, this.options.minReconnectDelayMs ?? 500, this.options.maxReconnectDelayMs ?? 20_000)
      subscription.retry = setTimeout(() => {
        subscription.retry = undefined
        const stillWanted = this.subscriptions.get(subscription.channel) === subscription
        if (stillWanted && this.connected && socket === this.socket && !subscription.active && subscription.sentOn !== socket) void this.sendSubscribe(subscription)
      }, delay)
    }
  }

  private receive(text: string): void {
    let frame: Record<string, any>
    try {
      frame = JSON.parse(text)
    } catch {
      return
    }
    if ((frame.type === 'reply' || frame.type === 'error') && typeof frame.id === 'number') {
      const pending = this.pending.get(frame.id)
      if (!pending) return
      this.pending.delete(frame.id)
      if (frame.type === 'reply') pending.resolve(frame)
      else pending.reject(new RealtimeError(frame.code, frame.message, frame.temporary === true))
      return
    }
    const subscription = typeof frame.channel === 'string' ? this.subscriptions.get(frame.channel) : undefined
    if (!subscription) return
    if (frame.type === 'publication') {
      if (typeof frame.offset === 'number') {
        subscription.offset = frame.offset
        subscription.epoch = frame.epoch
      }
      subscription.handlers.publication?.(frame as Publication)
    } else if (frame.type === 'join' || frame.type === 'leave') {
      subscription.handlers[frame.type as 'join' | 'leave']?.({ channel: frame.channel, identity: frame.identity, info: frame.info })
    } else if (frame.type === 'unsubscribe') {
      subscription.active = false
      // Continuity lost: recover through the cursor, unless a subscribe is already out (its answer decides).
      if (frame.resubscribe) {
        if (!subscription.inFlight) void this.sendSubscribe(subscription)
      }
      else {
        this.subscriptions.delete(subscription.channel)
        subscription.handlers.unsubscribed?.(String(frame.reason))
      }
    }
  }

  private closed(socket: WebSocket, code: number, reason: string): void {
    if (socket !== this.socket) return
    this.socket = undefined
    clearTimeout(this.refreshTimer)
    clearInterval(this.pingTimer)
    for (const pending of this.pending.values()) pending.reject(new RealtimeError('disconnected', `connection closed (${code})`, true))
    this.pending.clear()
    for (const subscription of this.subscriptions.values()) subscription.active = false
    this.setState('disconnected', { code, reason })
    if (!this.wanted) return
    const attempt = this.attempt++
    const delay = reconnectDelay(code, attempt, this.options.minReconnectDelayMs ?? 500, this.options.maxReconnectDelayMs ?? 20_000)
    this.reconnectTimer = setTimeout(() => this.wanted && this.open(), delay)
  }
}
