// The soak's mixed load, and the ledger of what the platform acknowledged: publications with their (epoch, offset),
// what each subscriber received and whether it was told to resync, emails accepted, event batches accepted, and every
// HTTP answer by status. Each part is a loop that runs until stopped and goes to whichever process is alive.
import { randomUUID } from 'node:crypto'
import { signToken, type TokenChannel } from '../../shared/realtime/tokens'

export interface Ledger {
  /** Publications the public route acknowledged: `${channel} ${epoch} ${offset}` → data.n. */
  published: Map<string, number>
  /** HTTP answers by `${part} ${status}` (0: no answer: the process was down or died mid-request). */
  answers: Map<string, number>
  /** 5xx answers other than 503, with their bodies: each is a violation. */
  serverErrors: string[]
  /** Emails accepted (200), by the token in their subject. */
  emails: Map<string, string>
  /** Sends never accepted, with the last answer. */
  emailsRefused: string[]
  /** Capture batches: accepted (200) and those whose answer was lost, by batch id. */
  batchesAccepted: Set<string>
  batchesUnanswered: Set<string>
  subscribers: SubscriberLog[]
  /** Webhook deliveries whose signature did not verify when they arrived: each is a violation. */
  unverifiedHooks: string[]
}

export const newLedger = (): Ledger => ({
  published: new Map(), answers: new Map(), serverErrors: [], emails: new Map(), emailsRefused: [], batchesAccepted: new Set(), batchesUnanswered: new Set(), subscribers: [], unverifiedHooks: [],
})

export interface SoakTarget {
  productId: string
  rtKey: string
  rtKeyId: string
  mailKey: string
  mailFrom: string
  captureKey: string
  channels: string[]
  /**
   * The address the soak's requests come from (X-Forwarded-For, the workers trusting it): its own, so the public
   * workers' per-address windows in Redis, shared with anything else on the same Redis, never count the soak.
   */
  clientIp: string
  /** Live base URLs of each kind (public workers, gateways), asked at each request. */
  publicUrls(): string[]
  gatewayUrls(): string[]
}

const pick = <T>(items: T[]): T | undefined => items[Math.floor(Math.random() * items.length)]

function answered(ledger: Ledger, part: string, status: number, body: string): void {
  const key = `${part} ${status}`
  ledger.answers.set(key, (ledger.answers.get(key) ?? 0) + 1)
  if (status >= 500 && status !== 503) ledger.serverErrors.push(`${part} ${status} ${body.slice(0, 300)}`)
}

/** One request to a live public worker: its status and body, or status 0 when none answered. */
async function publicCall(ledger: Ledger, target: SoakTarget, part: string, path: string, init: RequestInit): Promise<{ status: number; body: any }> {
  const base = pick(target.publicUrls())
  if (!base) {
    answered(ledger, part, 0, '')
    return { status: 0, body: null }
  }
  try {
    const headers = { ...(init.headers as Record<string, string>), 'x-forwarded-for': target.clientIp }
    const response = await fetch(base + path, { ...init, headers, signal: AbortSignal.timeout(10_000) })
    const text = await response.text()
    answered(ledger, part, response.status, text)
    let body: unknown = text
    try {
      body = JSON.parse(text)
    } catch {}
    return { status: response.status, body }
  } catch {
    answered(ledger, part, 0, '')
    return { status: 0, body: null }
  }
}

export interface Loop { stop(): Promise<void> }

/** Runs `step` again and again (pausing `pauseMs` between) until stopped. */
function loop(step: () => Promise<void>, pauseMs: number): Loop {
  let running = true
  const done = (async () => {
    while (running) {
      await step().catch(() => undefined)
      await Bun.sleep(pauseMs)
    }
  })()
  return { stop: async () => { running = false; await done } }
}

/** Publishes to the history channels in turn; each acknowledged one is recorded with its (epoch, offset). */
export function publishing(ledger: Ledger, target: SoakTarget, counter: { n: number }, pauseMs: number): Loop {
  return loop(async () => {
    const n = ++counter.n
    const channel = target.channels[n % target.channels.length]!
    const result = await publicCall(ledger, target, 'publish', `/${target.productId}/realtime/messages`, {
      method: 'POST', headers: { 'x-api-key': target.rtKey, 'content-type': 'application/json' }, body: JSON.stringify({ channel, data: { n } }),
    })
    if (result.status === 200) ledger.published.set(`${channel} ${result.body.epoch} ${result.body.offset}`, n)
  }, pauseMs)
}

/**
 * Sends emails, each retried with its Idempotency-Key until accepted, as Resend advises: after no answer, a 5xx, a 429 or
 * a 409 concurrent_idempotent_requests (a first attempt cut off by a kill holds its key until the claim is abandoned).
 * A send not accepted within a minute, or refused for good, is recorded as refused (a violation: every payload is valid).
 */
