// Redis connections. The command connection is shared; blocking readers and subscribers take their own.
//
// Outage behaviour (docs/architecture.md, "Outages"): every command on the command connection answers within
// config.redis.commandTimeoutMs (a stalled link times out); once the connection has been ready, commands issued while it
// is down fail at once instead of queueing; after a timeout or a connection failure a breaker fails new commands at
// once for a cool-down, so one request never waits out several timeouts in a row. ioredis reconnects by itself within
// half a second of Redis's return, and the first command after the cool-down closes the breaker.
import Redis, { type RedisOptions } from 'ioredis'
import { Breaker } from './breaker'
import { config } from './config'
import { backendUnreachable } from './errors'
import { log } from './log'


interface PendingCommand {
  promise: Promise<unknown>
  reject(error: Error): void
}

/**
 * Routes every command of `client` through `breaker` (ioredis funnels all commands, pipelines too, through sendCommand).
 * A pipeline (MULTI included) is admitted or refused as a whole, on its first command: refusing only part of one would
 * leave a MULTI open on the connection and wreck every command after it.
 */
function guardCommands(client: Redis, breaker: Breaker): void {
  const send = client.sendCommand.bind(client) as (command: PendingCommand, stream?: object) => unknown
  const pipelines = new WeakMap<object, boolean>() // pipeline writer → admitted
  // ioredis passes a command through sendCommand again when it flushes its offline queue: count each outcome once.
  const watched = new WeakSet<PendingCommand>()
  let timeoutsInARow = 0
  const admit = (stream: object | undefined) => {
    if (!stream) return breaker.tryPass()
    let admitted = pipelines.get(stream)
    if (admitted === undefined) pipelines.set(stream, (admitted = breaker.tryPass()))
    return admitted
  }
  ;(client as unknown as { sendCommand: typeof send }).sendCommand = (command, stream) => {
    // Only while ready: the handshake of a reconnect (CLIENT SETNAME, SELECT, the ready check) must pass, or the breaker
    // would keep the connection from ever coming back. While not ready, ioredis refuses user commands at once itself.
    if (client.status === 'ready' && !admit(stream)) {
      command.reject(new Error('Connection is closed.')) // the same words as a dead link, so every caller maps it alike
      return command.promise
    }
    if (watched.has(command)) return send(command, stream)
    watched.add(command)
    command.promise.then(
      () => {
        timeoutsInARow = 0
        breaker.succeeded()
      },
      (error: Error) => {
        if (!/timed out/i.test(error.message)) timeoutsInARow = 0 // Redis answered (an error reply is an answer)
        else if (++timeoutsInARow >= DEAD_AFTER_TIMEOUTS && client.status === 'ready') {
          // Nothing has come back for several timeouts in a row: the connection may have died without a reset (no RST
          // ever arrives on a dead path), and it would time out forever. A new one costs little and heals that.
          timeoutsInARow = 0
          log('warn', 'redis answers nothing on this connection; reconnecting', { connection: client.options.connectionName })
          client.disconnect(true)
        }
        if (backendUnreachable(error)) breaker.failed()
      },
    )
    return send(command, stream)
  }
}

/** Command timeouts in a row, with no reply in between, after which the command connection is replaced. */
const DEAD_AFTER_TIMEOUTS = 3

function connect(name: string, options: RedisOptions = {}, url = config.redisUrl): Redis {
  const client = new Redis(url, {
    connectionName: name,
    connectTimeout: Math.max(1000, config.redis.commandTimeoutMs),
    retryStrategy: (attempt) => Math.min(attempt * 50, 500),
    lazyConnect: false,
    ...options,
  })
  // ioredis reconnects by itself; without a listener every failed attempt is an "unhandled error" on stderr.
  let lastLogged = 0
  client.on('error', (error: Error) => {
    if (Date.now() - lastLogged < 5000) return
    lastLogged = Date.now()
    log('warn', 'redis unavailable', { connection: name, error: error.message })
  })
  return client
}

let shared: Redis | undefined

/** The process's command connection (non-blocking commands only). */
export function redis(): Redis {
  return (shared ??= commandConnection())
}

/**
 * A command connection with the outage behaviour above; `redis()` is the process's one. Tests build their own to
 * point one at a fault proxy.
 */
export function commandConnection(name = 'platform', url = config.redisUrl): Redis {
  const client = connect(name, {
    commandTimeout: config.redis.commandTimeoutMs,
    maxRetriesPerRequest: 1,
    // A command that timed out was already answered 503; sending it again on the next connection would run a write
    // its caller was told failed (a publish stored twice once the client retries), and, counted as new, loop the healing.
    autoResendUnfulfilledCommands: false,
  }, url)
  // Queue commands only until the first connection (foreman starts processes in no order); after that a command sent
  // while Redis is down fails at once: a request should hear "unavailable" now, not after a reconnect backoff.
  client.once('ready', () => (client.options.enableOfflineQueue = false))
  guardCommands(client, new Breaker('redis', config.redis.commandTimeoutMs))
  return client
}

/** A dedicated connection for SUBSCRIBE or blocking reads (no command timeout); the caller closes it. */
export function dedicatedRedis(name: string, options: RedisOptions = {}): Redis {
  return connect(name, options)
}

export async function closeRedis(): Promise<void> {
  const client = shared
  shared = undefined
  if (!client) return
  // QUIT lets pending replies arrive; bounded, since on a link that died silently it would never be answered.
  await Promise.race([client.quit().catch(() => {}), Bun.sleep(1000)])
  client.disconnect()
}
