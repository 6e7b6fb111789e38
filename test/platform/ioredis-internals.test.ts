// What shared/redis/ioredis-internals.ts relies on, checked against the installed ioredis: each test is one reliance
// its header lists, so an upgrade that changes one fails here by name (rather than as an outage that no longer fails
// fast). On plain ioredis clients: a real Redis (REDIS_URL), and a port where nothing listens. What only a real cluster shows (a pipeline's node argument, ASKING) is test/cluster/node-guard.test.ts.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import diagnostics from 'node:diagnostics_channel'
import Redis, { Cluster, Command } from 'ioredis'
import { config } from '../../shared/config'
import {
  beforeTurnWrite, coalesceWrites, interceptCommands, offlineQueueLength, offlineQueueWhile, type PendingCommand, rememberCommandFlags, replaceSettlers, retarget,
  setOfflineQueue, timeOutCommands, traceOnlyWhenSubscribed,
} from '../../shared/redis/ioredis-internals'
import { freePort, needsOneRedis } from '../helpers'

let deadPort: number // nothing listens there
const clients: (Redis | Cluster)[] = []
const client = <T extends Redis | Cluster>(made: T): T => {
  made.on('error', () => {}) // reconnection attempts to the dead port are expected
  clients.push(made)
  return made
}

beforeAll(async () => {
  deadPort = await freePort()
})

afterAll(() => {
  for (const made of clients) made.disconnect()
})

/** Every command `made` sends, with the pipeline it came in (undefined alone), as the interceptor sees them. */
function recorded(made: Redis | Cluster): { command: PendingCommand; stream: object | undefined }[] {
  const seen: { command: PendingCommand; stream: object | undefined }[] = []
  interceptCommands(made, (command, stream, sendOn) => {
    seen.push({ command, stream })
    return sendOn()
  })
  return seen
}

