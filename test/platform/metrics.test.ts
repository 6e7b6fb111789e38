// Prometheus metrics of every process, scraped from real processes on their own metrics ports: after a known amount of
// traffic each counter moved by exactly that traffic (read before and after), the gauges read what is there now, the
// token is required when set, and no label carries a product id or channel name the traffic sent.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { startSmtpSink, type Sink } from '../../scripts/smtp-sink'
import postgres from 'postgres'
import { config } from '../../shared/config'
import { sql } from '../../shared/db/client'
import { withDeadlines } from '../../shared/db/deadline'
import { watchBreakers } from '../../shared/metrics/breakers'
import { watchPools } from '../../shared/metrics/pools'
import { gauge, registry } from '../../shared/metrics/registry'
import { serveMetrics } from '../../shared/metrics/serve'
import { HOOKS_GROUP } from '../../shared/realtime/hook-events'
import { fanKey, fanSeqKey, hooksKey } from '../../shared/realtime/keys'
import { shardOf } from '../../shared/realtime/shards'
import { commandConnection, redis } from '../../shared/redis/client'
import { signToken, type TokenChannel } from '../../shared/realtime/tokens'
import { recordEvent, TEST_EVENT_KIND } from '../../shared/webhooks/outbox'
import { call, eventually, freePort, newProduct, ok, startProcess, type Worker } from '../helpers'
import { startFaultProxy } from '../faults/proxy'
import { type GatewayProcess, replied, startGateway, WsClient } from '../gateway/ws-helpers'
import { startArchiver, type ArchiverProcess } from '../realtime/archive-helpers'
import { manage, pub, realtimeProduct, type RealtimeProduct } from '../realtime/public-helpers'
import { type Receiver, startReceiver } from '../webhooks/receiver'

const TOKEN = `metrics-${randomUUID()}`

/** One process's metrics port, and the token its scrapes carry (when it has one). */
interface Target {
  port: number
  token?: string
}

async function scrape(target: Target): Promise<string> {
  const response = await fetch(`http://127.0.0.1:${target.port}/metrics`, target.token ? { headers: { authorization: `Bearer ${target.token}` } } : {})
  if (response.status !== 200) throw new Error(`scrape: ${response.status} ${await response.text()}`)
  expect(response.headers.get('content-type')).toStartWith('text/plain; version=0.0.4')
  return response.text()
}

/** The value of the sample `name` with exactly `labels` (0 when the series does not exist yet). */
function sampleValue(text: string, name: string, labels: Record<string, string> = {}): number {
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (!match || match[1] !== name) continue
    const found = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1], m[2]]))
    if (Object.keys(found).length === Object.keys(labels).length && Object.entries(labels).every(([k, v]) => found[k] === v)) return Number(match[3])
  }
  return 0
}

/** The sum of every sample of `name`, whatever its labels. */
function sumOf(text: string, name: string): number {
  let sum = 0
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{.*\})? (\S+)$/.exec(line)
    if (match && match[1] === name) sum += Number(match[2])
  }
  return sum
}

const read = async (target: Target, name: string, labels: Record<string, string> = {}) => sampleValue(await scrape(target), name, labels)

/**
 * How far ahead a test's counts must be free of other files' work: longer than any test here takes. An email or webhook
 * delivery another file left in the shared database, due within it, would be attempted (and counted) mid-test.
 */
const HORIZON_SECONDS = 30

/**
 * Waits until nothing another file left is due within the horizon (the processes here attempt it, then retry it an hour
 * later, past the horizon), whatever the retry gaps other files used: `dueSoon` counts what is due within it.
 */
async function nothingDueSoon(dueSoon: () => Promise<number>, what: string): Promise<void> {
  await eventually(async () => (await dueSoon()) === 0, (HORIZON_SECONDS + 15) * 1000, `no ${what} due within ${HORIZON_SECONDS} s`)
}
/** A test that waits for nothingDueSoon: its wait, and the test's own work after it. */
const NOTHING_DUE_TIMEOUT_MS = (HORIZON_SECONDS + 15) * 1000 + 30_000

/**
 * How long the hooks streams may take to settle: past the 60 s after which this file's webhooks process claims entries
 * another file's consumer left pending (a reader that died holding them), which then count here.
 */
const HOOKS_SETTLE_MS = 75_000

const emailsDueSoon = async () => (await sql`select count(*)::int as n from emails
  where last_event in ('queued', 'sent', 'delivery_delayed') and next_attempt_at < now() + make_interval(secs => ${HORIZON_SECONDS})`)[0]!.n as number
// Deliveries to a disabled endpoint wait, never attempted, until it is enabled again: not due for any process.
const deliveriesDueSoon = async () => (await sql`select count(*)::int as n from webhook_deliveries d
  join webhook_endpoints e on e.id = d.endpoint_id and e.enabled
  where d.state = 'pending' and d.next_attempt_at < now() + make_interval(secs => ${HORIZON_SECONDS})`)[0]!.n as number

/**
 * A gauge counted in PostgreSQL (kept METRICS_COUNT_CACHE_MS by the process) checked against PostgreSQL's own count: scraped until its
 * value lies between the counts taken just before and just after the scrape. Returns the scrape.
 */
async function bracketed(target: Target, count: () => Promise<number>, name: string, labels: Record<string, string> = {}): Promise<string> {
  return eventually(async () => {
    const low = await count()
    const text = await scrape(target)
    const high = await count()
    const value = sampleValue(text, name, labels)
    return value >= Math.min(low, high) && value <= Math.max(low, high) ? text : null
  }, 15_000, `${name} ${JSON.stringify(labels)} as PostgreSQL counts it`)
}

/**
 * Waits until `name`'s samples stop moving (two scrapes 300 ms apart agree): what a worker finds left in the shared
 * database or streams at start (other files' leftovers) is done before a test reads its "before".
 */
async function quiet(target: Target, prefix: string): Promise<void> {
  const lines = async () => (await scrape(target)).split('\n').filter((line) => line.startsWith(prefix)).join('\n')
  let last = await lines()
  for (let i = 0; i < 50; i++) {
    await Bun.sleep(300)
    const now = await lines()
    if (now === last) return
    last = now
  }
  throw new Error(`${prefix} kept moving`)
}

/** Every process's metrics, and what the traffic sent that must never appear in them. */
function expectNoTrafficLabels(text: string, secrets: string[]) {
  for (const secret of secrets) expect(text).not.toContain(secret)
}

let api: Worker, apiMetrics: Target
let publicWorker: Worker, publicMetrics: Target
let gateway: GatewayProcess, gatewayMetrics: Target
let mailer: Worker, mailerMetrics: Target
let webhooks: Worker, webhooksMetrics: Target
let archiver: ArchiverProcess, archiverMetrics: Target
let sink: Sink
let receiver: Receiver
let product: RealtimeProduct

