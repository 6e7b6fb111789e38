// Redis connections. The command connection is shared; blocking readers and subscribers take their own.
//
// Outage behaviour (docs/architecture.md, "Outages"): every command on the command connection answers within
// config.redis.commandTimeoutMs (a stalled link times out); once the connection has been ready, commands issued while it
// is down fail at once instead of queueing; after a timeout or a connection failure a breaker fails new commands at
// once for a cool-down, so one request never waits out several timeouts in a row. ioredis reconnects by itself within
// half a second of Redis's return, and the first command after the cool-down closes the breaker.
import Redis, { Cluster, type RedisOptions } from 'ioredis'
import { Breaker } from './breaker'
import { config } from './config'
import { backendUnreachable } from './errors'
import { log } from './log'


/** A connection to one Redis, or to a Redis Cluster through ioredis' Cluster client (REDIS_URL `redis+cluster://`). */
export type RedisClient = Redis | Cluster

const CLUSTER_SCHEME = 'redis+cluster:'

/**
 * The seed nodes of a Redis Cluster URL, `redis+cluster://host:port,host:port[/]` (any reachable node is enough: the
 * client learns the others), or null for a plain `redis://` URL. A cluster has one database: no `/<index>`.
 * @example clusterNodesOf('redis+cluster://127.0.0.1:7000,127.0.0.1:7001') // [{host:'127.0.0.1',port:7000}, …]
 */
export function clusterNodesOf(url: string): { host: string; port: number }[] | null {
  if (!url.startsWith(`${CLUSTER_SCHEME}//`)) return null
  const rest = url.slice(CLUSTER_SCHEME.length + 2).replace(/\/$/, '')
  if (rest.includes('/') || rest.includes('@') || rest === '') {
    throw new Error(`REDIS_URL ${url}: a cluster URL is redis+cluster://host:port[,host:port...], without credentials or a database index`)
  }
  return rest.split(',').map((node) => {
    const match = /^([^:]+):(\d{1,5})$/.exec(node.trim())
    if (!match) throw new Error(`REDIS_URL ${url}: "${node}" is not host:port`)
    return { host: match[1]!, port: Number(match[2]) }
  })
}

/** Whether this process's Redis is a cluster. */
export const onCluster = () => clusterNodesOf(config.redisUrl) !== null

interface PendingCommand {
  promise: Promise<unknown>
  reject(error: Error): void
}

/**
 * Routes every command of `client` through `breaker` (ioredis funnels all commands, pipelines too, through sendCommand).
 * A pipeline (MULTI included) is admitted or refused as a whole, on its first command: refusing only part of one would
 * leave a MULTI open on the connection and wreck every command after it.
 */
function guardCommands(client: RedisClient, breaker: Breaker): void {
  // A cluster's sendCommand takes a third argument (the node a pipeline chose): passed on untouched.
  const send = client.sendCommand.bind(client) as (command: PendingCommand, stream?: object, ...rest: unknown[]) => unknown
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
  ;(client as unknown as { sendCommand: typeof send }).sendCommand = (command, stream, ...rest) => {
    // Only while ready: the handshake of a reconnect (CLIENT SETNAME, SELECT, the ready check) must pass, or the breaker
    // would keep the connection from ever coming back. While not ready, ioredis refuses user commands at once itself.
    if (client.status === 'ready' && !admit(stream)) {
      command.reject(new Error('Connection is closed.')) // the same words as a dead link, so every caller maps it alike
      return command.promise
    }
    if (watched.has(command)) return send(command, stream, ...rest)
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
          log('warn', 'redis answers nothing on this connection; reconnecting', { connection: nameOf(client) })
          client.disconnect(true)
        }
        if (backendUnreachable(error)) breaker.failed()
      },
    )
    return send(command, stream, ...rest)
  }
}

/** Command timeouts in a row, with no reply in between, after which the command connection is replaced. */
const DEAD_AFTER_TIMEOUTS = 3

const nameOf = (client: RedisClient) => (client instanceof Cluster ? client.options.redisOptions?.connectionName : client.options.connectionName)

