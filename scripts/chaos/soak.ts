// The kill-anything soak (docs/chaos.md): the whole platform as separate processes under a mixed
// load, one random process SIGKILLed and started again every few seconds, then every invariant checked once the load
// stops and the platform settles. `runSoak` is what `scripts/chaos/main.ts` and test/chaos/soak.test.ts run.
// Before anything reads shared/config: the same development settings the tests run with (rate limits lifted, domains
// verified without DNS, webhooks to loopback, the checkout's secret key).
import '../../test/env'
import { randomUUID } from 'node:crypto'
import { startSmtpSink, type CaughtMessage } from '../smtp-sink'
import { runMetricQuery } from '../../services/api/analytics/semantic/metric-query'
import { sql } from '../../shared/db/client'
import { readState } from '../../shared/analytics/rollups'
import { call, freePort, newProduct } from '../../test/helpers'
import { startReceiver, verified } from '../../test/webhooks/receiver'
import { capturing, mailing, newLedger, publishing, reading, Subscriber, type Ledger, type SoakTarget } from './load'
import { Supervisor } from './supervisor'

export interface SoakOptions {
  /** How long the load runs with kills. */
  seconds: number
  /** Between two kills; 0: no kills (a memory run). */
  killEveryMs: number
  subscribers?: number
  /** Between two memory samples. */
  memoryEveryMs?: number
  log?: (line: string) => void
}

export interface SoakReport {
  /** Every broken invariant, one line each: empty when the platform held. */
  violations: string[]
  kills: Record<string, number>
  counts: Record<string, number>
  answers: Record<string, number>
  memory: Record<string, { atMs: number; rssKiB: number; incarnation: number }[]>
}

const SETTLE_MS = 60_000
const BATCH = 20
const CHANNELS = 3

/** The platform's processes, as the Procfile names them; two public workers and two gateways so one survives a kill. */
async function startPlatform(supervisor: Supervisor, smtpPort: number): Promise<void> {
  const fast = {
    MAILER_POLL_MS: '50', MAIL_RETRY_BASE_MS: '200', MAIL_LEASE_MS: '2000', MAILER_SMTP_TIMEOUT_MS: '5000', SMTP_URL: `smtp://127.0.0.1:${smtpPort}`,
    WEBHOOK_POLL_MS: '50', WEBHOOK_LEASE_MS: '4000', WEBHOOK_TIMEOUT_MS: '2000',
    ARCHIVER_IDLE_MS: '50', ARCHIVER_CLAIM_IDLE_MS: '1000', AGGREGATOR_IDLE_MS: '100',
    MAIL_SEND_RATE_PER_SECOND: '1000', PUBLIC_IP_RATE_LIMIT: '1000000', TRUST_PROXY: '1', GATEWAY_READ_BURST: '100000',
  }
  const ported = async (name: string, script: string, portVariable: string, extra: Record<string, string> = {}) => {
    const port = await freePort()
    await supervisor.add({ name, script, port, env: { ...fast, [portVariable]: String(port), ...extra } })
  }
  await Promise.all([
    ported('api', 'services/api/main.ts', 'API_PORT'),
    ported('public-1', 'services/public/main.ts', 'PUBLIC_PORT'),
    ported('public-2', 'services/public/main.ts', 'PUBLIC_PORT'),
    ported('mailer', 'services/mailer/main.ts', 'MAILER_PORT'),
    ported('webhooks', 'services/webhooks/main.ts', 'WEBHOOKS_PORT'),
  ])
  for (const name of ['gateway-1', 'gateway-2']) {
    const port = await freePort()
    await supervisor.add({ name, script: 'gateway/main.ts', port, env: { ...fast, GATEWAY_PORT: String(port), GATEWAY_URL: `ws://127.0.0.1:${port}/connection/websocket` } })
  }
  await supervisor.add({ name: 'archiver', script: 'services/archiver/main.ts', env: { ...fast, ARCHIVER_CONSUMER: `soak-${randomUUID()}` } })
  await supervisor.add({ name: 'aggregator', script: 'services/aggregator/main.ts', env: fast })
}

async function ok(result: Promise<{ status: number; body: any }>, what: string): Promise<any> {
  const answer = await result
  if (answer.status !== 200) throw new Error(`${what}: ${answer.status} ${JSON.stringify(answer.body).slice(0, 300)}`)
  return answer.body
}

