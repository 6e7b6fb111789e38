// Redis connections. The command connection is shared; blocking readers and subscribers take their own.
//
// Outage behaviour (docs/architecture.md, "Outages"): every command on the command connection answers within
// config.redis.commandTimeoutMs (a stalled link times out); once the connection has been ready, commands issued while it
// is down fail at once instead of queueing; after a timeout or a connection failure a breaker fails new commands at
// once for a cool-down, so one request never waits out several timeouts in a row. ioredis reconnects by itself within
// half a second of Redis's return, and the first command after the cool-down closes the breaker. On a Redis Cluster
// each node has its own breaker and its own dead-link healing, so a node that is down costs only the slots it serves.
// Under Sentinel every connection asks the sentinels where the master is at each reconnection, and drops itself when
// they announce a switch (sentinelOptions); meanwhile commands fail at once, as while one Redis is down.
import Redis, { Cluster, type RedisOptions } from 'ioredis'
import { countBackendError, redisErrorKind } from './backend-errors'
import { Breaker } from './breaker'
import { config } from './config'
import { backendUnreachable } from './errors'
import { log } from './log'
import { clusterNodesOf, sentinelOf, type SentinelTarget } from './redis-url'


/**
 * A connection to one Redis (REDIS_URL `redis://`, or `redis+sentinel://` for the master Sentinel names now), or to a
 * Redis Cluster through ioredis' Cluster client (`redis+cluster://`). The URL forms: shared/redis-url.ts.
 */
export type RedisClient = Redis | Cluster

export { clusterNodesOf, sentinelOf } from './redis-url'

/** Whether this process's Redis is a cluster. */
export const onCluster = () => clusterNodesOf(config.redisUrl) !== null

interface PendingCommand {
  name: string
  promise: Promise<unknown>
  resolve(value: unknown): unknown
  reject(error: Error): unknown
  /** Set by ioredis once its caller has the answer (a reply, a final error, a timeout). */
  isSettled?: boolean
  /** Arms ioredis' command timeout (once: a second call keeps the first timer). */
  setTimeout(ms: number): void
}

type SendCommand = (command: PendingCommand, stream?: object, ...rest: unknown[]) => unknown

/** One Redis server as the guard sees it: its breaker, and how many commands in a row it left unanswered. */
interface ServerHealth {
  breaker: Breaker
  timeoutsInARow: number
  /** The connection to replace when the server answers nothing on it. */
  connection: Redis | Cluster
  /** A cluster node whose connection has been up at least once: a new connection to it refuses commands until up. */
  upOnce?: boolean
}

/** A command refused by a breaker: the same words as a dead link, so every caller maps it alike (503). */
class Refused extends Error {
  constructor() {
    super('Connection is closed.')
  }
}

/**
 * Wraps `client.sendCommand` (ioredis funnels all commands, pipelines too, through it): a command is refused at once
 * while `health.breaker` is open. A pipeline (MULTI included) is admitted or refused as a whole, on its first command:
 * refusing only part of one would leave a MULTI open on the connection and wreck every command after it. An ASKING
 * (ioredis' cluster client sends it, never awaited, right before the command an ASK redirect sends on) is admitted or
 * refused with that command, so an open breaker's probe is not spent on it alone; whatever becomes of it (refused,
 * timed out, its connection lost) is the command's to report, never an unhandled rejection.
 * `sent(command)` is told of every command that passes.
 */
function admitCommands(client: Redis | Cluster, health: ServerHealth, sent: (command: PendingCommand) => void): void {
  // A cluster's sendCommand takes a third argument (the node a pipeline chose): passed on untouched.
  const send = client.sendCommand.bind(client) as SendCommand
  const pipelines = new WeakMap<object, boolean>() // pipeline writer → admitted
  const admit = (stream: object | undefined) => {
    if (!stream) return health.breaker.tryPass()
    let admitted = pipelines.get(stream)
    if (admitted === undefined) pipelines.set(stream, (admitted = health.breaker.tryPass()))
    return admitted
  }
  let askingAdmitted: boolean | undefined // the verdict on an ASKING, for the command sent right after it
  ;(client as unknown as { sendCommand: SendCommand }).sendCommand = (command, stream, ...rest) => {
    // Its caller has the answer already (it timed out, perhaps while queued or waiting for a retry): writing it now
    // would run a command its caller was told had failed.
    if (command.isSettled) return command.promise
    const asking = !stream && command.name === 'asking'
    if (asking) command.promise.catch(() => {})
    // Only while ready: the handshake of a reconnect (CLIENT SETNAME, SELECT, the ready check) must pass, or the breaker
    // would keep the connection from ever coming back. While not ready, ioredis refuses user commands at once itself.
    if (client.status === 'ready') {
      const admitted = askingAdmitted ?? admit(stream)
      askingAdmitted = asking ? admitted : undefined
      if (!admitted) {
        command.reject(new Refused())
        return command.promise
      }
    }
    sent(command)
    return send(command, stream, ...rest)
  }
}

