// A Redis Cluster command connection's guard (docs/architecture.md, "Outages"): one breaker per node on that node's
// own connection (shared/redis/guard.ts does the admitting and judging), redirected commands judged against the node
// that had them, and the offline-queue rule per node: a command waits for a node that has never been up, and fails at
// once for one that has been up and is not now.
import { Cluster, type Redis } from 'ioredis'
import { Breaker } from '../breaker'
import { config } from '../config'
import { backendUnreachable } from '../errors'
import { admitCommands, judge, Refused, type ServerHealth } from './guard'
import { interceptCommands, offlineQueueWhile, replaceSettlers, setOfflineQueue, type PendingCommand } from './ioredis-internals'

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
export function guardClusterNodes(cluster: Cluster): void {
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
    replaceSettlers(command, wrapped)
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
    if (known.upOnce) setOfflineQueue(connection, false)
    connection.once('ready', () => {
      known.upOnce = true
      setOfflineQueue(connection, false)
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
export function nodeBreakers(client: Redis | Cluster): ReadonlyMap<string, boolean> {
  const nodes = client instanceof Cluster ? clusterHealth.get(client) : undefined
  return new Map([...(nodes ?? [])].map(([node, health]) => [node, health.breaker.isOpen]))
}

/**
 * The command connection's queueing rule (shared/redis/client.ts) per node on a cluster: a command for a node that has never been up yet (a start, a node just named by
 * the slot map after a failover) waits for it, within the command timeout; a command for a node that has been up and
 * is not now fails at once (guardClusterNodes sets each node connection's own switch). The cluster client's switch
 * cannot say this per node: off, it refused every command for a node while its first connection was being made, so
 * publishes sent together after a start or a failover answered 503 with every node up (found by
 * scripts/bench/publish.ts on a cluster). So it stays on while the cluster is ready (the node connections decide) and,
 * when the cluster itself is not ready, is on only until the first time it was: past that, a command fails at once.
 * A master's connection is made as soon as the slot map names it, not by the first command for it; replicas stay lazy
 * (reads go to masters).
 */
export function queueOnlyForNodesNotYetUp(cluster: Cluster): void {
  let everReady = false
  cluster.once('ready', () => (everReady = true))
  offlineQueueWhile(cluster, () => cluster.status === 'ready' || !everReady)
  // A command the cluster client queues itself (before it is ready) gets its timeout now: ioredis arms it only once the
  // command reaches a node's connection, and a worker started while the cluster is unreachable would wait unbounded.
  interceptCommands(cluster, (command, _stream, sendOn) => {
    if (cluster.status !== 'ready') command.setTimeout(config.redis.commandTimeoutMs)
    return sendOn()
  })
  cluster.on('+node', (connection: Redis) => {
    if (!connection.options.readOnly && connection.status === 'wait') connection.connect().catch(() => {}) // errors: 'error' handler
  })
}

/** A cluster node connection's address as the slot map names it, "host:port". */
export const nodeAddress = (connection: Redis) => `${connection.options.host}:${connection.options.port}`
