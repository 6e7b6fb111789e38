// The publish's Redis Functions (shared/redis-script.ts redisFunction) on a real three-master Redis Cluster: a library no
// master holds yet is loaded where it can be, so a master that is hung costs only its own slots.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { join } from 'node:path'
import { keySlot } from '../../shared/redis/key-slot'
import { RedisCluster } from './redis-cluster'

const cluster = new RedisCluster()

beforeAll(async () => {
  await cluster.start()
}, 60_000)
afterAll(async () => {
  for (const port of cluster.ports) cluster.resume(port)
  await cluster.stop()
})

test('with one master hung, a function no master holds yet runs on the others\' slots (loaded where it can be)', async () => {
  const keys = Array.from({ length: 40 }, () => `test:fn:{${randomUUID()}}`)
  const owners = await Promise.all(keys.map((key) => cluster.ownerOf(keySlot(key))))
  const hung = owners[0]!
  expect(new Set(owners.filter((owner) => owner !== hung)).size).toBe(2)
  // A process of its own on the cluster (this one's command connection is another Redis).
  const probe = Bun.spawn(['bun', 'run', join(import.meta.dir, 'redis-function-probe.ts'), ...keys], {
    env: { ...process.env, REDIS_URL: cluster.url }, stdin: 'pipe', stdout: 'pipe', stderr: 'inherit',
  })
  const lines = probe.stdout.pipeThrough(new TextDecoderStream()).pipeThrough(splitLines())[Symbol.asyncIterator]()
  // The probe's own lines, past its logs (JSON objects, on stdout too).
  const next = async () => {
    for (;;) {
      const { value, done } = await lines.next()
      if (done || !value.startsWith('{')) return value
    }
  }
  expect(await next()).toBe('connected')
  cluster.silence(hung) // SIGSTOP: its FUNCTION LOAD is never answered (times out)
  probe.stdin.write('go\n')
  await probe.stdin.flush()
  const outcomes = JSON.parse((await next())!.replace(/^outcomes /, '')) as (number | string)[]
  expect(await probe.exited).toBe(0)
  // Counted on the two masters that answer; the hung master's own slots answer the platform's 503.
  expect(outcomes).toEqual(owners.map((owner) => (owner === hung ? 503 : 2)))
}, 60_000)

/** Splits a text stream into its lines. */
function splitLines(): TransformStream<string, string> {
  let rest = ''
  return new TransformStream({
    transform(chunk, controller) {
      const parts = (rest + chunk).split('\n')
      rest = parts.pop()!
      for (const line of parts) controller.enqueue(line)
    },
    flush(controller) {
      if (rest) controller.enqueue(rest)
    },
  })
}
