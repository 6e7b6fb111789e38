// Backing-service outages under load: a TCP proxy stands between real `api` and `public` workers and PostgreSQL or
// Redis, and cuts or stalls the link while 50 clients keep sending. Every request must get an answer (never a dropped
// connection) within the documented bound, 503s carry Retry-After, what does not need the failed service keeps
// working, and each worker serves again by itself within the documented bound after the link is restored.
// The bounds are docs/architecture.md's "Outages" contract, derived from the same settings the workers use.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { config } from '../../shared/config'
import { needsOneRedis, newUser, startProcess, type Worker } from '../helpers'
import { createKey, realtimeProduct, type RealtimeProduct, uniqueIp } from '../realtime/public-helpers'
import { firstSuccessAfter, startLoad, type Outcome } from './load'
import { startFaultProxy, type FaultProxy } from './proxy'

// The workers here run with shorter time-outs than the defaults, so the file stays quick; the bounds follow from them
// by the same formulas the docs state for the defaults.
const DB_TIMEOUT_MS = 1000
const REDIS_COMMAND_TIMEOUT_MS = 500
/** A request that needs PostgreSQL answers within the statement deadline plus a second of the request's own work. */
const POSTGRES_ANSWER_MS = DB_TIMEOUT_MS + 1000
/** A request that needs Redis answers within one command time-out plus a second. */
const REDIS_ANSWER_MS = REDIS_COMMAND_TIMEOUT_MS + 1000
/** After the link is back, a worker serves again within this. */
const RECOVERY_MS = 3000

/** Each test runs a load for several seconds: its own time limit (the preload's default does not reach every file). */
const TEST_MS = 30_000

const CONCURRENCY = 50
/**
 * How long the link stays down while the load runs: longer than two statement deadlines and a margin. Each client waits
 * for its answer before sending again, so the first request a client sends during a stall goes out only when its
 * previous one times out, up to one deadline after the stall began, and its own deadline falls one deadline later. At
 * exactly two deadlines (as this was), whether any request sent during the stall could time out before the link came
 * back was decided by a few milliseconds: once in six clean runs, none did.
 */
const OUTAGE_MS = 2 * DB_TIMEOUT_MS + 1000

let postgres: FaultProxy
let redis: FaultProxy
let api: Worker
let pub: Worker
let session: string
let product: RealtimeProduct

beforeAll(async () => {
  // On a Redis Cluster only PostgreSQL is put behind a proxy: the workers reach the cluster directly.
  ;[postgres, redis] = await Promise.all([
    startFaultProxy(hostPort(config.databaseUrl, 5432)),
    needsOneRedis ? undefined! : startFaultProxy(hostPort(config.redisUrl, 6379)),
  ])
  const env = {
    DATABASE_URL: postgres.url(config.databaseUrl), REDIS_URL: needsOneRedis ? config.redisUrl : redis.url(config.redisUrl),
    DB_TIMEOUT_MS: String(DB_TIMEOUT_MS), REDIS_COMMAND_TIMEOUT_MS: String(REDIS_COMMAND_TIMEOUT_MS),
  }
  ;[api, pub, session, product] = await Promise.all([
    startProcess('api', env),
    // A short cache life, so that serving cached keys and policies while PostgreSQL is down is really exercised.
    startProcess('public', {
      ...env, TRUST_PROXY: '1', PUBLIC_IP_RATE_LIMIT: '1000000', REALTIME_QUOTA_BURST: '1000000',
      CACHE_TTL_MS: '300',
    }),
    newUser().then((user) => user.token),
    realtimeProduct([{ name: 'chat', presence: true, history: { ttlSeconds: 300, size: 100 } }]),
  ])
}, TEST_MS)

afterAll(async () => {
  await Promise.all([api?.stop(), pub?.stop()])
  await Promise.all([postgres?.close(), redis?.close()])
})

function hostPort(url: string, fallbackPort: number) {
  const parsed = new URL(url)
  return { host: parsed.hostname, port: Number(parsed.port || fallbackPort) }
}

const me = (signal: AbortSignal) => fetch(`${api.url}/auth/me`, { headers: { authorization: `Bearer ${session}` }, signal })

const publish = (signal: AbortSignal, key = product.key) =>
  fetch(`${pub.url}/${product.productId}/realtime/messages`, {
    method: 'POST', signal,
    headers: { 'x-api-key': key, 'content-type': 'application/json', 'x-forwarded-for': uniqueIp() },
    body: JSON.stringify({ channel: 'chat:outage', data: { at: Date.now() } }),
  })

const issue = () =>
  fetch(`${pub.url}/${product.productId}/realtime/tokens/issue`, {
    method: 'POST',
    headers: { 'x-api-key': product.key, 'content-type': 'application/json', 'x-forwarded-for': uniqueIp() },
    body: JSON.stringify({ subject: 'outage-user', channels: [{ name: 'chat:outage', ops: ['subscribe'] }] }),
  })

/**
 * Runs the load, breaks the link after a moment, runs `during` while it is broken, restores it and keeps the load on
 * until the worker has served again (or the recovery bound has passed). Returns every outcome and when the link came back.
 */
async function acrossFault(
  link: FaultProxy, fault: 'cut' | 'stall', request: (signal: AbortSignal) => Promise<Response>, during: () => Promise<void> = async () => {},
) {
  const load = startLoad(CONCURRENCY, request)
  await Bun.sleep(300)
  link[fault]()
  const brokeAt = load.elapsed()
  await Promise.all([Bun.sleep(OUTAGE_MS), during()])
  await link.restore()
  const restoredAt = load.elapsed()
  while (load.elapsed() < restoredAt + RECOVERY_MS + 500) await Bun.sleep(100)
  return { outcomes: await load.stop(), brokeAt, restoredAt }
}

