// The one runner of the platform's Lua scripts (shared/redis-script.ts) against a real Redis: a script or function
// library Redis does not hold (never loaded, flushed, deleted) still runs, and one Redis cannot run becomes the
// platform's 503.
import { afterAll, expect, test } from 'bun:test'
import { createHash, randomUUID } from 'node:crypto'
import { ApiError } from '../../shared/errors'
import { windowOf } from '../../shared/fixed-window'
import { channelTop, defaultBudgets, publish, readHistory } from '../../shared/realtime/broker'
import { channelKeys } from '../../shared/realtime/keys'
import { publishInOneStep } from '../../shared/realtime/publish-request'
import { enterPresence, listPresence } from '../../shared/realtime/presence'
import { closeRedis, redis } from '../../shared/redis/client'
import { redisFunction, redisScript } from '../../shared/redis-script'

afterAll(async () => {
  await closeRedis()
})

const sha1 = (text: string) => createHash('sha1').update(text).digest('hex')

test('a script Redis has never seen runs on its first call (NOSCRIPT: the source is sent once) and is cached afterwards', async () => {
  const source = `-- ${randomUUID()}\nreturn redis.call('INCRBY', KEYS[1], ARGV[1])`
  const key = `test:redis-script:${randomUUID()}`
  const [before] = (await redis().script('EXISTS', sha1(source))) as number[]
  expect(before).toBe(0)
  const incr = redisScript<number>('test counter', source)
  expect(await incr.run([key], [5])).toBe(5)
  const [after] = (await redis().script('EXISTS', sha1(source))) as number[]
  expect(after).toBe(1)
  expect(await incr.run([key], [2])).toBe(7)
  expect(await incr.runEach([[[key], [1]], [[key], [1]]])).toEqual([8, 9])
  await redis().del(key)
})

test('after SCRIPT FLUSH the broker and presence scripts still run', async () => {
  const productId = randomUUID()
  const channel = 'chat:flushed'
  const policy = { historyTtlSeconds: 60, historySize: 10 }
  expect((await publish({ productId, channel, policy, data: '1' })).offset).toBe(1)
  await redis().script('FLUSH')
  expect((await publish({ productId, channel, policy, data: '2' })).offset).toBe(2)
  const history = await readHistory(productId, channel, policy, { last_n: 10 })
  expect(history.entries.map((entry) => entry.data)).toEqual([1, 2])
  await redis().script('FLUSH')
  expect(await enterPresence({ productId, channel, identity: 'ada', connectionId: 'c1' })).toEqual({ joined: true })
  expect((await listPresence(productId, channel)).map((member) => member.identity)).toEqual(['ada'])
})

test('a script Redis refuses to run (an error reply) is answered 503 "<Service> is unavailable" with Retry-After', async () => {
  const key = `test:redis-script:${randomUUID()}`
  await redis().hset(key, 'f', 'v')
  const incr = redisScript<number>('test counter', `return redis.call('INCR', KEYS[1])`)
  const error = await incr.run([key], []).catch((e: unknown) => e)
  expect(error).toBeInstanceOf(ApiError)
  expect((error as ApiError).status).toBe(503)
  expect((error as ApiError).message).toBe('Test counter is unavailable')
  expect((error as ApiError).headers).toEqual({ 'retry-after': '1' })
  await redis().del(key)
})

test('the realtime scripts name their service in that 503: publish, history, presence', async () => {
  const productId = randomUUID()
  const channel = 'chat:wrong-type'
  const policy = { historyTtlSeconds: 60, historySize: 10 }
  const keys = channelKeys(productId, channel)
  await redis().set(keys.meta, 'not a hash', 'EX', 60)
  await redis().set(keys.presCount, 'not a hash', 'EX', 60)
  const messageOf = (promise: Promise<unknown>) => promise.then(() => 'resolved', (e: ApiError) => `${e.status} ${e.message}`)
  expect(await messageOf(publish({ productId, channel, policy, data: '1' }))).toBe('503 Realtime publish is unavailable')
  expect(await messageOf(readHistory(productId, channel, policy, { last_n: 1 }))).toBe('503 Realtime history is unavailable')
  expect(await messageOf(channelTop(productId, channel))).toBe('503 Realtime history is unavailable')
  expect(await messageOf(listPresence(productId, channel))).toBe('503 Realtime presence is unavailable')
  await redis().del(keys.meta, keys.presCount)
})