/** What one command's outcome says about the server that answered it (or did not). */
function judge(health: ServerHealth, error?: Error): void {
  if (!error) {
    health.timeoutsInARow = 0
    health.breaker.succeeded()
    return
  }
  const kind = redisErrorKind(error, backendUnreachable(error))
  if (kind) countBackendError('redis', kind)
  if (!/timed out/i.test(error.message)) {
    health.timeoutsInARow = 0
    // An error reply is an answer: it closes the breaker as a success would. (Else a probe answered NOSCRIPT by a
    // restarted Redis would leave it open for good: the EVAL that loads the script is refused, and so on each probe.)
    if (!backendUnreachable(error)) health.breaker.succeeded()
  } else if (++health.timeoutsInARow >= DEAD_AFTER_TIMEOUTS && health.connection.status === 'ready') {
    // Nothing has come back for several timeouts in a row: the connection may have died without a reset (no RST
    // ever arrives on a dead path), and it would time out forever. A new one costs little and heals that.
    health.timeoutsInARow = 0
    log('warn', 'redis answers nothing on this connection; reconnecting', { connection: nameOf(health.connection) })
    health.connection.disconnect(true)
  }
  if (backendUnreachable(error)) health.breaker.failed()
}

/** One Redis: every command goes through one breaker. */
function guardCommands(client: Redis, breaker: Breaker): void {
  const health: ServerHealth = { breaker, timeoutsInARow: 0, connection: client }
  // ioredis passes a command through sendCommand again when it flushes its offline queue: judge each outcome once.
  const watched = new WeakSet<PendingCommand>()
  admitCommands(client, health, (command) => {
    if (watched.has(command)) return
    watched.add(command)
    command.promise.then(() => judge(health), (error: Error) => judge(health, error))
  })
}

/** Each cluster command connection's node health, by "host:port" (read by nodeBreakers). */
const clusterHealth = new WeakMap<Cluster, Map<string, ServerHealth>>()

/** Where a command is on its way through the cluster. */
interface Route {
  /** The node it was written to last and has not answered yet. */
  writtenTo?: ServerHealth
  /** The node ("host:port") the last MOVED or ASK named, while the command is on its way there. */
  redirectedTo?: string
  /** The resolve and reject the guard put on the command (a pipeline's retry replaces them: they are put on again). */
  wrapped?: Pick<PendingCommand, 'resolve' | 'reject'>
}

/** A redirect reply: `MOVED <slot> <host:port>` or `ASK <slot> <host:port>`. */
const REDIRECT = /^(?:MOVED|ASK) \d+ (\S+)$/

/**
 * A cluster: one breaker per node, on that node's own connection, so a node that is down or silent costs only the
 * slots it serves; the other nodes' commands go on. Which node an outcome is judged against:
 * - A command written to a node is judged by what that node did with it (answered, a MOVED or ASK included; left it
 *   unanswered past the timeout; lost it with its connection), against that node, even if its slot has moved since: in
 *   a failover, the commands left unanswered on the old master must not open the promoted replica's breaker. A
 *   redirected command passes several nodes, and each is judged by its own part, once.
 * - A command the client refuses on its way to the node a MOVED or ASK named (that node's connection is down) is
 *   judged against that node: it was refused for it, before reaching it.
 * - A refusal by a breaker is not judged (counted as a failure, it would push the cool-down on for as long as commands
 *   come, and the probe would never pass), and a command the client refuses before writing it anywhere is not seen.
 * A node's health is kept across its reconnections (ioredis ends a failed node's connection and makes a new one to the
 * same address) and dropped once the node has neither a connection nor a place in the slot map (removed, or replaced
 * by a node at another address), so a long-lived process keeps one entry per node the cluster has now.
 */
