// Redis connections. The command connection is shared; blocking readers and subscribers take their own.
//
// Outage behaviour (docs/architecture.md, "Outages"): every command on the command connection answers within
// config.redis.commandTimeoutMs (a stalled link times out; on one Redis up to about a quarter later, timeOutCommands);
// once the connection has been ready, commands issued while it is down fail at once instead of queueing; after a
// timeout or a connection failure a breaker fails new commands at once for a cool-down, so one request never waits out
// several timeouts in a row. ioredis reconnects by itself within half a second of Redis's return, and the first
// command after the cool-down closes the breaker. On a Redis Cluster
// each node has its own breaker and its own dead-link healing, so a node that is down costs only the slots it serves.
// Under Sentinel every connection asks the sentinels where the master is at each reconnection, and drops itself when
// they announce a switch (sentinelOptions); meanwhile commands fail at once, as while one Redis is down.
// The guards live beside this module: shared/redis/guard.ts (one Redis), shared/redis/cluster-guard.ts (a cluster);
// where keys live on a cluster, shared/redis/cluster.ts; what the metrics read, shared/redis/usage.ts.
import Redis, { Cluster, type RedisOptions } from 'ioredis'
import { Breaker } from '../breaker'
import { config } from '../config'
import { log } from '../log'
import { guardClusterNodes, queueOnlyForNodesNotYetUp } from './cluster-guard'
import { guardCommands } from './guard'
import { coalesceWrites, rememberCommandFlags, retarget, setOfflineQueue, timeOutCommands, traceOnlyWhenSubscribed } from './ioredis-internals'
import { trackConnection } from './usage'
import { clusterNodesOf, sentinelOf, type SentinelTarget } from './url'

traceOnlyWhenSubscribed()
rememberCommandFlags()

/**
 * A connection to one Redis (REDIS_URL `redis://`, or `redis+sentinel://` for the master Sentinel names now), or to a
 * Redis Cluster through ioredis' Cluster client (`redis+cluster://`). The URL forms: shared/redis/url.ts.
 */
export type RedisClient = Redis | Cluster

function connect(name: string, options: RedisOptions = {}, url = config.redisUrl, role: 'command' | 'dedicated' = 'dedicated'): RedisClient {
  const redisOptions: RedisOptions = {
    connectionName: name,
    connectTimeout: Math.max(1000, config.redis.commandTimeoutMs),
    retryStrategy: (attempt) => Math.min(attempt * 50, 500),
    ...options,
  }
  const nodes = clusterNodesOf(url)
  const sentinel = nodes ? null : sentinelOf(url)
  const client: RedisClient = nodes
    ? new Cluster(nodes, {
      redisOptions,
      // Reads and writes on the masters: a replica may lag, and history must never go back.
      scaleReads: 'master',
      // A command whose node is down fails at once (503, Retry-After), as on one Redis, instead of being retried on a
      // random node for up to maxRedirections x 100 ms; commands follow a failover through the slot map, read again
      // after a MOVED, after a node fails (guardClusterNodes) and every slotsRefreshInterval.
      retryDelayOnFailover: 0,
      // The same for CLUSTERDOWN (a node rejoining after a restart answers it until the cluster agrees again).
      retryDelayOnClusterDown: 0,
      // Read the slot map every 5 s besides (ioredis 6 has no periodic refresh unless asked): a node that returned, or a
      // replica promoted while this process sent nothing its way, is found.
      slotsRefreshInterval: 5000,
      clusterRetryStrategy: (attempt) => Math.min(attempt * 50, 500),
      enableOfflineQueue: options.enableOfflineQueue ?? true,
    })
    : sentinel
      ? new Redis({ ...sentinelOptions(sentinel), lazyConnect: false, ...redisOptions })
      : new Redis(url, { lazyConnect: false, ...redisOptions })
  trackConnection(client, role)
  // ioredis reconnects by itself; without a listener every failed attempt is an "unhandled error" on stderr.
  let lastLogged = 0
  client.on('error', (error: Error) => {
    if (Date.now() - lastLogged < 5000) return
    lastLogged = Date.now()
    log('warn', 'redis unavailable', { connection: name, error: error.message })
  })
  return client
}

/**
 * A connection to the master Sentinel names: asked of the sentinels at every (re)connection, and checked to answer
 * `role:master` before it is used (ioredis' ready check; a demoted node named by a stale sentinel is left and the next
 * sentinel asked). The rest of this module treats it as one Redis: one breaker, the same timeouts.
 */