describe.skipIf(needsOneRedis)('on a real Redis', () => {
  /** A client of the real Redis, connected, and how many writes its socket was handed so far. */
  async function countingWrites(coalesced: boolean): Promise<{ redis: Redis; writes: () => number }> {
    const redis = client(new Redis(config.redisUrl, { lazyConnect: true }))
    if (coalesced) coalesceWrites(redis)
    await redis.connect()
    const socket = (redis as unknown as { stream: { _write: (...a: unknown[]) => unknown; _writev?: (...a: unknown[]) => unknown } }).stream
    // Writes handed to the socket's implementation (a _writev may hand its chunks joined to _write: one write).
    let writes = 0
    let inside = 0
    for (const name of ['_write', '_writev'] as const) {
      const original = socket[name]
      if (!original) continue
      socket[name] = (...args: unknown[]) => {
        if (inside === 0) writes++
        inside++
        try {
          return original.apply(socket, args)
        } finally {
          inside--
        }
      }
    }
    return { redis, writes: () => writes }
  }

  test('commands sent in one turn of the event loop reach the socket in one write once coalesced (the socket is `stream`, written with write())', async () => {
    const writesOf = async (coalesced: boolean) => {
      const { redis, writes } = await countingWrites(coalesced)
      const replies = await Promise.all(Array.from({ length: 50 }, (_, i) => redis.echo(String(i))))
      expect(replies).toEqual(Array.from({ length: 50 }, (_, i) => String(i)))
      return writes()
    }
    expect(await writesOf(false)).toBe(50)
    expect(await writesOf(true)).toBe(1)
  })

  test("beforeTurnWrite: a hook runs once in the turn's coalesced write, and the commands it sends join that write; a hook alone in a turn gets a write of its own", async () => {
    const { redis, writes } = await countingWrites(true)
    let hookRan = 0
    let fromHook: Promise<string> | undefined
    const first = Array.from({ length: 10 }, (_, i) => redis.echo(String(i)))
    beforeTurnWrite(redis, () => {
      hookRan++
      fromHook = redis.echo('from the hook')
    })
    const second = Array.from({ length: 10 }, (_, i) => redis.echo(String(10 + i)))
    expect(hookRan).toBe(0) // not before the turn's write
    expect(await Promise.all([...first, ...second])).toEqual(Array.from({ length: 20 }, (_, i) => String(i)))
    expect(hookRan).toBe(1)
    expect(await fromHook!).toBe('from the hook')
    expect(writes()).toBe(1)

    const alone = new Promise<string>((resolve) => beforeTurnWrite(redis, () => void redis.echo('alone').then(resolve)))
    expect(await alone).toBe('alone')
    expect(writes()).toBe(2)
    expect(hookRan).toBe(1)
  })

  test('beforeTurnWrite: a hook added while the turn\'s hooks run gets a write of its own (nothing else need be written for it)', async () => {
    const { redis } = await countingWrites(true)
    const inner = new Promise<string>((resolve) => {
      beforeTurnWrite(redis, () => beforeTurnWrite(redis, () => void redis.echo('inner').then(resolve)))
    })
    expect(await Promise.race([inner, Bun.sleep(2000).then(() => 'never written')])).toBe('inner')
  })

  test('beforeTurnWrite on a client without coalesced writes runs the hook on setImmediate', async () => {
    const { redis } = await countingWrites(false)
    let ran = false
    beforeTurnWrite(redis, () => (ran = true))
    expect(ran).toBe(false)
    await new Promise((resolve) => setImmediate(resolve))
    expect(ran).toBe(true)
  })

  test('a command written in the same turn as the socket is ended (disconnect(true), as on READONLY) is still sent and answered once coalesced', async () => {
    for (const coalesced of [false, true]) {
      // As shared/redis/client.ts makes it: what was written before a close is not sent again after it.
      const redis = client(new Redis(config.redisUrl, { lazyConnect: true, commandTimeout: 2000, maxRetriesPerRequest: 1, autoResendUnfulfilledCommands: false }))
      if (coalesced) coalesceWrites(redis)
      await redis.connect()
      const key = `ioredis-internals:end:${crypto.randomUUID()}`
      const started = Date.now()
      const answer = redis.set(key, 'sent').then((reply) => reply, (error: Error) => `failed: ${error.message}`)
      redis.disconnect(true)
      expect(await answer).toBe('OK')
      expect(Date.now() - started).toBeLessThan(1000) // answered, not left to its time-out
      const reader = client(new Redis(config.redisUrl))
      expect(await reader.get(key)).toBe('sent')
      await reader.del(key)
    }
  })

  test('a command is traced (a context built, a wrapper promise) only while `ioredis:command` has a subscriber', async () => {
    traceOnlyWhenSubscribed()
    const redis = client(new Redis(config.redisUrl))
    const channel = diagnostics.tracingChannel('ioredis:command')
    const prototype = Object.getPrototypeOf(channel) as { tracePromise: (...args: unknown[]) => unknown }
    const original = prototype.tracePromise
    let traced = 0
    prototype.tracePromise = function (this: unknown, ...args: unknown[]) {
      traced++
      return original.apply(this, args)
    }
    const seen: string[] = []
    const handlers = { start: (context: unknown) => seen.push(String((context as { command?: string }).command)), end() {}, asyncStart() {}, asyncEnd() {}, error() {} }
    try {
      await redis.ping() // connected: the connection's own tracing is not this test's
      traced = 0
      await redis.echo('quiet')
      expect(traced).toBe(0)
      channel.subscribe(handlers)
      await redis.echo('watched')
      expect(traced).toBeGreaterThan(0)
      expect(seen).toEqual(['echo'])
      channel.unsubscribe(handlers)
      traced = 0
      await redis.echo('quiet again')
      expect(traced).toBe(0)
    } finally {
      prototype.tracePromise = original
    }
  })

  test('every command passes the interceptor: a lone one without a stream, a pipeline and a MULTI each with one stream of their own', async () => {
    const redis = client(new Redis(config.redisUrl))
    await redis.ping()
    const seen = recorded(redis)
    expect(await redis.echo('lone')).toBe('lone')
    await redis.pipeline().echo('p1').echo('p2').exec()
    await redis.multi().echo('m1').echo('m2').exec()
    const names = seen.map(({ command }) => command.name)
    expect(names).toEqual(['echo', 'echo', 'echo', 'multi', 'echo', 'echo', 'exec'])
    expect(seen[0]!.stream).toBeUndefined()
    const pipeline = seen[1]!.stream
    const multi = seen[3]!.stream
    expect(pipeline).toBeDefined()
    expect(multi).toBeDefined()
    expect(multi).not.toBe(pipeline)
    expect(seen.slice(1, 3).every(({ stream }) => stream === pipeline)).toBe(true)
    expect(seen.slice(3).every(({ stream }) => stream === multi)).toBe(true)
  })

  test('a command held in the offline queue is counted there, and passes the interceptor again when the queue is flushed', async () => {
    const redis = client(new Redis(config.redisUrl, { lazyConnect: true }))
    const seen = recorded(redis)
    const reply = redis.echo('queued')
    expect(offlineQueueLength(redis)).toBe(1)
    expect(await reply).toBe('queued')
    expect(offlineQueueLength(redis)).toBe(0)
    const echoes = seen.filter(({ command }) => command.name === 'echo')
    expect(echoes.length).toBe(2)
    expect(echoes[0]!.command).toBe(echoes[1]!.command)
  })

  test("replaced settlers hear the reply first, and the caller gets what they pass on; isSettled once it has", async () => {
    const redis = client(new Redis(config.redisUrl))
    await redis.ping()
    const heard: unknown[] = []
    let settledWhenHeard: boolean | undefined
    let sent: PendingCommand | undefined
    interceptCommands(redis, (command, _stream, sendOn) => {
      sent = command
      const { resolve, reject } = command
      replaceSettlers(command, {
        resolve: (value) => {
          heard.push(value)
          settledWhenHeard = command.isSettled
          return resolve(value)
        },
        reject,
      })
      return sendOn()
    })
    expect(await redis.echo('first')).toBe('first')
    expect(heard.map(String)).toEqual(['first'])
    expect(settledWhenHeard).toBe(false)
    expect(sent?.isSettled).toBe(true)
  })

  test('options.host and options.port are read at every reconnection: retargeted, a client of a dead port reaches Redis', async () => {
    const target = new URL(config.redisUrl)
    const redis = client(new Redis({
      host: '127.0.0.1', port: deadPort, db: Number(target.pathname.slice(1) || 0), lazyConnect: true,
      retryStrategy: () => {
        retarget(redis, { host: target.hostname, port: Number(target.port) })
        return 10
      },
    }))
    redis.connect().catch(() => {})
    expect(await redis.ping()).toBe('PONG')
    expect(redis.options.port).toBe(Number(target.port))
  })

  test('a command left unanswered (a BLPOP nobody feeds): the timeout setTimeout arms rejects it, and isSettled is true then', async () => {
    const redis = client(new Redis(config.redisUrl))
    await redis.ping()
    let command: PendingCommand | undefined
    interceptCommands(redis, (sent, _stream, sendOn) => {
      command = sent
      sent.setTimeout(50)
      return sendOn()
    })
    const started = performance.now()
    const outcome = await redis.blpop(`test:ioredis-internals:never:${crypto.randomUUID()}`, 0).then(() => 'answered', (error: Error) => error.message)
    expect(outcome).toBe('Command timed out')
    expect(performance.now() - started).toBeLessThan(1000)
    expect(command?.isSettled).toBe(true)
  })

  test('timeOutCommands: unanswered commands (a BLPOP nobody feeds, a GET written behind it) are rejected "Command timed out" after their deadline, never before, oldest first; one answered within its deadline, after sweeps saw it waiting, is untouched', async () => {
    const redis = client(new Redis(config.redisUrl))
    const ms = 200
    timeOutCommands(redis, ms)
    // Redis answers this one (nil) after 100 ms: seen waiting by several sweeps (every 25 ms), answered in time.
    expect(await redis.blpop(`test:ioredis-internals:empty:${crypto.randomUUID()}`, 0.1)).toBeNull()
    const blocked = `test:ioredis-internals:never:${crypto.randomUUID()}`
    const settled: string[] = []
    const outcome = (name: string, sent: Promise<unknown>) => {
      const started = performance.now()
      return sent.then(() => 'answered', (error: Error) => error.message).then((message) => {
        settled.push(name)
        return { message, ms: performance.now() - started }
      })
    }
    const blpop = outcome('blpop', redis.blpop(blocked, 0))
    await Bun.sleep(30) // the GET starts waiting later, behind the BLPOP on the same connection
    const get = outcome('get', redis.get('test:ioredis-internals:deadline'))
    const queue = (redis as unknown as { commandQueue: { length: number; peekAt(i: number): { command: PendingCommand } } }).commandQueue
    expect(queue.length).toBe(2) // what the sweep reads: both wait there, oldest first, each holding its command
    expect([queue.peekAt(0)!.command.name, queue.peekAt(1)!.command.name]).toEqual(['blpop', 'get'])
    const [first, second] = await Promise.all([blpop, get])
    expect(first.message).toBe('Command timed out')
    expect(second.message).toBe('Command timed out')
    expect(settled).toEqual(['blpop', 'get'])
    for (const { ms: waited } of [first, second]) {
      expect(waited).toBeGreaterThanOrEqual(ms)
      expect(waited).toBeLessThan(1000)
    }
  })
})

