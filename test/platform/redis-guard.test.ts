// The guard of one Redis (shared/redis/guard.ts) on a real Redis: what it judges of a command's outcome. Its refusals
// while open, and the outage behaviour around it, are test/faults/outages.test.ts and redis-connection.test.ts.
import { afterAll, expect, test } from 'bun:test'
import Redis from 'ioredis'
import { Breaker } from '../../shared/breaker'
import { config } from '../../shared/config'
import { guardCommands } from '../../shared/redis/guard'
import { timeOutCommands } from '../../shared/redis/ioredis-internals'
import { needsOneRedis } from '../helpers'

const clients: Redis[] = []
afterAll(() => {
  for (const client of clients) client.disconnect()
})

test.skipIf(needsOneRedis)('a command that timed out opens the breaker, and its reply coming later does not close it: only the outcome its caller got is judged', async () => {
  const guarded = new Redis(config.redisUrl)
  const feeder = new Redis(config.redisUrl)
  clients.push(guarded, feeder)
  await guarded.ping() // before the guard: the ready check is not the test's
  const breaker = new Breaker('redis', 60_000)
  timeOutCommands(guarded, 100)
  guardCommands(guarded, breaker)
  const list = `test:redis-guard:${crypto.randomUUID()}`
  expect(await guarded.blpop(list, 0).then(() => 'answered', (error: Error) => error.message)).toBe('Command timed out')
  expect(breaker.isOpen).toBe(true)
  // Fed now, the BLPOP Redis still holds for this connection answers: late, to a caller that has its answer.
  await feeder.rpush(list, 'late')
  const queue = (guarded as unknown as { commandQueue: { length: number } }).commandQueue
  for (const deadline = Date.now() + 5000; queue.length > 0;) {
    if (Date.now() > deadline) throw new Error('the late reply never came')
    await Bun.sleep(10)
  }
  expect(await feeder.llen(list)).toBe(0) // the BLPOP took it: its reply came
  expect(breaker.isOpen).toBe(true)
  breaker.dispose() // not counted open in this process's metrics after the test
})