function sentinelOptions(target: SentinelTarget): RedisOptions {
  return {
    sentinels: target.sentinels,
    name: target.name,
    db: target.db,
    username: target.username,
    password: target.password,
    role: 'master',
    // No sentinel answers: ask them all again soon, as for the master itself (ioredis' default waits up to 1 s).
    sentinelRetryStrategy: (attempt) => Math.min(attempt * 50, 500),
    // A sentinel that accepts the connection and answers nothing must not hold the reconnection up for good.
    sentinelCommandTimeout: Math.max(1000, config.redis.commandTimeoutMs),
    // A `+switch-master` heard from any sentinel drops the connection at once, and it is made again to the master the
    // sentinels name now. Without it a process stays on an old master that is still up (a failover asked for, a
    // partition): it takes writes until Sentinel turns it into a replica, seconds after the switch, and loses them then.
    failoverDetector: true,
    // A write that reaches a demoted master all the same (before the switch is heard) is refused READONLY: drop the
    // connection too. The command is not sent again (ioredis' `2`): it failed (503), and its caller decides.
    reconnectOnError: (error) => error.message.startsWith('READONLY '),
  }
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
    // One Redis: the same deadline kept by a sweep instead of a timer per command (timeOutCommands, below).
    ...(clusterNodesOf(url) ? { commandTimeout: config.redis.commandTimeoutMs } : {}),
    maxRetriesPerRequest: 1,
    // A command that timed out was already answered 503; sending it again on the next connection would run a write
    // its caller was told failed (a publish stored twice once the client retries), and, counted as new, loop the healing.
    autoResendUnfulfilledCommands: false,
  }, url, 'command')
  // Queue commands only until the first connection (foreman starts processes in no order); after that a command sent
  // while Redis is down fails at once: a request should hear "unavailable" now, not after a reconnect backoff.
  if (client instanceof Cluster) {
    queueOnlyForNodesNotYetUp(client)
    guardClusterNodes(client)
  } else {
    client.once('ready', () => setOfflineQueue(client, false))
    // The commands of the requests a worker serves at once go out in one write: a socket write costs the worker more
    // than the command (the token route's IP limit spent a third of its CPU there; docs/performance.md, "Publish").
    coalesceWrites(client)
    timeOutCommands(client, config.redis.commandTimeoutMs)
    guardCommands(client, new Breaker('redis', config.redis.commandTimeoutMs))
  }
  return client
}

/**
 * A dedicated connection for SUBSCRIBE (no command timeout); the caller closes it. On a cluster, a plain connection to
 * one seed node, and on each reconnect attempt the next one: a cluster PUBLISH reaches every node, so any node that is
 * up serves, and a plain link keeps the liveness checks honest (ioredis' cluster subscriber moves to another node
 * silently, losing what was published meanwhile without a sign; here the caller hears the close and the resubscribe).
 */
export function dedicatedRedis(name: string, options: RedisOptions = {}): Redis {
  const nodes = clusterNodesOf(config.redisUrl)
  if (!nodes) return connect(name, options) as Redis
  let current = 0
  const client = connect(name, {
    ...options,
    retryStrategy: (attempt) => {
      current = (current + 1) % nodes.length
      retarget(client, nodes[current]!)
      return Math.min(attempt * 50, 500)
    },
  }, `redis://${nodes[0]!.host}:${nodes[0]!.port}`) as Redis
  return client
}

/**
 * A dedicated connection for blocking reads (XREAD over several shard streams): to the process's Redis, or on a
 * cluster to the one node `node` ("host:port"; one XREAD cannot span nodes). The caller closes it.
 */
export function dedicatedReader(name: string, node: string | undefined, options: RedisOptions = {}): Redis {
  if (!node) {
    if (clusterNodesOf(config.redisUrl)) throw new Error('no cluster node holds this slot now (the cluster is failing over or broken)')
    return connect(name, options) as Redis
  }
  return connect(name, options, `redis://${node}`) as Redis
}

/** Ends the process's command connection (shutdown), letting pending replies arrive for up to a second. */
export async function closeRedis(): Promise<void> {
  const client = shared
  shared = undefined
  if (!client) return
  // QUIT lets pending replies arrive; bounded, since on a link that died silently it would never be answered.
  await Promise.race([client.quit().catch(() => {}), Bun.sleep(1000)])
  client.disconnect()
}
