// The command connection every process shares (shared/redis/client.ts, its guard shared/redis/guard.ts) over a link that dies without a reset: the commands in
// flight time out, the connection is replaced once, and none of those commands runs later on the new connection.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import Redis from 'ioredis'
import { randomUUID } from 'node:crypto'
import { config } from '../../shared/config'
import { commandConnection } from '../../shared/redis/client'
import { needsOneRedis } from '../helpers'
import { startFaultProxy, type FaultProxy } from './proxy'

let proxy: FaultProxy
let direct: Redis

beforeAll(async () => {
  if (needsOneRedis) return
  const r = new URL(config.redisUrl)
  proxy = await startFaultProxy({ host: r.hostname, port: Number(r.port) })
  direct = new Redis(config.redisUrl)
})

afterAll(async () => {
  direct?.disconnect()
  await proxy?.close()
})

async function until(condition: () => Promise<boolean>, ms = 10_000) {
  for (const deadline = Date.now() + ms; !(await condition()); await Bun.sleep(50)) {
    if (Date.now() > deadline) throw new Error('condition not met in time')
  }
}

test.skipIf(needsOneRedis)('writes in flight on a blackholed link are answered "timed out" and never run afterwards; the connection is replaced once', async () => {
  const client = commandConnection('dead-link-test', proxy.url(config.redisUrl))
  try {
    expect(await client.ping()).toBe('PONG')
    let connects = 0
    client.on('connect', () => connects++)
    const key = `test:dead-link:${randomUUID()}`

    proxy.blackhole() // the open connection goes silent; new connections pass
    const outcomes = await Promise.allSettled([1, 2, 3].map(() => client.incr(key)))
    expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'rejected', 'rejected'])
    for (const o of outcomes) expect(String((o as PromiseRejectedResult).reason)).toMatch(/timed out/i)

    // three time-outs in a row replace the connection; once the breaker's cool-down is over, commands are answered again
    await until(async () => (await client.ping().catch(() => '')) === 'PONG')
    await Bun.sleep(1000) // long enough for a healing loop to show itself in the count
    expect(connects).toBe(1)
    // each caller was told its write failed: none of them may have run on the new connection
    expect(await direct.get(key)).toBeNull()
    expect(await client.incr(key)).toBe(1)
  } finally {
    client.disconnect()
  }
})