/** The contract every outcome must keep: an answer, in time, 503 only with Retry-After, nothing else but `allowed`. */
function expectAnsweredInTime(outcomes: Outcome[], boundMs: number, allowed: number[]) {
  expect(outcomes.length).toBeGreaterThan(CONCURRENCY)
  expect(outcomes.filter((o) => o.status === 0)).toEqual([]) // no dropped connection, no client time-out
  const late = outcomes.filter((o) => o.ms > boundMs)
  expect(late).toEqual([])
  expect([...new Set(outcomes.map((o) => o.status))].filter((s) => !allowed.includes(s))).toEqual([])
  expect(outcomes.filter((o) => o.status === 503 && !(Number(o.retryAfter) >= 1))).toEqual([])
}

function expectRecovered(outcomes: Outcome[], restoredAt: number) {
  const first = firstSuccessAfter(outcomes, restoredAt)
  expect(first).toBeDefined()
  expect(first!.sentAt - restoredAt).toBeLessThanOrEqual(RECOVERY_MS)
  // and it stays up: nothing but successes once it has recovered
  expect(outcomes.filter((o) => o.sentAt > first!.sentAt + first!.ms && o.status !== 200)).toEqual([])
}

describe('PostgreSQL', () => {
  test.each(['cut', 'stall'] as const)('%s under load: the api answers 503 with Retry-After within the bound, routes without PostgreSQL keep working, and it recovers by itself', async (fault) => {
    let healthy = 0
    const { outcomes, brokeAt, restoredAt } = await acrossFault(postgres, fault, me, async () => {
      await Bun.sleep(OUTAGE_MS / 2)
      for (const path of ['/healthz', '/openapi.json']) if ((await fetch(api.url + path)).status === 200) healthy++
    })
    expectAnsweredInTime(outcomes, POSTGRES_ANSWER_MS, [200, 503])
    // the outage was real: requests sent while the link was down got 503 (a failure shows what each of them got)
    const duringOutage = outcomes.filter((o) => o.sentAt > brokeAt && o.sentAt < restoredAt)
    expect({ got503: duringOutage.some((o) => o.status === 503), brokeAt, restoredAt, duringOutage: duringOutage.map((o) => [Math.round(o.sentAt), Math.round(o.ms), o.status]) })
      .toMatchObject({ got503: true })
    expect(healthy).toBe(2)
    expectRecovered(outcomes, restoredAt)
  }, TEST_MS)

  test('cut under load: the public routes keep serving a key and policies they already hold, and refuse an unseen key with 503', async () => {
    const { key: coldKey } = await createKey(product) // never used yet
    expect((await publish(AbortSignal.timeout(5000))).status).toBe(200) // the worker now holds this key and the policies
    expect((await issue()).status).toBe(200) // and the signing key
    let cold: Response | undefined
    let token: Response | undefined
    const { outcomes, restoredAt } = await acrossFault(postgres, 'cut', (signal) => publish(signal), async () => {
      await Bun.sleep(OUTAGE_MS / 2)
      const started = performance.now()
      cold = await publish(AbortSignal.timeout(10_000), coldKey)
      expect(performance.now() - started).toBeLessThanOrEqual(POSTGRES_ANSWER_MS)
      token = await issue()
    })
    expectAnsweredInTime(outcomes, POSTGRES_ANSWER_MS, [200])
    expect(cold!.status).toBe(503)
    expect(Number(cold!.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    expect(((await cold!.json()) as { error: string }).error).toBe('unavailable')
    expect(token!.status).toBe(200)
    expectRecovered(outcomes, restoredAt)
    expect((await publish(AbortSignal.timeout(5000), coldKey)).status).toBe(200)
  }, TEST_MS)
})

describe.skipIf(needsOneRedis)('Redis', () => {
  test.each(['cut', 'stall'] as const)('%s under load: publishes answer 503 with Retry-After within the bound, token issue keeps working, and the public worker recovers by itself', async (fault) => {
    let token: Response | undefined
    const { outcomes, brokeAt, restoredAt } = await acrossFault(redis, fault, (signal) => publish(signal), async () => {
      await Bun.sleep(OUTAGE_MS / 2)
      token = await issue()
    })
    expectAnsweredInTime(outcomes, REDIS_ANSWER_MS, [200, 503])
    expect(outcomes.some((o) => o.sentAt > brokeAt && o.sentAt < restoredAt && o.status === 503)).toBe(true)
    expect(token!.status).toBe(200)
    expect(((await token!.json()) as { token: string }).token).toBeString()
    expectRecovered(outcomes, restoredAt)
  }, TEST_MS)

  test('cut under load: the api needs no Redis for its requests, sign-in included (rate limit counted per worker meanwhile)', async () => {
    const user = await newUser()
    let login: Response | undefined
    let ready: Response | undefined
    const { outcomes } = await acrossFault(redis, 'cut', me, async () => {
      await Bun.sleep(OUTAGE_MS / 2)
      ready = await fetch(`${api.url}/readyz`)
      login = await fetch(`${api.url}/auth/login`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: user.email, password: user.password }),
      })
    })
    expectAnsweredInTime(outcomes, REDIS_ANSWER_MS, [200])
    expect(ready!.status).toBe(503) // not ready: /readyz tells the truth about Redis
    expect(login!.status).toBe(200)
    for (const deadline = Date.now() + RECOVERY_MS; Date.now() < deadline && (await fetch(`${api.url}/readyz`)).status !== 200; ) await Bun.sleep(100)
    expect((await fetch(`${api.url}/readyz`)).status).toBe(200)
  }, TEST_MS)
})