beforeAll(async () => {
  // An address with `later` in it is answered 451 (a temporary failure: the email waits an hour for its retry).
  sink = await startSmtpSink({ port: 0, onMessage: () => {}, answerRecipient: (address) => (address.startsWith('later-') ? { code: 451, message: 'try later' } : undefined) })
  receiver = startReceiver()
  receiver.on('/fail', () => new Response('no', { status: 503 }))
  const target = async (): Promise<Target> => ({ port: await freePort() })
  apiMetrics = { ...(await target()), token: TOKEN }
  publicMetrics = await target()
  gatewayMetrics = await target()
  mailerMetrics = await target()
  webhooksMetrics = await target()
  archiverMetrics = await target()
  const env = (target: Target) => ({ METRICS_PORT: String(target.port), ...(target.token ? { METRICS_TOKEN: target.token } : {}) })
  ;[api, publicWorker, gateway, mailer, webhooks, product] = await Promise.all([
    startProcess('api', env(apiMetrics)),
    startProcess('public', { ...env(publicMetrics), TRUST_PROXY: '1', MAIL_SEND_RATE_PER_SECOND: '1000' }),
    startGateway(env(gatewayMetrics)),
    // A failed attempt is retried an hour later, never within this file: the counts read are this file's attempts only.
    startProcess('mailer', { ...env(mailerMetrics), SMTP_URL: `smtp://127.0.0.1:${sink.port}`, MAILER_POLL_MS: '50', MAIL_RETRY_BASE_MS: '3600000', METRICS_COUNT_CACHE_MS: '200' }),
    startProcess('webhooks', { ...env(webhooksMetrics), WEBHOOK_RETRY_SCHEDULE: '1h', WEBHOOK_TIMEOUT_MS: '2000', WEBHOOK_LEASE_MS: '5000', WEBHOOK_POLL_MS: '50', METRICS_COUNT_CACHE_MS: '200' }),
    realtimeProduct([{ name: 'chat', presence: true, history: { ttlSeconds: 300, size: 100 } }, { name: 'arch', history: { ttlSeconds: 300, size: 100 }, archive: { retentionDays: 30 } }]),
  ])
  archiver = startArchiver({ ...env(archiverMetrics), ARCHIVER_CLAIM_IDLE_MS: '3600000' })
  // The archiver has no other port: it is up once its metrics answer.
  await eventually(() => scrape(archiverMetrics).then(() => true, () => false), 15_000, 'the archiver\'s metrics')
}, 60_000)

afterAll(async () => {
  archiver?.proc.kill('SIGTERM')
  await Promise.all([api?.stop(), publicWorker?.stop(), gateway?.stop(), mailer?.stop(), webhooks?.stop(), archiver?.proc.exited])
  await sink?.close()
  receiver?.stop()
})

