// POST /messages counts its IP limit and quota in the publish script; while Redis cannot run it, the worker counts both
// in its own memory instead, in the same order, as every other limit does (shared/fixed-window.ts): the publish answers
// its 503, and past a limit the 429 of that limit, the IP limit first.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { config } from '../../shared/config'
import { startProcess, type Worker } from '../helpers'
import { awayFromWindowEdge, pub, realtimeProduct, type RealtimeProduct, uniqueIp } from '../realtime/public-helpers'
import { startFaultProxy, type FaultProxy } from './proxy'

const IP_LIMIT = 5
/** burst 0 + 2 x 1 a second x 10-second window. */
const QUOTA_LIMIT = 20

let redis: FaultProxy
let worker: Worker
let product: RealtimeProduct

beforeAll(async () => {
  const target = new URL(config.redisUrl)
  redis = await startFaultProxy({ host: target.hostname, port: Number(target.port || 6379) })
  ;[worker, product] = await Promise.all([
    startProcess('public', {
      REDIS_URL: redis.url(config.redisUrl), REDIS_COMMAND_TIMEOUT_MS: '500', TRUST_PROXY: '1',
      PUBLIC_IP_RATE_LIMIT: String(IP_LIMIT), REALTIME_QUOTA_BURST: '0', REALTIME_QUOTA_SUSTAINED: '1', REALTIME_QUOTA_WINDOW_SECONDS: '10',
    }),
    realtimeProduct([{ name: 'chat', history: { ttlSeconds: 300, size: 100 } }]),
  ])
})
afterAll(async () => {
  await worker?.stop()
  await redis?.close()
})

const publish = (ip: string) => pub(worker, 'POST', `/${product.productId}/realtime/messages`, { key: product.key, ip, body: { channel: 'chat:down', data: 1 } })

test('Redis cut: publishes answer 503 and are counted in the worker, the IP limit first, then the quota', async () => {
  expect((await publish(uniqueIp())).status).toBe(200) // the key and the policies are cached now
  await awayFromWindowEdge(60, 5000)
  await awayFromWindowEdge(10, 5000)
  redis.cut()
  try {
    const ip = uniqueIp()
    const statuses: number[] = []
    for (let i = 0; i < IP_LIMIT; i++) statuses.push((await publish(ip)).status)
    expect(statuses).toEqual(Array(IP_LIMIT).fill(503))
    const limited = await publish(ip)
    expect([limited.status, limited.body.error]).toEqual([429, 'rate_limited'])
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    // The refused request counted no quota: IP_LIMIT publishes so far, so QUOTA_LIMIT - IP_LIMIT more fit.
    for (let i = 0; i < QUOTA_LIMIT - IP_LIMIT; i++) expect((await publish(uniqueIp())).status).toBe(503)
    const over = await publish(uniqueIp())
    expect([over.status, over.body.error]).toEqual([429, 'quota_exceeded'])
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
  } finally {
    await redis.restore()
  }
}, 30_000)
