// What the metrics read of this process's Redis connections (shared/metrics/pools.ts): every connection it holds, by
// role and state, and the commands of its command connection not answered yet.
import { Cluster, type Redis } from 'ioredis'
import { offlineQueueLength } from './ioredis-internals'

type Role = 'command' | 'dedicated'

/** Every connection this process holds (until ended), command or dedicated. */
const open = new Map<Redis | Cluster, Role>()

/** Counts `client` in redisUsage until it ends (shared/redis/client.ts calls it for each connection it makes). */
export function trackConnection(client: Redis | Cluster, role: Role): void {
  open.set(client, role)
  client.once('end', () => open.delete(client))
}

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

/** This process's Redis connections and their commands, read now (metrics). */
export function redisUsage(): RedisUsage {
  const usage: RedisUsage = { connections: [], commands: { sent: 0, queued: 0 } }
  for (const [client, role] of open) {
    usage.connections.push({ role, ready: client.status === 'ready' })
    if (role !== 'command') continue
    const nodes = client instanceof Cluster ? client.nodes('all') : [client]
    usage.commands.queued += offlineQueueLength(client)
    for (const node of nodes) {
      usage.commands.sent += node.commandQueue.length
      if (node !== client) usage.commands.queued += offlineQueueLength(node)
    }
  }
  return usage
}