/** Polls `check` until it holds or `ms` pass; answers whether it held. */
async function settles(check: () => Promise<boolean> | boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms
  for (;;) {
    if (await check()) return true
    if (Date.now() > deadline) return false
    await Bun.sleep(200)
  }
}

export async function runSoak(options: SoakOptions): Promise<SoakReport> {
  const log = options.log ?? (() => {})
  const caught: CaughtMessage[] = []
  const sink = await startSmtpSink({ port: 0, onMessage: (message) => caught.push(message) })
  const receiver = startReceiver()
  const supervisor = new Supervisor(process.env)
  const ledger = newLedger()

  // One product with everything the load uses.
  const owner = await newProduct('Chaos soak')
  const manage = (method: string, path: string, body?: unknown) => ok(call(method, path, { token: owner.token, productId: owner.productId, body }), `${method} ${path}`)
  await manage('POST', '/realtime/namespaces', { name: 'soak', history: { ttlSeconds: 3600, size: 10_000 }, archive: { retentionDays: 1 } })
  await manage('POST', '/realtime/namespaces', { name: 'room', presence: true, clientEvents: true })
  const rt = await manage('POST', `/governance/api/v1/products/${owner.productId}/public-keys`, { name: 'soak' })
  const domain = await manage('POST', '/mail/domains', { name: `soak${randomUUID().slice(0, 8)}.example.com` })
  const mailKey = (await manage('POST', '/mail/api-keys', { name: 'soak', scope: 'full_access' })).key
  const hookPath = '/soak-events'
  const hookSecret = (await manage('POST', '/mail/webhooks', { url: receiver.url(hookPath), eventKinds: ['email.sent', 'email.delivered'] })).secret
  // Verified as each delivery arrives: the signature's timestamp is only fresh then (a receiver refuses one older than
  // 5 minutes, and a long run checks deliveries of its first minutes at the end).
  const hooks: { id: string; type: string; data: { emailId: string } }[] = []
  receiver.on(hookPath, (request) => {
    try {
      hooks.push({ id: request.headers['webhook-id']!, ...verified(hookSecret, request) })
    } catch (error) {
      ledger.unverifiedHooks.push(`${request.headers['webhook-id']}: ${error instanceof Error ? error.message : error}`)
    }
    return new Response('ok')
  })
  const captureKey = (await manage('POST', '/tracking/capture-keys', { name: 'soak' })).key
  const runId = randomUUID().slice(0, 8)
  const channels = Array.from({ length: CHANNELS }, (_, i) => `soak:${runId}-${i}`)

  await startPlatform(supervisor, sink.port)
  log(`soak: ${supervisor.names.length} processes up; load for ${options.seconds} s, a kill every ${options.killEveryMs || '∞'} ms`)
  const live = (prefix: string) => supervisor.names.filter((n) => n.startsWith(prefix) && supervisor.alive(n)).map((n) => supervisor.url(n))
  const target: SoakTarget = {
    productId: owner.productId, rtKey: rt.key, rtKeyId: rt.id, mailKey, mailFrom: `soak@${domain.name}`, captureKey, channels,
    clientIp: `10.${Array.from({ length: 3 }, () => Math.floor(Math.random() * 256)).join('.')}`,
    publicUrls: () => live('public-'),
    gatewayUrls: () => live('gateway-').map((url) => `${url.replace('http', 'ws')}/connection/websocket`),
  }
  const counter = { n: 0 }
  const subscribers = Array.from({ length: options.subscribers ?? 4 }, (_, i) => new Subscriber(target, `soak-${runId}-${i}`, `room:${runId}`))
  ledger.subscribers = subscribers.map((s) => s.log)
  const loops = [
    publishing(ledger, target, counter, 20), publishing(ledger, target, counter, 20),
    mailing(ledger, target, 150), capturing(ledger, target, BATCH, 100),
    reading(ledger, () => live('api')[0], owner.token, owner.productId, 250),
  ]

  // The chaos: a random process SIGKILLed and started again, every killEveryMs; memory sampled meanwhile.
  const kills: Record<string, number> = {}
  const order: string[] = []
  const memoryTimer = setInterval(() => supervisor.sampleMemory(), options.memoryEveryMs ?? 1000)
  const started = Date.now()
  // The run lasts `seconds`, and with kills at least until every process was killed once (a loaded machine starts
  // processes slowly: a short run must still kill each kind).
  const done = () => Date.now() - started >= options.seconds * 1000 && (!options.killEveryMs || Object.keys(kills).length === supervisor.names.length)
  while (!done()) {
    await Bun.sleep(options.killEveryMs ? options.killEveryMs : Math.max(1, Math.min(1000, options.seconds * 1000 - (Date.now() - started))))
    if (!options.killEveryMs) continue
    // Every process once, in a random order, before any twice.
    if (!order.length) order.push(...supervisor.names.map((name) => ({ name, r: Math.random() })).sort((a, b) => a.r - b.r).map((v) => v.name))
    const victim = order.shift()!
    kills[victim] = (kills[victim] ?? 0) + 1
    await supervisor.restart(victim).catch((error) => log(`soak: ${victim} did not start again: ${error}`))
  }
  log('soak: load stopping')
  await Promise.all(loops.map((l) => l.stop()))
  clearInterval(memoryTimer)

  const violations: string[] = []
  const violate = (line: string) => violations.push(line)
  try {
    for (const name of supervisor.names) if (!supervisor.alive(name)) await supervisor.restart(name)
    // A check that cannot run is a violation too, and the others still run (and the report, memory included, is made).
    const checked = async (what: string, check: () => unknown) => {
      try {
        await check()
      } catch (error) {
        violate(`the ${what} check failed: ${error instanceof Error ? error.message : String(error)}`)
      }
    }
    await checked('publications', () => checkPublications(ledger, target, owner, subscribers, violate))
    await Promise.all(subscribers.map((s) => s.stop()))
    await checked('subscribers', () => checkSubscribers(ledger, violate))
    await checked('emails', () => checkEmails(ledger, caught, violate))
    await checked('webhooks', () => checkWebhooks(ledger, () => hooks, violate))
    for (const line of ledger.unverifiedHooks) violate(`a webhook delivery whose signature did not verify: ${line}`)
    await checked('captures', () => checkCaptures(ledger, owner.productId, violate))
    for (const line of ledger.serverErrors) violate(`a 5xx other than 503: ${line}`)
    for (const line of ledger.emailsRefused) violate(`a valid email never accepted: ${line}`)
  } finally {
    await Promise.all(subscribers.map((s) => s.stop()))
    await supervisor.stopAll()
    await sink.close()
    receiver.stop()
  }
  return {
    violations, kills, answers: Object.fromEntries(ledger.answers), memory: supervisor.memory(),
    counts: {
      publications: ledger.published.size, emails: ledger.emails.size, batches: ledger.batchesAccepted.size,
      batchesUnanswered: ledger.batchesUnanswered.size,
      reconnects: ledger.subscribers.reduce((n, s) => n + s.reconnects, 0),
      toldToResync: ledger.subscribers.reduce((n, s) => n + [...s.channels.values()].reduce((m, c) => m + c.toldToResync, 0), 0),
      emailCopies: caught.length,
    },
  }
}