export function mailing(ledger: Ledger, target: SoakTarget, pauseMs: number): Loop {
  return loop(async () => {
    const token = randomUUID()
    const deadline = Date.now() + 60_000
    for (;;) {
      const result = await publicCall(ledger, target, 'email', `/${target.productId}/mail/emails`, {
        method: 'POST',
        headers: { 'x-api-key': target.mailKey, 'content-type': 'application/json', 'idempotency-key': token },
        body: JSON.stringify({ from: target.mailFrom, to: `soak-${token.slice(0, 8)}@example.org`, subject: `soak ${token}`, text: 'soak' }),
      })
      if (result.status === 200) return void ledger.emails.set(token, result.body.id)
      const retryable = result.status === 0 || result.status >= 500 || result.status === 429 || result.body?.error === 'concurrent_idempotent_requests'
      if (!retryable || Date.now() > deadline) return void ledger.emailsRefused.push(`${token}: ${result.status} ${JSON.stringify(result.body).slice(0, 200)}`)
      await Bun.sleep(200)
    }
  }, pauseMs)
}

/** Captures batches of events, each with its batch id; never retried (a capture has no idempotency key). */
export function capturing(ledger: Ledger, target: SoakTarget, batchSize: number, pauseMs: number): Loop {
  return loop(async () => {
    const batch = randomUUID()
    const events = Array.from({ length: batchSize }, (_, i) => ({ event: 'soak', identity: { anonymous_id: `v${i % 7}` }, properties: { batch, i } }))
    const result = await publicCall(ledger, target, 'capture', `/${target.productId}/capture?key=${target.captureKey}`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ events }),
    })
    if (result.status === 200) ledger.batchesAccepted.add(batch)
    else if (result.status === 0) ledger.batchesUnanswered.add(batch)
  }, pauseMs)
}

/** Dashboard reads: a metric query on the platform API, whatever api worker is alive. */
export function reading(ledger: Ledger, apiUrl: () => string | undefined, token: string, productId: string, pauseMs: number): Loop {
  return loop(async () => {
    const base = apiUrl()
    if (!base) return answered(ledger, 'query', 0, '')
    try {
      const response = await fetch(`${base}/analytics/query`, {
        method: 'POST', signal: AbortSignal.timeout(10_000),
        headers: { authorization: `Bearer ${token}`, 'x-product-id': productId, 'content-type': 'application/json' },
        body: JSON.stringify({ entity: 'events', metrics: ['count', 'identities'], range: { from: '-1h' }, bucket: 'hour' }),
      })
      answered(ledger, 'query', response.status, await response.text())
    } catch {
      answered(ledger, 'query', 0, '')
    }
  }, pauseMs)
}

/** What one subscriber saw on one channel: runs of consecutive offsets, a new run at each subscription. */
export interface ChannelLog {
  /** Each subscription's reply (its position) and the offsets then received, in arrival order. */
  runs: { epoch: string; from: number; recovered: boolean | null; offsets: number[]; data: number[] }[]
  /** Times the subscriber was answered `recovered: false` to a cursor it had. */
  toldToResync: number
}

export interface SubscriberLog {
  name: string
  channels: Map<string, ChannelLog>
  reconnects: number
  /** Frames other than replies, publications and temporary errors (each is a violation). */
  unexpected: string[]
}

/**
 * A WebSocket subscriber of every channel: on any close it reconnects to a live gateway and subscribes again from its
 * cursor (the last offset and epoch it received), as centrifuge-js does. It also enters presence, sends client events
 * on the events channel and reads presence now and then.
 */
export class Subscriber {
  readonly log: SubscriberLog
  private ws: WebSocket | null = null
  private running = true
  private nextId = 1
  private pending = new Map<string, (frame: any) => void>()
  private loopDone: Promise<void>

  constructor(private readonly target: SoakTarget, name: string, private readonly eventsChannel: string) {
    this.log = { name, channels: new Map(target.channels.map((c) => [c, { runs: [], toldToResync: 0 }])), reconnects: 0, unexpected: [] }
    this.loopDone = this.run()
  }

  async stop(): Promise<void> {
    this.running = false
    this.ws?.close()
    await this.loopDone
  }

  /** The last position received on a channel: what a reconnect recovers from. */
  cursor(channel: string): { epoch: string; offset: number } | null {
    const runs = this.log.channels.get(channel)!.runs
    const run = runs[runs.length - 1]
    if (!run) return null
    return { epoch: run.epoch, offset: run.offsets.length ? run.offsets[run.offsets.length - 1]! : run.from }
  }