function guardClusterNodes(cluster: Cluster): void {
  const nodes = new Map<string, ServerHealth>()
  clusterHealth.set(cluster, nodes)
  const routes = new WeakMap<PendingCommand, Route>()
  // A node that fails may be failing over: the slot map is read again (at most once a second) instead of waiting for
  // the periodic refresh, so commands reach a promoted replica soon after the cluster has made it master.
  let refreshedAt = 0
  const failed = (health: ServerHealth, error: Error) => {
    judge(health, error)
    if (!backendUnreachable(error) || Date.now() - refreshedAt < 1000) return
    refreshedAt = Date.now()
    cluster.refreshSlotsCache()
  }
  const outcome = (route: Route, error?: Error) => {
    const { writtenTo, redirectedTo } = route
    route.writtenTo = route.redirectedTo = undefined
    if (error instanceof Refused) return
    if (writtenTo) {
      route.redirectedTo = error && REDIRECT.exec(error.message)?.[1]
      if (error) failed(writtenTo, error)
      else judge(writtenTo)
    } else if (error && redirectedTo) {
      const target = nodes.get(redirectedTo)
      if (target) failed(target, error)
    }
  }
  /** Judges each outcome as it arrives, before ioredis acts on it (a redirect sends the command on at once). */
  const routeOf = (command: PendingCommand): Route => {
    let route = routes.get(command)
    if (!route) routes.set(command, (route = {}))
    if (route.wrapped?.reject === command.reject) return route
    const { resolve, reject } = command
    const wrapped: Route['wrapped'] = {
      resolve: (value) => {
        outcome(route)
        return command.isSettled ? command.promise : resolve(value)
      },
      reject: (error) => {
        outcome(route, error)
        // A late reply to a command that timed out is never acted on: following a MOVED now would run, on another node
        // and perhaps seconds later, a write its caller was told had failed.
        return command.isSettled ? command.promise : reject(error)
      },
    }
    route.wrapped = wrapped
    command.resolve = wrapped.resolve
    command.reject = wrapped.reject
    return route
  }
  cluster.on('+node', (connection: Redis) => {
    const node = nodeAddress(connection)
    let health = nodes.get(node)
    if (health) health.connection = connection // a new connection to a node seen before keeps its breaker
    else nodes.set(node, (health = { breaker: new Breaker(`redis ${node}`, config.redis.commandTimeoutMs), timeoutsInARow: 0, connection }))
    // A node not up yet holds its commands (within the command timeout) until its first connection is made; one that
    // has been up refuses them at once while it is not (ioredis makes a new connection object for a node that failed).
    const known = health
    if (known.upOnce) connection.options.enableOfflineQueue = false
    connection.once('ready', () => {
      known.upOnce = true
      connection.options.enableOfflineQueue = false
    })
    admitCommands(connection, health, (command) => {
      const route = routeOf(command)
      route.writtenTo = health
      route.redirectedTo = undefined
    })
  })
  const forgetGone = () => {
    const present = new Set(cluster.nodes('all').map(nodeAddress))
    for (const owners of new Set(cluster.slots)) for (const node of owners ?? []) present.add(node) // one array per range
    for (const [node, health] of nodes) {
      if (present.has(node)) continue
      health.breaker.dispose() // else an open one would count in platform_breaker_open forever
      nodes.delete(node)
    }
  }
  cluster.on('-node', forgetGone)
  cluster.on('refresh', forgetGone)
}

/**
 * Whether each node's breaker is open, by "host:port", on a cluster command connection (empty on one Redis): the nodes
 * the guard keeps health for, for tests.
 */
export function nodeBreakers(client: RedisClient): ReadonlyMap<string, boolean> {
  const nodes = client instanceof Cluster ? clusterHealth.get(client) : undefined
  return new Map([...(nodes ?? [])].map(([node, health]) => [node, health.breaker.isOpen]))
}

/** A cluster node connection's address as the slot map names it, "host:port". */
const nodeAddress = (connection: Redis) => `${connection.options.host}:${connection.options.port}`

