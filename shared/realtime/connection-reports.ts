// A product's connections, as the gateways report them while someone looks. Asking (realtime_connections_list) marks
// the product watched for CONNECTION_WATCH_MS; each gateway reads the watched products once every CONNECTION_REPORT_MS
// (one command) and, for those it has connections of, replaces its report: the connections (at most
// CONNECTIONS_REPORTED_MAX, oldest first) and their total. Nobody looking costs each gateway that one read a second and
// its connects nothing. A product's keys share the hash tag `{c:<productId>}` (one cluster slot: a report is one
// MULTI); the watch list is one key. Keys:
//
// | key                              | type | holds                                                                  |
// | -------------------------------- | ---- | ---------------------------------------------------------------------- |
// | rt:connwatch                     | zset | productId → until when (ms) its connections are wanted                 |
// | rt:{c:<productId>}:gws           | zset | gateway id → when its report expires (ms)                              |
// | rt:{c:<productId>}:gwn           | hash | gateway id → its connections of the product (all, reported or not)     |
// | rt:{c:<productId>}:conns:<gw>    | hash | connection id → JSON `{s: subject, t: connected at (ms), n: subscriptions, c: first channels}` |
import { redis } from '../redis/client'
import { orUnavailable, redisScript } from '../redis-script'

/** How often a gateway reports the watched products' connections (and how stale a report may be, plus a round trip). */
export const CONNECTION_REPORT_MS = 1000
/** How long one ask keeps a product watched: the console asks every 2 s while its view is open. */
export const CONNECTION_WATCH_MS = 15_000
/** A report lives this long unrefreshed: a gateway that died leaves the list within it. */
export const CONNECTION_REPORT_TTL_MS = 5000
/** Connections one gateway reports per product; the total says how many it has. */
export const CONNECTIONS_REPORTED_MAX = 1000
/** Channel names reported per connection (its first ones); `subscriptions` counts them all. */
export const CONNECTION_CHANNELS_SHOWN = 5
/** Gateways listed per product. */
export const GATEWAYS_LISTED_MAX = 100

const WATCH_KEY = 'rt:connwatch'
const tag = (productId: string) => `rt:{c:${productId}}`
const gatewaysKey = (productId: string) => `${tag(productId)}:gws`
const totalsKey = (productId: string) => `${tag(productId)}:gwn`
const connectionsKey = (productId: string, gateway: string) => `${tag(productId)}:conns:${gateway}`

export interface ReportedConnection {
  id: string
  /** The token's subject as rosters show it (`ext:alice`, `ext:console:…`). */
  subject: string
  /** When the connection's `connect` was accepted (ms since the epoch, the gateway's clock). */
  connectedAt: number
  subscriptions: number
  /** Its first CONNECTION_CHANNELS_SHOWN channels. */
  channels: string[]
}

const service = 'realtime connections'

/** The product's connections are wanted for the next CONNECTION_WATCH_MS (and the watch list loses what has expired). */
export async function watchConnections(productId: string, now = Date.now()): Promise<void> {
  await orUnavailable(service, () => redis().multi().zadd(WATCH_KEY, now + CONNECTION_WATCH_MS, productId).zremrangebyscore(WATCH_KEY, '-inf', now).exec())
}

/** The products whose connections are wanted now (at most 10 000: a watch list that long is an attack, not a console). */
export async function watchedProducts(now = Date.now()): Promise<string[]> {
  return orUnavailable(service, () => redis().zrangebyscore(WATCH_KEY, now, '+inf', 'LIMIT', 0, 10_000))
}

/** Replaces `gateway`'s report of the product's connections: `connections` (cut to the cap) of `total`. */
export async function reportConnections(gateway: string, productId: string, connections: ReportedConnection[], total: number, now = Date.now()): Promise<void> {
  const key = connectionsKey(productId, gateway)
  const fields = connections.slice(0, CONNECTIONS_REPORTED_MAX).flatMap((c) =>
    [c.id, JSON.stringify({ s: c.subject, t: c.connectedAt, n: c.subscriptions, c: c.channels.slice(0, CONNECTION_CHANNELS_SHOWN) })])
  const step = redis().multi().del(key)
  if (fields.length) step.hset(key, ...fields).pexpire(key, CONNECTION_REPORT_TTL_MS)
  step.zadd(gatewaysKey(productId), now + CONNECTION_REPORT_TTL_MS, gateway).pexpire(gatewaysKey(productId), CONNECTION_WATCH_MS)
    .hset(totalsKey(productId), gateway, total).pexpire(totalsKey(productId), CONNECTION_WATCH_MS)
  await orUnavailable(service, () => step.exec())
}

/** `gateway` has no report of the product any more (no connections left, or nobody looking). */
export async function withdrawConnections(gateway: string, productId: string): Promise<void> {
  await orUnavailable(service, () => redis().multi().del(connectionsKey(productId, gateway)).zrem(gatewaysKey(productId), gateway)
    .hdel(totalsKey(productId), gateway).exec())
}

export interface GatewayReport {
  gateway: string
  /** Its connections of the product, reported or not. */
  connections: number
  /** When its report expires (ms): it was made at most CONNECTION_REPORT_TTL_MS before. */
  expiresAt: number
}

/**
 * Takes gateways whose report expired off the product's list and totals (up to 100 a call, atomically: one that
 * reported again meanwhile stays). Reports only ever add to both while the product is watched, so without this a product
 * watched for days under autoscaling would keep every gateway that ever ran.
 */
const pruneScript = redisScript<number>('realtime connections', `
local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'LIMIT', 0, 100)
if #dead > 0 then
  redis.call('ZREM', KEYS[1], unpack(dead))
  redis.call('HDEL', KEYS[2], unpack(dead))
end
return #dead`)

/** The gateways reporting connections of the product now, by id (at most GATEWAYS_LISTED_MAX). */
export async function reportingGateways(productId: string, now = Date.now()): Promise<GatewayReport[]> {
  await pruneScript.run([gatewaysKey(productId), totalsKey(productId)], [now])
  const flat = await orUnavailable(service, () => redis().zrangebyscore(gatewaysKey(productId), now, '+inf', 'WITHSCORES', 'LIMIT', 0, GATEWAYS_LISTED_MAX))
  const ids: string[] = []
  const expiries: number[] = []
  for (let i = 0; i + 1 < flat.length; i += 2) {
    ids.push(flat[i]!)
    expiries.push(Number(flat[i + 1]))
  }
  if (!ids.length) return []
  const totals = await orUnavailable(service, () => redis().hmget(totalsKey(productId), ...ids))
  return ids.map((gateway, i) => ({ gateway, connections: Number(totals[i] ?? 0), expiresAt: expiries[i]! })).sort((a, b) => (a.gateway < b.gateway ? -1 : 1))
}

/** The connections `gateway` reports of the product, by id (at most CONNECTIONS_REPORTED_MAX). */
export async function reportedConnections(productId: string, gateway: string): Promise<ReportedConnection[]> {
  const fields = await orUnavailable(service, () => redis().hgetall(connectionsKey(productId, gateway)))
  const out: ReportedConnection[] = []
  for (const [id, text] of Object.entries(fields)) {
    try {
      const c = JSON.parse(text) as { s: string; t: number; n: number; c: string[] }
      out.push({ id, subject: c.s, connectedAt: c.t, subscriptions: c.n, channels: c.c })
    } catch {
      // A field this code did not write: not shown.
    }
  }
  return out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
}