  private async run(): Promise<void> {
    while (this.running) {
      const url = pick(this.target.gatewayUrls())
      if (url) {
        try {
          await this.session(url)
        } catch {}
      }
      if (this.running) {
        this.log.reconnects++
        await Bun.sleep(100 + Math.random() * 200)
      }
    }
  }

  private request(frame: Record<string, unknown>, timeoutMs = 5000): Promise<any> {
    const id = `r${this.nextId++}`
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => (this.pending.delete(id), reject(new Error('no reply'))), timeoutMs)
      this.pending.set(id, (reply) => (clearTimeout(timer), resolve(reply)))
      try {
        this.ws!.send(JSON.stringify({ ...frame, id }))
      } catch {
        this.pending.get(id)?.({ type: 'closed' })
        this.pending.delete(id)
      }
    })
  }

  /** One connection: connect, subscribe (recovering), then traffic until it closes. */
  private async session(url: string): Promise<void> {
    const ws = new WebSocket(url)
    this.ws = ws
    const closed = new Promise<void>((resolve) => ws.addEventListener('close', () => {
      // Requests in flight get no reply: they end the session quietly.
      for (const answer of this.pending.values()) answer({ type: 'closed' })
      this.pending.clear()
      resolve()
    }))
    await new Promise<void>((resolve, reject) => {
      ws.addEventListener('open', () => resolve(), { once: true })
      ws.addEventListener('error', () => reject(new Error('no connection')), { once: true })
    })
    ws.addEventListener('message', (event) => this.onFrame(JSON.parse(String(event.data))))
    const channels: TokenChannel[] = [...this.target.channels.map((name): TokenChannel => ({ name, ops: ['subscribe', 'history'] })),
      { name: this.eventsChannel, ops: ['subscribe', 'publish', 'presence'] }]
    const { token } = await signToken({ productId: this.target.productId, apiKeyId: this.target.rtKeyId, subject: this.log.name, channels, ttlSeconds: 3600 })
    const connected = await this.request({ type: 'connect', token })
    if (connected.type !== 'reply') return this.unexpected('connect', connected)
    for (const channel of this.target.channels) {
      const cursor = this.cursor(channel)
      const reply = await this.request({ type: 'subscribe', channel, ...(cursor ?? {}) })
      if (reply.type !== 'reply') return this.unexpected('subscribe', reply)
      const log = this.log.channels.get(channel)!
      if (cursor && reply.recovered === false) log.toldToResync++
      // The replayed publications of a recovery arrive after the reply: they belong to this run.
      log.runs.push({ epoch: reply.epoch, from: cursor && reply.recovered ? cursor.offset : reply.offset, recovered: cursor ? reply.recovered : null, offsets: [], data: [] })
    }
    for (const frame of [{ type: 'subscribe', channel: this.eventsChannel }, { type: 'presence.enter', channel: this.eventsChannel, info: { name: this.log.name } }]) {
      const reply = await this.request(frame)
      if (reply.type !== 'reply') return this.unexpected(frame.type, reply)
    }
    while (this.running && ws.readyState === WebSocket.OPEN) {
      const answer = await Promise.race([
        Math.random() < 0.5
          ? this.request({ type: 'publish', channel: this.eventsChannel, data: { from: this.log.name } })
          : this.request({ type: 'presence.read', channel: this.eventsChannel }),
        closed.then(() => null),
      ]).catch(() => null)
      if (answer && answer.type !== 'reply') this.unexpected('traffic', answer)
      await Promise.race([Bun.sleep(300), closed])
    }
    await closed
  }

  private onFrame(frame: any): void {
    if ((frame.type === 'reply' || frame.type === 'error') && frame.id !== undefined) {
      this.pending.get(frame.id)?.(frame)
      this.pending.delete(frame.id)
      return
    }
    if (frame.type === 'publication' && this.log.channels.has(frame.channel)) {
      const runs = this.log.channels.get(frame.channel)!.runs
      const run = runs[runs.length - 1]
      if (!run) return void this.log.unexpected.push(`publication before subscribing: ${JSON.stringify(frame).slice(0, 200)}`)
      if (frame.epoch !== undefined && frame.epoch !== run.epoch) {
        this.log.unexpected.push(`publication of epoch ${frame.epoch} in a subscription of ${run.epoch}`)
        return
      }
      run.offsets.push(frame.offset)
      run.data.push(frame.data?.n)
    }
  }

  private unexpected(what: string, frame: any): void {
    // The connection ended, or a gateway or Redis moment: the next session tries again.
    if (frame?.type === 'closed' || frame?.temporary) return
    this.log.unexpected.push(`${what}: ${JSON.stringify(frame).slice(0, 300)}`)
  }
}
