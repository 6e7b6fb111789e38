// Where keys live on a Redis Cluster, as the process's command connection knows it: whether this process runs on one,
// the node that holds a key's slot, the command connection to one node, and re-reading the slot map. On one Redis each
// answers so that callers need no second path (no node, the one connection, nothing to re-read).
import { Cluster, type Redis } from 'ioredis'
import { config } from '../config'
import { redis } from './client'
import { nodeAddress } from './cluster-guard'
import { keySlot } from './key-slot'
import { clusterNodesOf } from './url'

/** Whether this process's Redis is a cluster. */
export const onCluster = () => clusterNodesOf(config.redisUrl) !== null

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