/** History entries of a channel, oldest first: (epoch, offset) → data.n. */
async function historyOf(owner: { token: string; productId: string }, channel: string): Promise<{ epoch: string; top: number; oldest: number; byOffset: Map<number, number> }> {
  const read = (query: string) => ok(call('GET', `/realtime/channels/${channel}/history?${query}`, { token: owner.token, productId: owner.productId }), `history of ${channel}`)
  const { epoch } = await read('last_n=1')
  // From the cursor before the first offset: every entry of the epoch, when the history still holds them all.
  let body = await read(`offset=0&epoch=${encodeURIComponent(epoch)}`)
  // A run that published more than the history keeps: the newest entries (the archive check covers the older ones).
  if (!body.recovered) body = await read('last_n=1000')
  if (body.epoch !== epoch) throw new Error(`history of ${channel} changed epoch while read`)
  const byOffset = new Map<number, number>(body.entries.map((e: any) => [e.offset, e.data?.n]))
  return { epoch, top: body.offset, oldest: Math.min(body.offset + 1, ...byOffset.keys()), byOffset }
}

async function archiveOf(owner: { token: string; productId: string }, channel: string): Promise<{ epoch: string; offset: number; n: number }[]> {
  const entries: { epoch: string; offset: number; n: number }[] = []
  let cursor: string | null = ''
  while (cursor !== null) {
    const body: any = await ok(call('GET', `/realtime/channels/${channel}/archive?order=oldest&limit=1000${cursor ? `&cursor=${cursor}` : ''}`,
      { token: owner.token, productId: owner.productId }), `archive of ${channel}`)
    entries.push(...body.entries.map((e: any) => ({ epoch: e.epoch, offset: e.offset, n: e.data?.n })))
    cursor = body.next
  }
  return entries
}

