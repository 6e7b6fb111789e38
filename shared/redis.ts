// Redis connections. The command connection is shared; blocking readers and subscribers take their own.
import Redis from 'ioredis'
import { config } from './config'
import { log } from './log'

function connect(name: string): Redis {
  const client = new Redis(config.redisUrl, {
    connectionName: name,
    // Foreman starts processes in no order: keep retrying instead of failing the first command.
    maxRetriesPerRequest: 3,
    retryStrategy: (attempt) => Math.min(attempt * 100, 2000),
    lazyConnect: false,
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
  shared ??= connect('platform')
  return shared
}

/** A dedicated connection for SUBSCRIBE or blocking reads; the caller closes it. */
export function dedicatedRedis(name: string): Redis {
  return connect(name)
}

export async function closeRedis(): Promise<void> {
  if (shared) await shared.quit().catch(() => {})
  shared = undefined
}