/** A client made as the command connection is (a command is never sent again on the next connection), and its killer. */
function killable() {
  const name = `ioredis-internals-${crypto.randomUUID()}`
  const redis = client(new Redis(config.redisUrl, { connectionName: name, autoResendUnfulfilledCommands: false, maxRetriesPerRequest: 1, retryStrategy: () => 10 }))
  const killer = client(new Redis(config.redisUrl))
  const queueOf = () => (redis as unknown as { commandQueue: object }).commandQueue
  /** Kills the connection (CLIENT KILL) and waits for the next one, ready with a new command queue. */
  const killAndReconnect = async () => {
    const before = queueOf()
    const id = /id=(\d+)/.exec(String(await killer.client('LIST')).split('\n').find((line) => line.includes(`name=${name}`))!)![1]!
    await killer.client('KILL', 'ID', id)
    for (const deadline = Date.now() + 5000; redis.status !== 'ready' || queueOf() === before;) {
      if (Date.now() > deadline) throw new Error('the client did not reconnect with a new queue')
      await Bun.sleep(2)
    }
  }
  return { redis, killAndReconnect }
}

const outcomeOf = (sent: Promise<unknown>) => sent.then(() => 'answered', (error: Error) => error.message)

test.skipIf(needsOneRedis)('timeOutCommands: commands in flight when the connection is killed, left by each reconnection in the queue it replaced (nothing answers them there; two reconnections between two sweeps), still time out', async () => {
  const { redis, killAndReconnect } = killable()
  await redis.ping()
  const ms = 1600 // a sweep every 200 ms: both reconnections below come well within one
  timeOutCommands(redis, ms)
  const started = performance.now()
  const first = [redis.blpop(`test:ioredis-internals:never:${crypto.randomUUID()}`, 0), redis.get('k')].map(outcomeOf)
  await Bun.sleep(5)
  await killAndReconnect()
  const second = outcomeOf(redis.blpop(`test:ioredis-internals:never:${crypto.randomUUID()}`, 0))
  await Bun.sleep(5)
  await killAndReconnect()
  expect(await Promise.all([...first, second])).toEqual(['Command timed out', 'Command timed out', 'Command timed out'])
  expect(performance.now() - started).toBeGreaterThanOrEqual(ms)
  expect(await redis.ping()).toBe('PONG') // the new connection serves
})

