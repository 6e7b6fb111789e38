// Redis connections. The command connection is shared; blocking readers and subscribers take their own.
//
// Outage behaviour (docs/architecture.md, "Outages"): every command on the command connection answers within
// config.redis.commandTimeoutMs (a stalled link times out), and once the connection has been ready, commands issued
// while it is down fail at once instead of queueing; ioredis reconnects by itself within half a second of Redis's return.
import Redis, { type RedisOptions } from 'ioredis'
import { config } from './config'
import { log } from './log'

function connect(name: string, options: RedisOptions = {}): Redis {
  const client = new Redis(config.redisUrl, {
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
  if (shared) return shared
  const client = connect('platform', { commandTimeout: config.redis.commandTimeoutMs, maxRetriesPerRequest: 1 })
  // Queue commands only until the first connection (foreman starts processes in no order); after that a command sent
  // while Redis is down fails at once: a request should hear "unavailable" now, not after a reconnect backoff.
  client.once('ready', () => (client.options.enableOfflineQueue = false))
  shared = client
  return client
}

/** A dedicated connection for SUBSCRIBE or blocking reads (no command timeout); the caller closes it. */
export function dedicatedRedis(name: string): Redis {
  return connect(name)
}

export async function closeRedis(): Promise<void> {
  if (shared) await shared.quit().catch(() => {})
  shared = undefined
}
