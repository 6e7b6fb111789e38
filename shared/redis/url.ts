// REDIS_URL's three forms: `redis://` one Redis, `redis+cluster://` a Redis Cluster by its seed nodes, and
// `redis+sentinel://` a master that Redis Sentinel watches and fails over. Parsed strictly: a URL that fits none of the
// forms' rules is refused at start with the rule it breaks, never half-understood.

export interface HostPort {
  host: string
  port: number
}

const CLUSTER_SCHEME = 'redis+cluster:'
const SENTINEL_SCHEME = 'redis+sentinel:'

/** `host:port`, or null. */
function hostPortOf(text: string): HostPort | null {
  const match = /^([^:]+):(\d{1,5})$/.exec(text.trim())
  return match ? { host: match[1]!, port: Number(match[2]) } : null
}

/**
 * The seed nodes of a Redis Cluster URL, `redis+cluster://host:port,host:port[/]` (any reachable node is enough: the
 * client learns the others), or null for another form. A cluster has one database: no `/<index>`.
 * @example clusterNodesOf('redis+cluster://127.0.0.1:7000,127.0.0.1:7001') // [{host:'127.0.0.1',port:7000}, …]
 */
export function clusterNodesOf(url: string): HostPort[] | null {
  if (!url.startsWith(`${CLUSTER_SCHEME}//`)) return null
  const rest = url.slice(CLUSTER_SCHEME.length + 2).replace(/\/$/, '')
  if (rest.includes('/') || rest.includes('@') || rest === '') {
    throw new Error(`REDIS_URL ${url}: a cluster URL is redis+cluster://host:port[,host:port...], without credentials or a database index`)
  }
  return rest.split(',').map((node) => {
    const address = hostPortOf(node)
    if (!address) throw new Error(`REDIS_URL ${url}: "${node}" is not host:port`)
    return address
  })
}

/** A master watched by Redis Sentinel, as a `redis+sentinel://` URL names it. */
export interface SentinelTarget {
  /** Sentinels to ask where the master is now, in order; any one that answers is enough (the client learns the rest). */
  sentinels: HostPort[]
  /** The master's name in the sentinels' configuration (`sentinel monitor <name> <ip> <port> <quorum>`). */
  name: string
  /** The database index on the master; 0 unless the URL gives one. */
  db: number
  /** Credentials for the master and its replicas (percent-decoded); the sentinels themselves are asked without. */
  username?: string
  password?: string
}

export const SENTINEL_FORM = 'redis+sentinel://[[username]:password@]host:port[,host:port...]/<master-name>[/<db>]'

/**
 * The master a Sentinel URL names, or null for another form:
 * `redis+sentinel://[[username]:password@]host:port[,host:port...]/<master-name>[/<db>]`, the hosts being sentinels
 * (not the master: the client asks them where it is, again after each failover).
 * @example sentinelOf('redis+sentinel://:s3cret@10.0.0.1:26379,10.0.0.2:26379/main/2')
 * // { sentinels: [{host:'10.0.0.1',port:26379}, …], name: 'main', db: 2, password: 's3cret' }
 */
export function sentinelOf(url: string): SentinelTarget | null {
  if (!url.startsWith(`${SENTINEL_SCHEME}//`)) return null
  const rest = url.slice(SENTINEL_SCHEME.length + 2)
  const slash = rest.indexOf('/')
  const authority = slash < 0 ? rest : rest.slice(0, slash)
  const at = authority.lastIndexOf('@')
  // The password is never repeated in an error: the message is logged.
  const shown = at < 0 ? url : `${SENTINEL_SCHEME}//***@${rest.slice(at + 1)}`
  const refuse = (why: string) => new Error(`REDIS_URL ${shown}: ${why}; a Sentinel URL is ${SENTINEL_FORM}`)

  const target: SentinelTarget = { sentinels: [], name: '', db: 0 }
  if (at >= 0) {
    const credentials = authority.slice(0, at)
    const colon = credentials.indexOf(':')
    if (colon < 0 || colon === credentials.length - 1) throw refuse('credentials are [username]:password, with a password')
    try {
      if (colon > 0) target.username = decodeURIComponent(credentials.slice(0, colon))
      target.password = decodeURIComponent(credentials.slice(colon + 1))
    } catch {
      throw refuse('the credentials are not valid percent-encoding')
    }
  }
  const hosts = authority.slice(at + 1)
  if (hosts === '') throw refuse('no sentinel is named')
  for (const host of hosts.split(',')) {
    const address = hostPortOf(host)
    if (!address) throw refuse(`"${host}" is not host:port`)
    target.sentinels.push(address)
  }
  const [name = '', db, ...extra] = (slash < 0 ? '' : rest.slice(slash + 1)).replace(/\/$/, '').split('/')
  if (!/^[A-Za-z0-9._-]+$/.test(name)) throw refuse(name ? `"${name}" is not a master name (letters, digits, . _ -)` : 'no master name')
  target.name = name
  if (db !== undefined) {
    if (!/^\d{1,5}$/.test(db)) throw refuse(`"${db}" is not a database index`)
    target.db = Number(db)
  }
  if (extra.length) throw refuse('nothing follows the database index')
  return target
}

/**
 * The database a REDIS_URL selects: a `redis://` URL's path (`/2`), a sentinel URL's `/<db>`, 0 on a cluster (which
 * has only database 0) or when none is named.
 */
export function databaseIndex(url: string): number {
  if (clusterNodesOf(url)) return 0
  const sentinel = sentinelOf(url)
  if (sentinel) return sentinel.db
  const path = /^rediss?:\/\/[^/]*\/(\d+)/.exec(url)
  return path ? Number(path[1]) : 0
}