test.skipIf(needsOneRedis)('timeOutCommands: a client that ends rejects what a reconnection left waiting ("Connection is closed."), before its deadline', async () => {
  const { redis, killAndReconnect } = killable()
  await redis.ping()
  timeOutCommands(redis, 10_000)
  const stranded = outcomeOf(redis.blpop(`test:ioredis-internals:never:${crypto.randomUUID()}`, 0))
  await Bun.sleep(5)
  await killAndReconnect()
  const started = performance.now()
  redis.disconnect()
  expect(await stranded).toBe('Connection is closed.')
  expect(performance.now() - started).toBeLessThan(1000)
})

test('timeOutCommands: a command held in the offline queue (no connection yet) is rejected "Command timed out" after its deadline', async () => {
  const redis = client(new Redis({ host: '127.0.0.1', port: deadPort, retryStrategy: () => 20 }))
  const stop = timeOutCommands(redis, 100)
  const started = performance.now()
  const message = await redis.get('k').then(() => 'answered', (error: Error) => error.message)
  expect(message).toBe('Command timed out')
  expect(performance.now() - started).toBeGreaterThanOrEqual(100)
  stop()
})


test('options.enableOfflineQueue is read at every command: off, a command while not connected fails at once; on, it waits in the queue', async () => {
  const redis = client(new Redis({ host: '127.0.0.1', port: deadPort, retryStrategy: () => 20 }))
  setOfflineQueue(redis, false)
  await expect(redis.get('k')).rejects.toThrow("Stream isn't writeable and enableOfflineQueue options is false")
  setOfflineQueue(redis, true)
  const waiting = redis.get('k').catch(() => 'ended')
  expect(offlineQueueLength(redis)).toBe(1)
  redis.disconnect()
  expect(await waiting).toBe('ended')
})

