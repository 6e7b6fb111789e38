// Run by test/cluster/redis-function.test.ts as a process of its own (REDIS_URL: the test's cluster; the test process's
// command connection is another Redis): connects, says "connected", waits for a line on stdin (the test hangs a master
// meanwhile), then runs one new function once per key given in argv and prints `outcomes <JSON>`: each the reply or the
// error's status (its logs go to stdout too).
import { randomUUID } from 'node:crypto'
import { closeRedis, redis } from '../../shared/redis/client'
import { redisFunction } from '../../shared/redis-script'

const keys = process.argv.slice(2)
await redis().ping()
console.log('connected')
for await (const _ of console) break
const incr = redisFunction<number>('test counter', `-- ${randomUUID()}`, `return redis.call('INCRBY', KEYS[1], ARGV[1])`)
const outcomes = await Promise.all(keys.map((key) => incr.run([key], [2]).catch((error: { status?: number }) => error.status ?? 'failed')))
console.log(`outcomes ${JSON.stringify(outcomes)}`)
await closeRedis()
process.exit(0)