function connect(name: string, options: RedisOptions = {}, url = config.redisUrl): RedisClient {
  const redisOptions: RedisOptions = {
    connectionName: name,
    connectTimeout: Math.max(1000, config.redis.commandTimeoutMs),
    retryStrategy: (attempt) => Math.min(attempt * 50, 500),
    lazyConnect: false,
    ...options,
  }
  const nodes = clusterNodesOf(url)
  const client: RedisClient = nodes
    ? new Cluster(nodes, {
      redisOptions,
      // Reads and writes on the masters: a replica may lag, and history must never go back.
      scaleReads: 'master',
      clusterRetryStrategy: (attempt) => Math.min(attempt * 50, 500),
      enableOfflineQueue: options.enableOfflineQueue ?? true,
    })
    : new Redis(url, redisOptions)
  // ioredis reconnects by itself; without a listener every failed attempt is an "unhandled error" on stderr.
  let lastLogged = 0
  client.on('error', (error: Error) => {
    if (Date.now() - lastLogged < 5000) return
    lastLogged = Date.now()
    log('warn', 'redis unavailable', { connection: name, error: error.message })
  })
  return client
}

let shared: RedisClient | undefined

/** The process's command connection (non-blocking commands only). */
export function redis(): RedisClient {
  return (shared ??= commandConnection())
}

/**
 * A command connection with the outage behaviour above; `redis()` is the process's one. Tests build their own to
 * point one at a fault proxy.
 */
export function commandConnection(name = 'platform', url = config.redisUrl): RedisClient {
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

/**
 * A dedicated connection for SUBSCRIBE (no command timeout); the caller closes it. On a cluster, a plain connection
 * to the first seed node: a cluster PUBLISH reaches every node, and a plain link keeps the liveness checks honest
 * (ioredis' cluster subscriber moves to another node silently, losing what was published meanwhile without a sign).
 * While that node is down the subscription is not live, so caches are off: safe, but each request reads PostgreSQL.
 */
export function dedicatedRedis(name: string, options: RedisOptions = {}): Redis {
  const nodes = clusterNodesOf(config.redisUrl)
  return connect(name, options, nodes ? `redis://${nodes[0]!.host}:${nodes[0]!.port}` : config.redisUrl) as Redis
}

/**
 * A dedicated connection for blocking reads (XREAD over several shard streams): to the process's Redis, or on a
 * cluster to the one node `node` ("host:port"; one XREAD cannot span nodes). The caller closes it.
 */
export function dedicatedReader(name: string, node: string | undefined, options: RedisOptions = {}): Redis {
  if (!node) {
    if (onCluster()) throw new Error('no cluster node holds this slot now (the cluster is failing over or broken)')
    return connect(name, options) as Redis
  }
  return connect(name, options, `redis://${node}`) as Redis
}

/** The cluster node ("host:port") that holds `key`'s slot now, as the client last learned the slots; undefined on one Redis. */
export function nodeOfKey(key: string): string | undefined {
  const client = redis()
  if (!(client instanceof Cluster)) return undefined
  return client.slots[keySlot(key)]?.[0]
}

/**
 * The command connection to one cluster node ("host:port"), for commands about that node itself (CLIENT UNBLOCK);
 * on one Redis, the process's command connection whatever `node` says.
 */
export function clusterNode(node: string): Redis | undefined {
  const client = redis()
  if (!(client instanceof Cluster)) return client
  return client.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === node)
}

/** Re-reads which node holds which slot (after a MOVED reply); resolves once the client knows. */
export function refreshClusterSlots(): Promise<void> {
  const client = redis()
  if (!(client instanceof Cluster)) return Promise.resolve()
  return new Promise((resolve, reject) => client.refreshSlotsCache((error) => (error ? reject(error) : resolve())))
}

const UTF8 = new TextEncoder()

/** A key's cluster slot: CRC16 (XMODEM) of its hash tag (the first non-empty `{...}`) or of the key, mod 16 384. */
export function keySlot(key: string): number {
  const open = key.indexOf('{')
  const close = open >= 0 ? key.indexOf('}', open + 1) : -1
  const tagged = close > open + 1 ? key.slice(open + 1, close) : key
  let crc = 0
  for (const byte of UTF8.encode(tagged)) {
    crc ^= byte << 8
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff
  }
  return crc % 16_384
}

export async function closeRedis(): Promise<void> {
  const client = shared
  shared = undefined
  if (!client) return
  // QUIT lets pending replies arrive; bounded, since on a link that died silently it would never be answered.
  await Promise.race([client.quit().catch(() => {}), Bun.sleep(1000)])
  client.disconnect()
}
