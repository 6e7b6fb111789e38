// The publish's Redis Functions (shared/redis-script.ts redisFunction) on a real three-master Redis Cluster: a library no
// master holds yet is loaded where it can be, so a master that is hung costs only its own slots.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { keySlot } from '../../shared/redis/key-slot'
import { RedisCluster } from './redis-cluster'

const cluster = new RedisCluster()
let shared: typeof import('../../shared/redis-script')
let client: typeof import('../../shared/redis/client')

beforeAll(async () => {
  await cluster.start()
  // The command connection reads REDIS_URL when first imported: this file's is the cluster.
  process.env.REDIS_URL = cluster.url
  client = await import('../../shared/redis/client')
  shared = await import('../../shared/redis-script')
}, 60_000)
afterAll(async () => {
  for (const port of cluster.ports) cluster.resume(port)
  await client?.closeRedis()
  await cluster.stop()
})

test('with one master hung, a function no master holds yet runs on the others\' slots (loaded where it can be)', async () => {
  const incr = shared.redisFunction<number>('test counter', `-- ${randomUUID()}`, `return redis.call('INCRBY', KEYS[1], ARGV[1])`)
  // Keys on the two masters other than the one hung (SIGSTOP: its FUNCTION LOAD times out), found by their slots' owners.
  const keys = Array.from({ length: 40 }, () => `test:fn:{${randomUUID()}}`)
  const owners = await Promise.all(keys.map((key) => cluster.ownerOf(keySlot(key))))
  const down = owners[0]!
  await client.redis().ping()
  cluster.silence(down)
  const alive = keys.filter((_, i) => owners[i] !== down)
  expect(new Set(alive.map((key) => owners[keys.indexOf(key)])).size).toBe(2)
  expect(await Promise.all(alive.map((key) => incr.run([key], [2])))).toEqual(alive.map(() => 2))
  // The hung master's own slots still answer the platform's 503.
  await expect(incr.run([keys[0]!], [1])).rejects.toMatchObject({ status: 503 })
}, 60_000)