/** Command timeouts in a row, with no reply in between, after which the command connection is replaced. */
const DEAD_AFTER_TIMEOUTS = 3

const nameOf = (client: RedisClient) => (client instanceof Cluster ? client.options.redisOptions?.connectionName : client.options.connectionName)

/** Every connection this process holds (until ended), command or dedicated: read by the metrics (redisUsage). */
const open = new Map<RedisClient, 'command' | 'dedicated'>()

/** What the metrics read of this process's Redis connections now: see redisUsage. */
export interface RedisUsage {
  /** Connections by role and whether each is ready (a cluster client counts once, by its own state). */
  connections: { role: 'command' | 'dedicated'; ready: boolean }[]
  /**
   * Commands of the command connections (a process has one: `redis()`) not answered yet: `sent` (written, awaiting the
   * reply: ioredis' commandQueue, per node on a cluster) and `queued` (ioredis' offline queue: commands held until the
   * connection is up, which a command connection does only until its first connection).
   */
  commands: { sent: number; queued: number }
}

/** ioredis' offline queue is not in its typings; its length is read, never touched. */
const offlineOf = (client: RedisClient) => (client as unknown as { offlineQueue?: { length: number } }).offlineQueue?.length ?? 0

/** This process's Redis connections and their commands, read now (metrics). */
export function redisUsage(): RedisUsage {
  const usage: RedisUsage = { connections: [], commands: { sent: 0, queued: 0 } }
  for (const [client, role] of open) {
    usage.connections.push({ role, ready: client.status === 'ready' })
    if (role !== 'command') continue
    const nodes = client instanceof Cluster ? client.nodes('all') : [client]
    usage.commands.queued += offlineOf(client)
    for (const node of nodes) {
      usage.commands.sent += node.commandQueue.length
      if (node !== client) usage.commands.queued += offlineOf(node)
    }
  }
  return usage
}

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
  open.set(client, role)
  client.once('end', () => open.delete(client))
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
    commandTimeout: config.redis.commandTimeoutMs,
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
    client.once('ready', () => (client.options.enableOfflineQueue = false))
    guardCommands(client, new Breaker('redis', config.redis.commandTimeoutMs))
  }
  return client
}

/**
 * The same rule per node on a cluster: a command for a node that has never been up yet (a start, a node just named by
 * the slot map after a failover) waits for it, within the command timeout; a command for a node that has been up and
 * is not now fails at once (guardClusterNodes sets each node connection's own switch). The cluster client's switch
 * cannot say this per node: off, it refused every command for a node while its first connection was being made, so
 * publishes sent together after a start or a failover answered 503 with every node up (found by
 * scripts/bench/publish.ts on a cluster). So it stays on while the cluster is ready (the node connections decide) and,
 * when the cluster itself is not ready, is on only until the first time it was: past that, a command fails at once.
 * A master's connection is made as soon as the slot map names it, not by the first command for it; replicas stay lazy
 * (reads go to masters).
 */
function queueOnlyForNodesNotYetUp(cluster: Cluster): void {
  let everReady = false
  cluster.once('ready', () => (everReady = true))
  Object.defineProperty(cluster.options, 'enableOfflineQueue', {
    get: () => cluster.status === 'ready' || !everReady,
    set: () => {},
    configurable: true,
  })
  // A command the cluster client queues itself (before it is ready) gets its timeout now: ioredis arms it only once the
  // command reaches a node's connection, and a worker started while the cluster is unreachable would wait unbounded.
  const send = cluster.sendCommand.bind(cluster) as SendCommand
  ;(cluster as unknown as { sendCommand: SendCommand }).sendCommand = (command, ...rest) => {
    if (cluster.status !== 'ready') command.setTimeout(config.redis.commandTimeoutMs)
    return send(command, ...rest)
  }
  cluster.on('+node', (connection: Redis) => {
    if (!connection.options.readOnly && connection.status === 'wait') connection.connect().catch(() => {}) // errors: 'error' handler
  })
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
      // ioredis reads host and port from its options on every connect.
      current = (current + 1) % nodes.length
      Object.assign(client.options, nodes[current])
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
  return client.nodes('master').find((connection) => nodeAddress(connection) === node)
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