/**
 * Every acknowledged publication is in its channel's history under the (epoch, offset) it was acknowledged with, and
 * in the archive once the archiver catches up; no (epoch, offset) names two publications; each subscriber catches up
 * to the top of every channel (or was told to resync).
 */
async function checkPublications(ledger: Ledger, target: SoakTarget, owner: { token: string; productId: string }, subscribers: Subscriber[], violate: (line: string) => void) {
  const histories = new Map<string, Awaited<ReturnType<typeof historyOf>>>()
  for (const channel of target.channels) histories.set(channel, await historyOf(owner, channel))
  for (const [key, n] of ledger.published) {
    const [channel, epoch, offset] = key.split(' ') as [string, string, string]
    const history = histories.get(channel)!
    if (history.epoch !== epoch) violate(`publication ${n} acknowledged in epoch ${epoch} of ${channel}, whose history is in epoch ${history.epoch}`)
    // Older than the history keeps (a long run publishes more than its size): the archive check below covers it.
    else if (Number(offset) < history.oldest) continue
    else if (history.byOffset.get(Number(offset)) !== n) violate(`publication ${n} acknowledged at ${channel} ${offset}, where history holds ${history.byOffset.get(Number(offset))}`)
  }
  for (const log of ledger.subscribers) {
    for (const [channel, { runs }] of log.channels) {
      const history = histories.get(channel)!
      for (const run of runs) {
        run.offsets.forEach((offset, i) => {
          const held = run.epoch === history.epoch ? history.byOffset.get(offset) : undefined
          if (held !== undefined && held !== run.data[i]) violate(`${log.name} received ${run.data[i]} as ${channel} ${offset}, which history holds as ${held}`)
        })
      }
    }
  }
  // The archive: every acknowledged publication once, under its (epoch, offset). The last read is the one checked.
  const archives = new Map<string, Awaited<ReturnType<typeof archiveOf>>>()
  const archived = await settles(async () => {
    for (const channel of target.channels) archives.set(channel, await archiveOf(owner, channel))
    return target.channels.every((channel) => {
      const held = new Set(archives.get(channel)!.map((e) => `${channel} ${e.epoch} ${e.offset}`))
      for (const key of ledger.published.keys()) if (key.startsWith(`${channel} `) && !held.has(key)) return false
      return true
    })
  }, SETTLE_MS)
  for (const channel of target.channels) {
    const entries = archives.get(channel)!
    const seen = new Map<string, number>()
    for (const e of entries) {
      const key = `${channel} ${e.epoch} ${e.offset}`
      if (seen.has(key) && seen.get(key) !== e.n) violate(`the archive holds two publications as ${key}: ${seen.get(key)} and ${e.n}`)
      seen.set(key, e.n)
      const acknowledged = ledger.published.get(key)
      if (acknowledged !== undefined && acknowledged !== e.n) violate(`the archive holds ${e.n} as ${key}, acknowledged as ${acknowledged}`)
    }
    if (!archived) for (const key of ledger.published.keys()) if (key.startsWith(`${channel} `) && !seen.has(key)) violate(`acknowledged publication ${key} never reached the archive`)
  }
  // Every subscriber reaches the top of every channel.
  const caughtUp = await settles(() => subscribers.every((s) => target.channels.every((c) => {
    const cursor = s.cursor(c)
    const history = histories.get(c)!
    return cursor !== null && cursor.epoch === history.epoch && cursor.offset === history.top
  })), SETTLE_MS)
  if (!caughtUp) {
    for (const s of subscribers) for (const c of target.channels) {
      const cursor = s.cursor(c)
      const history = histories.get(c)!
      if (!cursor || cursor.epoch !== history.epoch || cursor.offset !== history.top) {
        violate(`${s.log.name} stopped at ${JSON.stringify(cursor)} of ${c}, whose top is ${history.top} in ${history.epoch}`)
      }
    }
  }
}

/** Within each subscription, offsets follow one another with no gap or repeat; a recovered one continues its cursor. */
function checkSubscribers(ledger: Ledger, violate: (line: string) => void): void {
  for (const log of ledger.subscribers) {
    for (const line of log.unexpected) violate(`${log.name}: ${line}`)
    for (const [channel, { runs }] of log.channels) {
      for (const run of runs) {
        const expected = Array.from({ length: run.offsets.length }, (_, i) => run.from + 1 + i)
        if (run.offsets.join() !== expected.join()) {
          violate(`${log.name} on ${channel} (epoch ${run.epoch}, from ${run.from}, recovered ${run.recovered}): offsets ${run.offsets.slice(0, 30).join(',')}… are not ${run.from + 1} onwards without a gap`)
        }
      }
    }
  }
}