describe('serving', () => {
  test('with METRICS_TOKEN set a scrape needs it: 401 without it or with another, 200 with it', async () => {
    const url = `http://127.0.0.1:${apiMetrics.port}/metrics`
    const without = await fetch(url)
    expect([without.status, without.headers.get('www-authenticate')]).toEqual([401, 'Bearer'])
    expect((await fetch(url, { headers: { authorization: `Bearer ${TOKEN}x` } })).status).toBe(401)
    expect((await fetch(url, { headers: { authorization: TOKEN } })).status).toBe(401)
    expect((await fetch(url, { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(200)
  })

  test('every process serves its own metrics on its own port, default process metrics included; the service port has none', async () => {
    for (const target of [apiMetrics, publicMetrics, gatewayMetrics, mailerMetrics, webhooksMetrics, archiverMetrics]) {
      const text = await scrape(target)
      expect(text).toContain('# TYPE process_cpu_seconds_total counter')
      expect(text).toContain('# TYPE platform_breaker_open gauge')
      expect(sampleValue(text, 'platform_breaker_open', { backend: 'postgres' })).toBe(0)
      expect(sampleValue(text, 'platform_breaker_open', { backend: 'redis' })).toBe(0)
    }
    expect((await fetch(`${api.url}/metrics`)).status).toBe(404)
    expect((await fetch(`http://127.0.0.1:${publicMetrics.port}/other`)).status).toBe(404)
  })
})

describe('api and public', () => {
  test('requests are counted by operation id or route template and status, with their durations; no product id or channel in a label', async () => {
    const owner = await newProduct('Metrics')
    const list = { method: 'GET', route: 'organization_products_list', status: '200' }
    const get = { method: 'GET', route: 'organization_products_get', status: '200' }
    const unmatched = { method: 'GET', route: 'unmatched', status: '404' }
    const before = await scrape(apiMetrics)
    const headers = { authorization: `Bearer ${owner.token}` }
    for (let i = 0; i < 3; i++) expect((await fetch(`${api.url}/products`, { headers })).status).toBe(200)
    for (let i = 0; i < 2; i++) expect((await fetch(`${api.url}/products/${owner.productId}`, { headers })).status).toBe(200)
    expect((await fetch(`${api.url}/no/such/${owner.productId}`)).status).toBe(404)
    const after = await scrape(apiMetrics)
    expect(sampleValue(after, 'platform_http_requests_total', list) - sampleValue(before, 'platform_http_requests_total', list)).toBe(3)
    expect(sampleValue(after, 'platform_http_requests_total', get) - sampleValue(before, 'platform_http_requests_total', get)).toBe(2)
    expect(sampleValue(after, 'platform_http_requests_total', unmatched) - sampleValue(before, 'platform_http_requests_total', unmatched)).toBe(1)
    const count = 'platform_http_request_duration_seconds_count'
    expect(sampleValue(after, count, get) - sampleValue(before, count, get)).toBe(2)
    expect(sampleValue(after, 'platform_http_request_duration_seconds_bucket', { ...get, le: '+Inf' }) - sampleValue(before, 'platform_http_request_duration_seconds_bucket', { ...get, le: '+Inf' })).toBe(2)
    expectNoTrafficLabels(after, [owner.productId])

    const channel = `chat:metrics-${randomUUID()}`
    const published = { method: 'POST', route: '/:productId/realtime/messages', status: '200' }
    const refused = { method: 'POST', route: '/:productId/realtime/messages', status: '401' }
    const publicBefore = await scrape(publicMetrics)
    for (let i = 0; i < 4; i++) {
      const answer = await pub(publicWorker, 'POST', `/${product.productId}/realtime/messages`, { key: product.key, body: { channel, data: { i } } })
      expect(answer.status).toBe(200)
    }
    expect((await pub(publicWorker, 'POST', `/${product.productId}/realtime/messages`, { key: 'rtk_nope', body: { channel, data: 1 } })).status).toBe(401)
    const publicAfter = await scrape(publicMetrics)
    expect(sampleValue(publicAfter, 'platform_http_requests_total', published) - sampleValue(publicBefore, 'platform_http_requests_total', published)).toBe(4)
    expect(sampleValue(publicAfter, 'platform_http_requests_total', refused) - sampleValue(publicBefore, 'platform_http_requests_total', refused)).toBe(1)
    expectNoTrafficLabels(publicAfter, [product.productId, channel, 'metrics-'])
  })

  test('refusals are counted by route and error code, and nothing else is; no product id or channel in a label', async () => {
    const channel = `chat:metrics-${randomUUID()}`
    const route = '/:productId/realtime/messages'
    const refusal = (labels: Record<string, string>) => ['platform_http_refusals_total', labels] as const
    const before = await scrape(publicMetrics)
    for (let i = 0; i < 2; i++) {
      expect((await pub(publicWorker, 'POST', `/${product.productId}/realtime/messages`, { key: 'rtk_nope', body: { channel, data: 1 } })).status).toBe(401)
    }
    const unregistered = await pub(publicWorker, 'POST', `/${product.productId}/realtime/messages`, { key: product.key, body: { channel: `nope:metrics-${randomUUID()}`, data: 1 } })
    expect([unregistered.status, unregistered.body.error]).toEqual([404, 'namespace_not_registered'])
    expect((await pub(publicWorker, 'POST', `/${product.productId}/realtime/messages`, { key: product.key, body: { channel, data: 1 } })).status).toBe(200)
    expect((await fetch(`${publicWorker.url}/no/such/${product.productId}`)).status).toBe(404)
    const after = await scrape(publicMetrics)
    const moved = (name: string, labels: Record<string, string>) => sampleValue(after, name, labels) - sampleValue(before, name, labels)
    expect(moved(...refusal({ route, code: 'invalid_api_key' }))).toBe(2)
    expect(moved(...refusal({ route, code: 'namespace_not_registered' }))).toBe(1)
    expect(moved(...refusal({ route: 'unmatched', code: 'not_found' }))).toBe(1)
    const total = (text: string) => text.split('\n').filter((line) => line.startsWith('platform_http_refusals_total{'))
      .reduce((sum, line) => sum + Number(line.split(' ').pop()), 0)
    expect(total(after) - total(before)).toBe(4)
    expectNoTrafficLabels(after, [product.productId, channel, 'metrics-'])

    const owner = await newProduct('Metrics refusals')
    const apiBefore = await scrape(apiMetrics)
    expect((await fetch(`${api.url}/products/${owner.productId}`)).status).toBe(401)
    const apiAfter = await scrape(apiMetrics)
    expect(sampleValue(apiAfter, 'platform_http_refusals_total', { route: 'organization_products_get', code: 'unauthorized' })
      - sampleValue(apiBefore, 'platform_http_refusals_total', { route: 'organization_products_get', code: 'unauthorized' })).toBe(1)
  })

  test('analytics queries are timed by operation id and outcome; none refused for want of a slot', async () => {
    const owner = await newProduct('Metrics analytics')
    const headers = { authorization: `Bearer ${owner.token}`, 'content-type': 'application/json', 'x-product-id': owner.productId }
    const query = (body: unknown) => fetch(`${api.url}/analytics/query`, { method: 'POST', headers, body: JSON.stringify(body) })
    const ok = { operation: 'analytics_metric_query', outcome: 'ok' }
    const count = 'platform_analytics_query_duration_seconds_count'
    const before = await scrape(apiMetrics)
    for (let i = 0; i < 3; i++) expect((await query({ entity: 'events', metrics: ['count'], range: { from: '-1d' } })).status).toBe(200)
    const after = await scrape(apiMetrics)
    expect(sampleValue(after, count, ok) - sampleValue(before, count, ok)).toBe(3)
    expect(sampleValue(after, 'platform_analytics_query_duration_seconds_bucket', { ...ok, le: '+Inf' }) - sampleValue(before, 'platform_analytics_query_duration_seconds_bucket', { ...ok, le: '+Inf' })).toBe(3)
    for (const scope of ['organization', 'worker']) {
      expect(sampleValue(after, 'platform_analytics_queries_refused_total', { scope })).toBe(sampleValue(before, 'platform_analytics_queries_refused_total', { scope }))
    }
    expect(after).toContain('# TYPE platform_analytics_queries_refused_total counter')
    expectNoTrafficLabels(after, [owner.productId])
  })
})

describe('gateway', () => {
  const token = async (channels: string[]) => (await signToken({
    productId: product.productId, apiKeyId: product.keyId, subject: `user-${randomUUID().slice(0, 8)}`,
    channels: channels.map((name) => ({ name, ops: ['subscribe'] })),
  })).token

  test('connections and subscriptions now, upgrades, frames by type, fan-out entries, deliveries and closes by code move by exactly the traffic', async () => {
    const channel = `chat:metrics-${randomUUID()}`
    const frames = (type: string) => ['platform_gateway_frames_received_total', { type }] as const
    const before = await scrape(gatewayMetrics)
    const clients = [await WsClient.open(gateway.wsUrl), await WsClient.open(gateway.wsUrl)]
    for (const client of clients) {
      replied(await client.request({ type: 'connect', token: await token([channel]) }), 'connect')
      replied(await client.request({ type: 'subscribe', channel }), 'subscribe')
      replied(await client.request({ type: 'ping' }), 'ping')
    }
    for (let i = 0; i < 3; i++) {
      expect((await pub(publicWorker, 'POST', `/${product.productId}/realtime/messages`, { key: product.key, body: { channel, data: { i } } })).status).toBe(200)
    }
    for (const client of clients) {
      await eventually(() => client.frames.filter((f) => f.type === 'publication' && f.channel === channel).length === 3, 5000, 'three publications')
    }
    clients[0]!.send('not json')
    expect((await clients[0]!.next((f) => f.type === 'error')).code).toBe('invalid')
    const refused = await WsClient.open(gateway.wsUrl)
    refused.send({ type: 'connect', id: 1, token: 'not.a.token' })
    expect((await refused.closed).code).toBe(4001)

    const during = await scrape(gatewayMetrics)
    const moved = (name: string, labels: Record<string, string> = {}) => sampleValue(during, name, labels) - sampleValue(before, name, labels)
    expect(moved('platform_gateway_connections_accepted_total')).toBe(3)
    expect(moved('platform_gateway_connections_open')).toBe(2)
    expect(moved('platform_gateway_subscriptions')).toBe(2)
    expect(moved(...frames('connect'))).toBe(3)
    expect(moved(...frames('subscribe'))).toBe(2)
    expect(moved(...frames('ping'))).toBe(2)
    expect(moved(...frames('invalid'))).toBe(1)
    expect(moved(...frames('publish'))).toBe(0)
    expect(moved('platform_gateway_closes_total', { code: '4001' })).toBe(1)
    expect(moved('platform_gateway_fanout_entries_total', { kind: 'publication' })).toBe(3)
    expect(moved('platform_gateway_deliveries_total', { kind: 'publication' })).toBe(6)
    expectNoTrafficLabels(during, [product.productId, channel, 'metrics-'])
    // Every publication delivered: the shard the channel is on is read, and nothing of it is left unread.
    const shard = String(shardOf(product.productId, channel))
    expect(during).toContain(`platform_gateway_fanout_lag_entries{shard="${shard}"} 0`)
    expect(during).toContain(`platform_gateway_fanout_lag_seconds{shard="${shard}"} 0`)

    for (const client of clients) {
      client.close()
      await client.closed
    }
    await eventually(async () => (await read(gatewayMetrics, 'platform_gateway_connections_open')) === sampleValue(before, 'platform_gateway_connections_open'), 5000, 'connections back')
    const after = await scrape(gatewayMetrics)
    expect(sampleValue(after, 'platform_gateway_subscriptions')).toBe(sampleValue(before, 'platform_gateway_subscriptions'))
    // Closed by the clients: no close code of the gateway's own, under any code; the refused one counted once.
    expect(sumOf(after, 'platform_gateway_closes_total') - sumOf(before, 'platform_gateway_closes_total')).toBe(1)
    expect(sampleValue(after, 'platform_gateway_closes_total', { code: '4001' }) - sampleValue(before, 'platform_gateway_closes_total', { code: '4001' })).toBe(1)
  })
})

describe('gateway: recoveries, reads and refusals', () => {
  test('subscriptions with a cursor by result, history and presence reads, and frames refused by type and code move by exactly the traffic', async () => {
    const channel = `chat:metrics-${randomUUID()}`
    const client = await WsClient.open(gateway.wsUrl)
    const signed = await signToken({
      productId: product.productId, apiKeyId: product.keyId, subject: `user-${randomUUID().slice(0, 8)}`,
      channels: [{ name: channel, ops: ['subscribe', 'history', 'presence'] }],
    })
    replied(await client.request({ type: 'connect', token: signed.token }), 'connect')
    const top = replied(await client.request({ type: 'subscribe', channel }), 'subscribe')
    replied(await client.request({ type: 'unsubscribe', channel }), 'unsubscribe')
    for (let i = 0; i < 2; i++) {
      expect((await pub(publicWorker, 'POST', `/${product.productId}/realtime/messages`, { key: product.key, body: { channel, data: { i } } })).status).toBe(200)
    }
    const before = await scrape(gatewayMetrics)

    const recovered = replied(await client.request({ type: 'subscribe', channel, offset: top.offset, epoch: top.epoch }), 'recover')
    expect(recovered.recovered).toBe(true)
    replied(await client.request({ type: 'unsubscribe', channel }), 'unsubscribe')
    const lost = replied(await client.request({ type: 'subscribe', channel, offset: top.offset, epoch: 'another-epoch' }), 'not recovered')
    expect(lost.recovered).toBe(false)
    expect(replied(await client.request({ type: 'history', channel, last_n: 10 }), 'history').entries).toHaveLength(2)
    replied(await client.request({ type: 'presence.read', channel }), 'presence.read')
    expect((await client.request({ type: 'subscribe', channel: `chat:other-${randomUUID()}` })).code).toBe('forbidden')
    expect((await client.request({ type: 'history', channel, last_n: 1, last_ms: 1000 })).code).toBe('invalid')
    client.send('not json')
    expect((await client.next((f) => f.type === 'error' && f.id === null)).code).toBe('invalid')
    // Past the connection's read budget (GATEWAY_READ_BURST): whatever the bucket refilled meanwhile, each answer is
    // a reply or a rate_limited refusal, and the counters move by what the client got.
    const ids = Array.from({ length: 80 }, (_, i) => `burst-${i}`)
    for (const id of ids) client.send({ type: 'presence.read', id, channel })
    const answers = await Promise.all(ids.map((id) => client.next((f) => f.id === id)))
    const read = answers.filter((f) => f.type === 'reply').length
    const limited = answers.filter((f) => f.type === 'error' && f.code === 'rate_limited').length
    expect(read + limited).toBe(ids.length)
    expect(limited).toBeGreaterThan(0)

    const after = await scrape(gatewayMetrics)
    const moved = (name: string, labels: Record<string, string> = {}) => sampleValue(after, name, labels) - sampleValue(before, name, labels)
    expect(moved('platform_gateway_recoveries_total', { result: 'recovered' })).toBe(1)
    expect(moved('platform_gateway_recoveries_total', { result: 'not_recovered' })).toBe(1)
    const reads = 'platform_gateway_read_duration_seconds_count'
    expect(moved(reads, { kind: 'history', outcome: 'ok' })).toBe(1)
    expect(moved(reads, { kind: 'presence', outcome: 'ok' })).toBe(1 + read)
    expect(moved(reads, { kind: 'history', outcome: 'error' }) + moved(reads, { kind: 'presence', outcome: 'error' })).toBe(0)
    const refused = 'platform_gateway_frames_refused_total'
    expect(moved(refused, { type: 'subscribe', code: 'forbidden' })).toBe(1)
    expect(moved(refused, { type: 'history', code: 'invalid' })).toBe(1)
    expect(moved(refused, { type: 'invalid', code: 'invalid' })).toBe(1)
    expect(moved(refused, { type: 'presence.read', code: 'rate_limited' })).toBe(limited)
    expect(sumOf(after, refused) - sumOf(before, refused)).toBe(3 + limited)
    expectNoTrafficLabels(after, [product.productId, channel, 'metrics-', 'another-epoch'])
    client.close()
    await client.closed
  })
})

describe('mailer', () => {
  test('attempts are counted by recorded outcome, with the SMTP conversations\' durations; no address in a label', async () => {
    const owner = await newProduct('Metrics mail')
    const domain = await manage(owner, 'POST', '/mail/domains', { name: `m${randomUUID().slice(0, 8)}.example.com` })
    const key = (await manage(owner, 'POST', '/mail/api-keys', { name: 'sender', scope: 'full_access' })).key as string
    await nothingDueSoon(emailsDueSoon, 'email')
    await quiet(mailerMetrics, 'platform_mailer_attempts_total')
    const delivered = { outcome: 'delivered', recorded: 'true' }
    const before = await scrape(mailerMetrics)
    const recipient = `metrics-${randomUUID().slice(0, 8)}@example.org`
    const ids: string[] = []
    for (let i = 0; i < 2; i++) {
      const sent = await pub(publicWorker, 'POST', `/${owner.productId}/mail/emails`, {
        key, body: { from: `hello@${domain.name}`, to: recipient, subject: 'Metrics', text: 'Hello' },
      })
      expect(sent.status).toBe(200)
      ids.push(sent.body.id)
    }
    await eventually(async () => {
      const rows = await sql`select count(*)::int as n from emails where id = any(${ids}) and last_event = 'delivered'`
      return rows[0]!.n === 2
    }, 15_000, 'both emails delivered')
    const after = await eventually(async () => {
      const text = await scrape(mailerMetrics)
      return sampleValue(text, 'platform_mailer_attempts_total', delivered) - sampleValue(before, 'platform_mailer_attempts_total', delivered) >= 2 ? text : null
    }, 5000, 'the attempts counted')
    expect(sampleValue(after, 'platform_mailer_attempts_total', delivered) - sampleValue(before, 'platform_mailer_attempts_total', delivered)).toBe(2)
    const smtp = 'platform_mailer_smtp_duration_seconds_count'
    expect(sampleValue(after, smtp, { result: 'delivered' }) - sampleValue(before, smtp, { result: 'delivered' })).toBe(2)
    expectNoTrafficLabels(after, [owner.productId, recipient, domain.name])

    const queueCount = (state: 'due' | 'waiting') => async () => (await sql`select count(*)::int as n from emails
      where last_event in ('queued', 'sent', 'delivery_delayed') and (case when ${state} = 'due' then next_attempt_at <= now() else next_attempt_at > now() end)`)[0]!.n as number
    const waitingBefore = sampleValue(await bracketed(mailerMetrics, queueCount('waiting'), 'platform_mailer_emails_pending', { state: 'waiting' }), 'platform_mailer_emails_pending', { state: 'waiting' })
    const delayed = { outcome: 'delivery_delayed', recorded: 'true' }
    const later = `later-${randomUUID().slice(0, 8)}@example.org`
    const queued = await pub(publicWorker, 'POST', `/${owner.productId}/mail/emails`, { key, body: { from: `hello@${domain.name}`, to: later, subject: 'Later', text: 'Hi' } })
    expect(queued.status).toBe(200)
    await eventually(async () => (await sql`select last_event from emails where id = ${queued.body.id}`)[0]!.last_event === 'delivery_delayed', 15_000, 'the email delayed')
    const waiting = await bracketed(mailerMetrics, queueCount('waiting'), 'platform_mailer_emails_pending', { state: 'waiting' })
    expect(sampleValue(waiting, 'platform_mailer_attempts_total', delayed) - sampleValue(after, 'platform_mailer_attempts_total', delayed)).toBe(1)
    expect(sampleValue(waiting, 'platform_mailer_emails_pending', { state: 'waiting' }) - waitingBefore).toBe(1)
    await bracketed(mailerMetrics, queueCount('due'), 'platform_mailer_emails_pending', { state: 'due' })
    expectNoTrafficLabels(waiting, [later])
  }, NOTHING_DUE_TIMEOUT_MS)

  test('the queue gauges split the test\'s own emails exactly: due (leased, being attempted) and waiting (for a retry)', async () => {
    const owner = await newProduct('Metrics queue')
    const domain = await manage(owner, 'POST', '/mail/domains', { name: `q${randomUUID().slice(0, 8)}.example.com` })
    const key = (await manage(owner, 'POST', '/mail/api-keys', { name: 'sender', scope: 'full_access' })).key as string
    await nothingDueSoon(emailsDueSoon, 'email')
    // Other files' emails: none due within the horizon, the waiting ones waiting past it; neither count moves meanwhile.
    const [base] = await sql`select count(*) filter (where next_attempt_at <= now())::int as due, count(*) filter (where next_attempt_at > now())::int as waiting
      from emails where last_event in ('queued', 'sent', 'delivery_delayed')`
    const split = async (due: number, waiting: number, what: string) => eventually(async () => {
      const text = await scrape(mailerMetrics)
      const state = (s: string) => sampleValue(text, 'platform_mailer_emails_pending', { state: s })
      return state('due') === base!.due + due && state('waiting') === base!.waiting + waiting
    }, 15_000, what)
    await split(0, 0, 'the gauges at PostgreSQL\'s count')
    // Three emails answered 451: each waits an hour for its retry.
    const ids: string[] = []
    for (let i = 0; i < 3; i++) {
      const queued = await pub(publicWorker, 'POST', `/${owner.productId}/mail/emails`, {
        key, body: { from: `hello@${domain.name}`, to: `later-${randomUUID().slice(0, 8)}@example.org`, subject: 'Queue', text: 'Hi' },
      })
      expect(queued.status).toBe(200)
      ids.push(queued.body.id)
    }
    await eventually(async () => (await sql`select count(*)::int as n from emails where id = any(${ids}) and last_event = 'delivery_delayed'`)[0]!.n === 3, 15_000, 'the three delayed')
    await split(0, 3, 'three waiting')
    // Two of them due now and leased (as while a mailer attempts them): due, and no mailer claims them.
    const moved = ids.slice(0, 2)
    await sql`update emails set next_attempt_at = now() - interval '1 minute', lease_until = now() + interval '1 hour' where id = any(${moved})`
    try {
      await split(2, 1, 'two due, one waiting')
    } finally {
      await sql`update emails set next_attempt_at = now() + interval '1 hour', lease_until = null where id = any(${moved})`
    }
    await split(0, 3, 'three waiting again')
  }, NOTHING_DUE_TIMEOUT_MS)
})

describe('webhooks', () => {
  test('attempts by outcome with their durations, and the pending deliveries as PostgreSQL counts them', async () => {
    const owner = await newProduct('Metrics webhooks')
    const create = async (path: string) => ok(await call('POST', '/mail/webhooks', {
      token: owner.token, productId: owner.productId, body: { url: receiver.url(path), eventKinds: ['*'] },
    }), 'create endpoint').body
    const good = await create('/ok')
    const failing = await create('/fail')
    await nothingDueSoon(deliveriesDueSoon, 'webhook delivery')
    await quiet(webhooksMetrics, 'platform_webhook_attempts_total')
    const before = await scrape(webhooksMetrics)
    // Three events, each delivered to both endpoints: three 2xx, three 5xx (each retried in an hour: pending).
    for (let i = 0; i < 3; i++) {
      await sql.begin((tx) => recordEvent(tx, { productId: owner.productId, area: 'mail', kind: 'email.bounced', data: { emailId: randomUUID() } }))
    }
    const attempted = async () => {
      const [row] = await sql`select count(*)::int as n from webhook_attempts a join webhook_deliveries d on d.id = a.delivery_id
        where d.endpoint_id in (${good.id}, ${failing.id})`
      return row!.n as number
    }
    await eventually(async () => (await attempted()) === 6, 15_000, 'six attempts recorded')
    const after = await scrape(webhooksMetrics)
    const moved = (name: string, labels: Record<string, string>) => sampleValue(after, name, labels) - sampleValue(before, name, labels)
    expect(moved('platform_webhook_attempts_total', { outcome: '2xx' })).toBe(3)
    expect(moved('platform_webhook_attempts_total', { outcome: '5xx' })).toBe(3)
    expect(moved('platform_webhook_attempts_total', { outcome: 'timeout' })).toBe(0)
    expect(moved('platform_webhook_attempt_duration_seconds_count', { outcome: '2xx' })).toBe(3)
    const pending = async () => (await sql`select count(*)::int as n from webhook_deliveries where state = 'pending'`)[0]!.n as number
    await bracketed(webhooksMetrics, pending, 'platform_webhook_deliveries_pending')
    expect(await pending()).toBeGreaterThanOrEqual(3)
    expectNoTrafficLabels(after, [owner.productId, good.id, receiver.url('/ok')])
  }, NOTHING_DUE_TIMEOUT_MS)

  test('Realtime events move by exactly the entries appended to the hooks streams: recorded for an endpoint that wants them, as PostgreSQL got them', async () => {
    const hooked = await realtimeProduct([{ name: 'chat', presence: true }])
    const endpoint = await manage(hooked, 'POST', '/realtime/webhooks', { url: receiver.url('/realtime'), eventKinds: ['*'] })
    const { text: before, added: addedBefore, messages: messagesBefore } = await settledHooks()
    const channel = `chat:metrics-${randomUUID()}`
    const open = async (owner: RealtimeProduct, ops: TokenChannel['ops']) => {
      const client = await WsClient.open(gateway.wsUrl)
      const signed = await signToken({ productId: owner.productId, apiKeyId: owner.keyId, subject: `user-${randomUUID().slice(0, 8)}`, channels: [{ name: channel, ops }] })
      replied(await client.request({ type: 'connect', token: signed.token }), 'connect')
      replied(await client.request({ type: 'subscribe', channel }), 'subscribe')
      return client
    }
    // Occupied and a member added for the product with an endpoint; occupied for the one without.
    const wanted = await open(hooked, ['subscribe', 'presence'])
    replied(await wanted.request({ type: 'presence.enter', channel }), 'enter')
    const unwanted = await open(product, ['subscribe'])
    const hookedMessages = async () => (await sql`select kind from webhook_messages where product_id = ${hooked.productId} and area = 'realtime' order by kind`).map((row) => row.kind as string)
    await eventually(async () => (await hookedMessages()).length === 2, 15_000, 'two events recorded')
    try {
      const { text: after, added: addedAfter, messages: messagesAfter } = await settledHooks()
      const moved = (outcome: string) => sampleValue(after, 'platform_webhook_realtime_events_total', { outcome }) - sampleValue(before, 'platform_webhook_realtime_events_total', { outcome })
      expect(await hookedMessages()).toEqual(['channel.occupied', 'presence.member_added'])
      expect(moved('recorded')).toBe(messagesAfter - messagesBefore) // ours, and any other product's recorded meanwhile
      expect(moved('recorded')).toBeGreaterThanOrEqual(2)
      expect(moved('dropped')).toBe(0)
      expect(moved('recorded') + moved('unwanted')).toBe(addedAfter - addedBefore)
      expectNoTrafficLabels(after, [hooked.productId, product.productId, channel, endpoint.id])
    } finally {
      // Later events of these clients (their removals) are not for the receiver: no attempt of another test's is added.
      await manage(hooked, 'PATCH', `/realtime/webhooks/${endpoint.id}`, { enabled: false })
      for (const client of [wanted, unwanted]) {
        client.close()
        await client.closed
      }
    }
  }, 2 * HOOKS_SETTLE_MS + 30_000)
})

/** A Redis reply of field/value pairs as an object. */
const pairs = (list: unknown[]) => Object.fromEntries(Array.from({ length: list.length / 2 }, (_, i) => [String(list[2 * i]), list[2 * i + 1]]))

/** Realtime webhook messages recorded so far, every product's (only this file's webhooks process records them). */
const realtimeMessages = async () => (await sql`select count(*)::int as n from webhook_messages where area = 'realtime' and kind <> ${TEST_EVENT_KIND}`)[0]!.n as number

/**
 * Entries appended to every shard's hooks stream so far (Redis's own `entries-added`), once the group `webhooks` has
 * been handed and has acknowledged all of them; null while it has not.
 */
async function hooksCaughtUp(): Promise<number | null> {
  let added = 0
  for (let shard = 0; shard < config.realtime.shards; shard++) {
    const key = hooksKey(shard)
    if (!(await redis().exists(key))) return null // the webhooks process makes every shard's stream with its group
    const stream = pairs(await redis().xinfo('STREAM', key) as unknown[])
    const group = (await redis().xinfo('GROUPS', key) as unknown[][]).map(pairs).find((g) => g.name === HOOKS_GROUP)
    if (!group || group['last-delivered-id'] !== stream['last-generated-id'] || Number(group.pending) !== 0) return null
    added += Number(stream['entries-added'])
  }
  return added
}

/**
 * The webhooks process's metrics once every hooks entry appended is read and acknowledged, with how many were appended
 * and how many realtime messages PostgreSQL holds: scraped between two equal readings of the streams. Events of other
 * files (a presence entry expiring) may come meanwhile: they are compared with what the streams got, not with this test's.
 */
async function settledHooks(): Promise<{ text: string; added: number; messages: number }> {
  return eventually(async () => {
    const first = await hooksCaughtUp()
    if (first === null) return null
    await quiet(webhooksMetrics, 'platform_webhook_realtime_events_total')
    const text = await scrape(webhooksMetrics)
    const messages = await realtimeMessages()
    return (await hooksCaughtUp()) === first ? { text, added: first, messages } : null
  }, HOOKS_SETTLE_MS, 'the hooks streams read')
}

/**
 * Whether the archiver's group has been handed every entry of every shard's stream and has acknowledged them all. Its
 * counts move once a round is acknowledged, and a round over another file's backlog (a policy looked up per channel)
 * can outlast any fixed quiet spell: this asks Redis instead.
 */
async function archiverCaughtUp(): Promise<boolean> {
  for (let shard = 0; shard < config.realtime.shards; shard++) {
    const key = fanKey(shard)
    if (!(await redis().exists(key))) continue
    const stream = pairs(await redis().xinfo('STREAM', key) as unknown[])
    const group = (await redis().xinfo('GROUPS', key) as unknown[][]).map(pairs).find((g) => g.name === 'archiver')
    if (!group || group['last-delivered-id'] !== stream['last-generated-id'] || Number(group.pending) !== 0) return false
  }
  return true
}

/** Entries appended to every shard's fan-out stream so far, by the shards' own counters (`fan:n`). */
async function appended(): Promise<number> {
  let sum = 0
  for (let shard = 0; shard < config.realtime.shards; shard++) sum += Number(await redis().get(fanSeqKey(shard)) ?? 0)
  return sum
}

/**
 * The archiver's metrics once it has read and acknowledged everything appended, and how much that was: scraped between
 * two equal readings of the counters. Other traffic may append meanwhile (a presence entry of an earlier file expiring
 * writes its `leave`), so the entries read are compared with what the streams were given, not with what this test sent.
 */
async function settledArchiver(): Promise<{ text: string; appended: number }> {
  return eventually(async () => {
    const first = await appended()
    if (!(await archiverCaughtUp())) return null
    await quiet(archiverMetrics, 'platform_archiver_entries')
    const text = await scrape(archiverMetrics)
    return (await appended()) === first && (await archiverCaughtUp()) ? { text, appended: first } : null
  }, 30_000, 'the archiver settled')
}

describe('archiver', () => {
  test('entries read move by exactly the entries appended, and only the archiving namespace\'s publications are archived', async () => {
    const { text: before, appended: appendedBefore } = await settledArchiver()
    const archived = `arch:metrics-${randomUUID()}`
    const plain = `chat:metrics-${randomUUID()}`
    for (const [channel, n] of [[archived, 3], [plain, 2]] as const) {
      for (let i = 0; i < n; i++) {
        expect((await pub(publicWorker, 'POST', `/${product.productId}/realtime/messages`, { key: product.key, body: { channel, data: { i } } })).status).toBe(200)
      }
    }
    const after = await eventually(async () => {
      const text = await scrape(archiverMetrics)
      return sampleValue(text, 'platform_archiver_entries_read_total') - sampleValue(before, 'platform_archiver_entries_read_total') >= 5 ? text : null
    }, 15_000, 'five entries read')
    const { text: settled, appended: appendedAfter } = await settledArchiver()
    const moved = (name: string) => sampleValue(settled, name) - sampleValue(before, name)
    expect(appendedAfter - appendedBefore).toBeGreaterThanOrEqual(5) // ours, and whatever else was appended meanwhile
    expect(moved('platform_archiver_entries_read_total')).toBe(appendedAfter - appendedBefore)
    expect(moved('platform_archiver_entries_archived_total')).toBe(3)
    expect(moved('platform_archiver_gap_entries_total')).toBe(0)
    expect(after).toContain('# TYPE platform_archiver_gap_entries_total counter')
    expectNoTrafficLabels(settled, [product.productId, archived, plain, 'metrics-'])
  }, 60_000)
})

describe('breakers', () => {
  test('PostgreSQL unreachable: its breaker shows open and one opening; reachable again: closed, the opening still counted', async () => {
    const database = new URL(config.databaseUrl)
    const link = await startFaultProxy({ host: database.hostname, port: Number(database.port || 5432) })
    const target: Target = { port: await freePort() }
    const owner = await newProduct('Metrics breakers')
    const worker = await startProcess('api', { METRICS_PORT: String(target.port), DATABASE_URL: link.url(config.databaseUrl), DB_TIMEOUT_MS: '1000', DB_COOL_DOWN_MS: '500' })
    try {
      const postgres = { backend: 'postgres' }
      const products = () => fetch(`${worker.url}/products`, { headers: { authorization: `Bearer ${owner.token}` } })
      expect((await products()).status).toBe(200)
      const before = await scrape(target)
      expect(sampleValue(before, 'platform_breaker_open', postgres)).toBe(0)
      link.cut()
      expect((await products()).status).toBe(503)
      const during = await scrape(target)
      expect(sampleValue(during, 'platform_breaker_open', postgres)).toBe(1)
      expect(sampleValue(during, 'platform_breaker_opened_total', postgres) - sampleValue(before, 'platform_breaker_opened_total', postgres)).toBe(1)
      expect(sampleValue(during, 'platform_breaker_open', { backend: 'redis' })).toBe(0)
      await link.restore()
      await eventually(async () => (await products()).status === 200, 10_000, 'the api serving again')
      const after = await scrape(target)
      expect(sampleValue(after, 'platform_breaker_open', postgres)).toBe(0)
      expect(sampleValue(after, 'platform_breaker_opened_total', postgres) - sampleValue(before, 'platform_breaker_opened_total', postgres)).toBe(1)
    } finally {
      await worker.stop()
      await link.close()
    }
  }, 30_000)
})

describe('backend errors', () => {
  // In this process, on pools and connections of its own through a fault proxy: each failure is made on purpose, once.
  const errors = async (labels: Record<string, string>) => sampleValue(await registry.metrics(), 'platform_backend_errors_total', labels)

  test('PostgreSQL: a statement past its deadline and one cancelled by statement_timeout are timeouts, an unreachable server unavailable; a statement\'s own error and a refusal by the open breaker are not counted', async () => {
    watchBreakers()
    const database = new URL(config.databaseUrl)
    const link = await startFaultProxy({ host: database.hostname, port: Number(database.port || 5432) })
    const pool = withDeadlines(postgres(link.url(config.databaseUrl), { max: 1, onnotice: () => {} }), { timeoutMs: 400, coolDownMs: 60_000 })
    try {
      await pool`select 1`
      const kinds = ['timeout', 'unavailable', 'other']
      const before = await Promise.all(kinds.map((kind) => errors({ backend: 'postgres', kind })))
      const moved = async () => (await Promise.all(kinds.map((kind) => errors({ backend: 'postgres', kind })))).map((n, i) => n - before[i]!)
      await expect(pool`select 1 / 0`).rejects.toThrow('division by zero')
      await expect(pool.begin(async (tx) => {
        await tx`set local statement_timeout = 50`
        await tx`select pg_sleep(1)`
      })).rejects.toThrow('statement timeout')
      expect(await moved()).toEqual([1, 0, 0])
      await expect(pool`select pg_sleep(0.8)`).rejects.toThrow('no answer within the deadline')
      await Bun.sleep(600) // its late answer is not counted again
      expect(await moved()).toEqual([2, 0, 0])
      link.cut()
      await Bun.sleep(200) // the pool has seen its connection close: the next statement finds the server refusing
      // Through the query's own `then`, as application code awaits it: the platform's 503 message.
      const failure = (query: Promise<unknown>) => query.then(() => 'answered', (error: Error) => error.message)
      expect(await failure(pool`select 1`)).toContain('The database is unavailable (cannot connect)')
      expect(await failure(pool`select 1`)).toContain('recent connection failure')
      expect(await moved()).toEqual([2, 1, 0])
    } finally {
      await pool.end({ timeout: 0 }).catch(() => {})
      await link.close()
    }
  }, 20_000)

  test('Redis: a command past its timeout is a timeout; an error reply and a refusal by the open breaker are not counted', async () => {
    watchBreakers()
    const server = new URL(config.redisUrl)
    const link = await startFaultProxy({ host: server.hostname, port: Number(server.port || 6379) })
    const client = commandConnection('metrics-errors', link.url(config.redisUrl))
    try {
      const key = `metrics:errors:${randomUUID()}`
      await client.set(key, 'text', 'EX', 60)
      const kinds = ['timeout', 'unavailable', 'other']
      const before = await Promise.all(kinds.map((kind) => errors({ backend: 'redis', kind })))
      const moved = async () => (await Promise.all(kinds.map((kind) => errors({ backend: 'redis', kind })))).map((n, i) => n - before[i]!)
      await expect(client.hget(key, 'field')).rejects.toThrow('WRONGTYPE')
      expect(await moved()).toEqual([0, 0, 0])
      link.stall()
      await expect(client.get(key)).rejects.toThrow('Command timed out')
      await expect(client.get(key)).rejects.toThrow('Connection is closed.')
      expect(await moved()).toEqual([1, 0, 0])
    } finally {
      client.disconnect()
      await link.close()
    }
  }, 20_000)
})

describe('the listener', () => {
  // In this process, on a port of its own: a gauge whose collection the test holds shows how many collections ran.
  test('scrapes arriving while one is collected share that collection and its answer; a scrape without the token is refused before any', async () => {
    let collections = 0
    let held: Promise<void> = Promise.resolve()
    gauge('listener_test_collections', 'Collections of this test\'s listener (test only)', [], async function () {
      collections++
      await held
      this.set(collections)
    })
    const port = await freePort()
    const server = serveMetrics('metrics-test', { port, portOffset: 0, host: '127.0.0.1', token: TOKEN })!
    const url = `http://127.0.0.1:${port}/metrics`
    const get = (token?: string) => fetch(url, token ? { headers: { authorization: `Bearer ${token}` } } : {})
    try {
      let release!: () => void
      held = new Promise((resolve) => (release = resolve))
      const scrapes = [get(TOKEN), get(TOKEN), get(TOKEN)]
      // All three are in the listener, the first one's collection held: the other two wait on it.
      await eventually(() => server.pendingRequests === 3 && collections === 1, 5000, 'three scrapes waiting on one collection')
      release()
      const bodies = await Promise.all(scrapes.map(async (scrape) => {
        const response = await scrape
        expect(response.status).toBe(200)
        return response.text()
      }))
      expect(collections).toBe(1)
      expect(new Set(bodies).size).toBe(1)
      expect(sampleValue(bodies[0]!, 'platform_listener_test_collections')).toBe(1)
      // The process's shared registry, its pools' gauges included, as every worker serves it.
      expect(bodies[0]).toContain('# TYPE platform_db_statements_pending gauge')
      expect(bodies[0]).toContain('# TYPE process_cpu_seconds_total counter')
      for (const refused of [await get(), await get(`${TOKEN}x`)]) {
        expect([refused.status, refused.headers.get('www-authenticate')]).toEqual([401, 'Bearer'])
      }
      expect((await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(405)
      expect(collections).toBe(1)
      // Once answered, the next scrape collects anew.
      expect(sampleValue(await (await get(TOKEN)).text(), 'platform_listener_test_collections')).toBe(2)
    } finally {
      server.stop(true)
      registry.removeSingleMetric('platform_listener_test_collections')
    }
  })
})

describe('pools', () => {
  // In this process, on a pool and a connection of their own through a fault proxy: what is pending is made on purpose.
  const pending = async (name: string, labels: Record<string, string>) => sampleValue(await registry.metrics(), name, labels)

  test('PostgreSQL: statements waiting for a connection, then sent and awaiting their answer, then none; by pool', async () => {
    watchPools()
    const database = new URL(config.databaseUrl)
    const link = await startFaultProxy({ host: database.hostname, port: Number(database.port || 5432) })
    const pool = withDeadlines(postgres(link.url(config.databaseUrl), { max: 1, onnotice: () => {} }), { timeoutMs: 10_000, coolDownMs: 60_000, name: 'metrics-test' })
    const lock = Math.floor(Math.random() * 1e9)
    const holder = await sql.reserve()
    try {
      const state = (s: string) => pending('platform_db_statements_pending', { pool: 'metrics-test', state: s })
      // No connection yet, and the link holds its opening: both statements wait for one.
      link.stall()
      const first = pool`select 1 as n`
      const second = pool`select 2 as n`
      const answered = Promise.all([first, second])
      await eventually(async () => (await state('waiting')) === 2, 5000, 'two waiting')
      expect(await state('sent')).toBe(0)
      await link.restore()
      expect((await answered).map((rows) => rows[0]!.n)).toEqual([1, 2])
      expect([await state('sent'), await state('waiting')]).toEqual([0, 0])
      // A statement blocked on a lock another session holds, and one pipelined behind it: both sent, both awaited.
      // Without parameters: a statement postgres.js must describe first fills its connection, and the next one waits.
      await holder`select pg_advisory_lock(${lock})`
      const blocked = pool.unsafe(`select pg_advisory_lock(${lock}) as locked`)
      const behind = pool`select 3 as n`
      const both = Promise.all([blocked, behind])
      await eventually(async () => (await state('sent')) === 2, 5000, 'two sent')
      expect(await state('waiting')).toBe(0)
      await holder`select pg_advisory_unlock(${lock})`
      await both
      expect([await state('sent'), await state('waiting')]).toEqual([0, 0])
      expect(await pending('platform_db_statements_pending', { pool: 'main', state: 'waiting' })).toBe(0)
    } finally {
      holder.release()
      await pool.end({ timeout: 0 }).catch(() => {})
      await link.close()
    }
  }, 20_000)

  test('Redis: commands sent and awaiting their reply while the link holds them, then none; the connection ready, then not', async () => {
    watchPools()
    const server = new URL(config.redisUrl)
    const link = await startFaultProxy({ host: server.hostname, port: Number(server.port || 6379) })
    const client = commandConnection('metrics-pools', link.url(config.redisUrl))
    try {
      await client.ping()
      const sent = () => pending('platform_redis_commands_pending', { state: 'sent' })
      const ready = () => pending('platform_redis_connections', { role: 'command', state: 'ready' })
      const notReady = () => pending('platform_redis_connections', { role: 'command', state: 'not_ready' })
      const before = { sent: await sent(), ready: await ready(), notReady: await notReady() }
      link.stall()
      const replies = Promise.all([client.get(`metrics:${randomUUID()}`), client.get(`metrics:${randomUUID()}`)])
      await eventually(async () => (await sent()) - before.sent === 2, 5000, 'two sent')
      await link.restore()
      expect(await replies).toEqual([null, null])
      expect(await sent()).toBe(before.sent)
      link.cut()
      await eventually(async () => (await ready()) === before.ready - 1 && (await notReady()) === before.notReady + 1, 5000, 'the connection not ready')
    } finally {
      client.disconnect()
      await link.close()
    }
  }, 20_000)
})