test('after SCRIPT FLUSH the public publish with its limits (publish-request) still runs', async () => {
  const productId = randomUUID()
  const window = windowOf(`test:redis-script:${randomUUID()}`, 60)
  await redis().script('FLUSH')
  const input = { productId, channel: 'chat:flushed', policy: { historyTtlSeconds: 60, historySize: 10 }, data: '1', id: randomUUID() }
  const outcome = await publishInOneStep([input], { quota: { window, limit: 5 } })
  expect(outcome).toEqual({ channels: [{ published: { id: input.id, offset: 1, epoch: expect.any(String) }, replayed: false }] })
  expect(await redis().get(window.key)).toBe('1')
  await redis().del(window.key)
})

/** The function libraries Redis holds whose code contains `text`, by name. */
async function librariesWith(text: string): Promise<string[]> {
  const list = (await redis().call('FUNCTION', 'LIST', 'WITHCODE')) as unknown[][]
  return list.map((entry) => ({ name: String(entry[1]), code: String(entry[entry.indexOf('library_code') + 1]) }))
    .filter((library) => library.code.includes(text)).map((library) => library.name)
}

test('a function library Redis lacks is loaded by its first call, by concurrent first calls once, and called by name after', async () => {
  const marker = randomUUID()
  const key = `test:redis-function:${randomUUID()}`
  const incr = redisFunction<number>('test counter', `-- ${marker}\nlocal function add(k, n) return redis.call('INCRBY', k, n) end`,
    `return add(KEYS[1], ARGV[1])`)
  expect(await librariesWith(marker)).toEqual([])
  // Twenty calls in flight find it missing together: one FUNCTION LOAD, and every call counted once.
  const replies = await incr.runEach(Array.from({ length: 20 }, () => [[key], [1]] as const))
  expect(replies.toSorted((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1))
  const [name] = await librariesWith(marker)
  expect(name).toMatch(/^platform_[0-9a-f]{40}$/)
  expect(await incr.run([key], [5])).toBe(25)
  await redis().call('FUNCTION', 'DELETE', name!)
  expect(await incr.run([key], [5])).toBe(30)
  expect(await librariesWith(marker)).toEqual([name!])
  await redis().call('FUNCTION', 'DELETE', name!)
  await redis().del(key)
})

test('a library Redis refuses to load is answered 503, its cause the load\'s error, not "Function not found"', async () => {
  const broken = redisFunction<number>('test counter', `-- ${randomUUID()}\nlocal function add(`, `return 1`)
  const error = await broken.run([`test:redis-function:${randomUUID()}`], []).catch((e: unknown) => e)
  expect((error as ApiError).status).toBe(503)
  expect(String(((error as ApiError).cause as Error).message)).toMatch(/^ERR Error compiling function/)
})

test('after FUNCTION DELETE of the publish library, publish and the public publish still run, each run on its own clock', async () => {
  // Budgets of this test's own, so its libraries are no other test file's.
  const budgets = { ...defaultBudgets(), historyMaxBytes: 67_000_000 + Math.floor(Math.random() * 1_000_000) }
  const productId = randomUUID()
  const channel = 'chat:deleted'
  const policy = { historyTtlSeconds: 60, historySize: 10 }
  expect((await publish({ productId, channel, policy, data: '1' }, budgets)).offset).toBe(1)
  const loaded = await librariesWith(String(budgets.historyMaxBytes))
  expect(loaded.length).toBe(1)
  for (const name of loaded) await redis().call('FUNCTION', 'DELETE', name)
  await Bun.sleep(5)
  expect((await publish({ productId, channel, policy, data: '2' }, budgets)).offset).toBe(2)
  await Bun.sleep(5)
  expect((await publish({ productId, channel, policy, data: '3' }, budgets)).offset).toBe(3)
  const window = windowOf(`test:redis-script:${randomUUID()}`, 60)
  for (const data of ['4', '5']) {
    const input = { productId, channel, policy, data, id: randomUUID() }
    const outcome = await publishInOneStep([input], { quota: { window, limit: 5 } }, budgets)
    expect(outcome).toEqual({ channels: [{ published: { id: input.id, offset: Number(data), epoch: expect.any(String) }, replayed: false }] })
    await Bun.sleep(5)
  }
  // A library's locals outlive a call: the time each publish read is its own, not its library's first call's.
  const history = await readHistory(productId, channel, policy, { last_n: 10 })
  expect(history.entries.map((entry) => entry.data)).toEqual([1, 2, 3, 4, 5])
  expect(new Set(history.entries.map((entry) => entry.publishedAt)).size).toBe(5)
  for (const name of await librariesWith(String(budgets.historyMaxBytes))) await redis().call('FUNCTION', 'DELETE', name)
  await redis().del(window.key)
})