/** Every accepted email reached the SMTP server, every copy of it with one Message-ID (at-least-once, docs/mail.md). */
async function checkEmails(ledger: Ledger, caught: CaughtMessage[], violate: (line: string) => void) {
  const copies = () => {
    const byToken = new Map<string, Set<string>>()
    for (const message of caught) {
      const text = message.raw.toString()
      const token = /^Subject: soak (\S+)/m.exec(text)?.[1]
      const messageId = /^Message-ID: (\S+)/im.exec(text)?.[1] ?? ''
      if (token) byToken.set(token, (byToken.get(token) ?? new Set()).add(messageId))
    }
    return byToken
  }
  await settles(() => {
    const delivered = copies()
    return [...ledger.emails.keys()].every((token) => delivered.has(token))
  }, SETTLE_MS)
  const byToken = copies()
  for (const token of ledger.emails.keys()) {
    const ids = byToken.get(token)
    if (!ids) violate(`accepted email ${token} was never delivered`)
    else if (ids.size !== 1) violate(`accepted email ${token} was delivered as ${ids.size} different messages: ${[...ids].join(', ')}`)
  }
  for (const token of byToken.keys()) if (!ledger.emails.has(token)) violate(`an email that was never accepted was delivered: ${token}`)
}

/** Each accepted email's email.sent and email.delivered events arrived at least once, each event under one id. */
async function checkWebhooks(ledger: Ledger, received: () => { id: string; type: string; data: { emailId: string } }[], violate: (line: string) => void) {
  const KINDS = ['email.sent', 'email.delivered']
  /** Event ids by `${emailId} ${type}` (thousands of emails in a long run). */
  const idsOf = () => {
    const ids = new Map<string, Set<string>>()
    for (const event of received()) {
      const key = `${event.data.emailId} ${event.type}`
      ids.set(key, (ids.get(key) ?? new Set()).add(event.id))
    }
    return ids
  }
  const emailIds = [...ledger.emails.values()]
  await settles(() => {
    const ids = idsOf()
    return emailIds.every((id) => KINDS.every((type) => ids.has(`${id} ${type}`)))
  }, SETTLE_MS)
  const ids = idsOf()
  for (const emailId of emailIds) {
    for (const type of KINDS) {
      const count = ids.get(`${emailId} ${type}`)?.size ?? 0
      if (count === 0) violate(`${type} of email ${emailId} never arrived`)
      if (count > 1) violate(`${type} of email ${emailId} arrived as ${count} different events`)
    }
  }
}

/** Accepted batches are stored whole, once; unanswered ones whole or not at all; the rollups count each event once. */
async function checkCaptures(ledger: Ledger, productId: string, violate: (line: string) => void) {
  const rows = await sql`select properties ->> 'batch' as batch, count(*)::int as n from tracked_events
    where product_id = ${productId} and event = 'soak' group by 1`
  const stored = new Map(rows.map((r) => [r.batch as string, r.n as number]))
  for (const batch of ledger.batchesAccepted) if (stored.get(batch) !== BATCH) violate(`accepted batch ${batch} stored ${stored.get(batch) ?? 0} times ${BATCH} events`)
  for (const [batch, n] of stored) {
    if (!ledger.batchesAccepted.has(batch) && !ledger.batchesUnanswered.has(batch)) violate(`batch ${batch} stored though refused`)
    if (n !== BATCH) violate(`batch ${batch} stored ${n} of its ${BATCH} events`)
  }
  const [head] = await sql`select max(id)::bigint as id from tracked_events where product_id = ${productId}`
  if (!(await settles(async () => (await readState(sql, productId)).watermark >= Number(head!.id), SETTLE_MS))) violate('the aggregator never caught up with the captures')
  const range = { from: new Date(Date.now() - 86_400_000).toISOString(), to: new Date(Date.now() + 3_600_000).toISOString() }
  const query = { entity: 'events', metrics: ['count'], range, filters: [{ field: 'event', op: 'equals', value: 'soak' }] }
  const total = [...stored.values()].reduce((a, b) => a + b, 0)
  const rolled = (await runMetricQuery(productId, query as never)).rows[0]?.count
  if (rolled !== total) violate(`the rollups count ${rolled} soak events; ${total} are stored`)
}