test("a cluster client's enableOfflineQueue getter is asked at every command", async () => {
  let holds = false
  const cluster = client(new Cluster([{ host: '127.0.0.1', port: deadPort }], { clusterRetryStrategy: () => 20 }))
  offlineQueueWhile(cluster, () => holds)
  await expect(cluster.get('k')).rejects.toThrow("Cluster isn't ready and enableOfflineQueue options is false")
  holds = true
  const waiting = cluster.get('k').catch(() => 'ended')
  expect(offlineQueueLength(cluster)).toBe(1)
  cluster.disconnect()
  expect(await waiting).toBe('ended')
})

test.skipIf(needsOneRedis)("Command.checkFlag is looked up at each call and answers the same for the same flag and name, so remembering its answers changes nothing a client does", async () => {
  const checks: string[] = []
  const commands = Command as unknown as { checkFlag(flag: string, name: string): boolean }
  const original = commands.checkFlag
  const asked = (flag: string, name: string) => {
    checks.push(`${flag} ${name}`)
    return original.call(Command, flag, name)
  }
  commands.checkFlag = asked
  try {
    const redis = client(new Redis(config.redisUrl))
    await redis.get('k')
    expect(checks).toContain('BLOCKING_COMMANDS get') // asked per command, through the static looked up then
    const answers = (name: string) => ['BLOCKING_COMMANDS', 'ENTER_SUBSCRIBER_MODE', 'WILL_DISCONNECT'].map((flag) => asked(flag, name))
    expect([answers('blpop'), answers('subscribe'), answers('quit'), answers('fcall')]).toEqual([
      [true, false, false], [false, true, false], [false, false, true], [false, false, false],
    ])
    expect(answers('fcall')).toEqual(answers('fcall'))
  } finally {
    commands.checkFlag = original
  }
  // Remembered: the same answers, and a client still enters and leaves subscriber mode and blocks.
  rememberCommandFlags()
  expect((Command as unknown as { checkFlag(flag: string, name: string): boolean }).checkFlag('BLOCKING_COMMANDS', 'blpop')).toBe(true)
  const subscriber = client(new Redis(config.redisUrl))
  const publisher = client(new Redis(config.redisUrl))
  const heard = new Promise((resolve) => subscriber.on('message', (_channel, message) => resolve(message)))
  await subscriber.subscribe('ioredis-internals-flags')
  await publisher.publish('ioredis-internals-flags', 'hello')
  expect(await heard).toBe('hello')
  await subscriber.unsubscribe('ioredis-internals-flags')
  expect(await subscriber.get('k')).toBeNull()
})
