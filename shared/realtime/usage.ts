// Realtime usage counted in memory by each process (publishes, deliveries and bytes per product, namespace and minute;
// connections opened, closed and at most open per product and minute) and flushed to PostgreSQL every
// REALTIME_USAGE_FLUSH_MS in one upsert per table: never a row per message. A flush that fails keeps its counts for the
// next one, up to a bound (then the oldest minutes are dropped and logged: usage is for charts, not billing).
import { hostname } from 'node:os'
import { config } from '../config'
import { sql } from '../db/client'
import { describeError, log } from '../log'
import { namespaceOf } from './names'

const MINUTE = 60_000
/** Most distinct (product, namespace, minute) keys held while PostgreSQL cannot take them. */
const MAX_KEYS = 100_000

interface Traffic { publishes: number; deliveries: number; bytes: number }
interface Connections { opened: number; closed: number; peak: number }

const minuteOf = (at: number) => Math.floor(at / MINUTE) * MINUTE

export class UsageRecorder {
  private traffic = new Map<string, Traffic>()
  private connections = new Map<string, Connections>()
  /** Open connections per product right now (for the per-minute peak). */
  private readonly open = new Map<string, number>()
  private timer: ReturnType<typeof setInterval> | undefined
  private flushing: Promise<void> | undefined

  constructor(private readonly source = `${hostname()}:${process.pid}`) {}

  /** Counts traffic of a channel: a publish (with its serialized bytes), or deliveries to local subscribers. */
  count(productId: string, channel: string, add: Partial<Traffic>, at = Date.now()): void {
    const key = `${productId}\u0000${namespaceOf(channel)}\u0000${minuteOf(at)}`
    let entry = this.traffic.get(key)
    if (!entry) {
      if (this.traffic.size >= MAX_KEYS) return
      this.traffic.set(key, (entry = { publishes: 0, deliveries: 0, bytes: 0 }))
    }
    entry.publishes += add.publishes ?? 0
    entry.deliveries += add.deliveries ?? 0
    entry.bytes += add.bytes ?? 0
  }

  /** A connection of `productId` opened (+1) or closed (-1). */
  connection(productId: string, change: 1 | -1, at = Date.now()): void {
    const now = Math.max(0, (this.open.get(productId) ?? 0) + change)
    if (now === 0) this.open.delete(productId)
    else this.open.set(productId, now)
    const entry = this.minute(productId, at)
    if (change === 1) entry.opened++
    else entry.closed++
    entry.peak = Math.max(entry.peak, now)
  }

  private minute(productId: string, at: number): Connections {
    const key = `${productId}\u0000${minuteOf(at)}`
    let entry = this.connections.get(key)
    if (!entry) this.connections.set(key, (entry = { opened: 0, closed: 0, peak: this.open.get(productId) ?? 0 }))
    return entry
  }

  start(intervalMs = config.realtime.usageFlushMs): void {
    this.timer ??= setInterval(() => void this.flush(), intervalMs)
  }

  /** Writes what was counted since the last flush. Concurrent calls share one flush. */
  flush(): Promise<void> {
    return (this.flushing ??= this.write().finally(() => (this.flushing = undefined)))
  }

  async stop(): Promise<void> {
    clearInterval(this.timer)
    this.timer = undefined
    await this.flush()
  }

  private async write(): Promise<void> {
    // Products with connections open keep a row for every minute, so a quiet minute still shows them connected.
    for (const productId of this.open.keys()) this.minute(productId, Date.now())
    const traffic = this.traffic
    const connections = this.connections
    this.traffic = new Map()
    this.connections = new Map()
    if (traffic.size === 0 && connections.size === 0) return
    const t = [...traffic].map(([key, v]) => {
      const [product, namespace, minute] = key.split('\u0000') as [string, string, string]
      return { product, namespace, minute, ...v }
    })
    const c = [...connections].map(([key, v]) => {
      const [product, minute] = key.split('\u0000') as [string, string]
      return { product, minute, ...v }
    })
    try {
      await sql.begin(async (tx) => {
        if (t.length) {
          await tx`
            insert into realtime_usage (product_id, namespace, minute, publishes, deliveries, bytes)
            select p::uuid, n, to_timestamp(m::bigint / 1000.0), pu, de, by
            from unnest(${t.map((r) => r.product)}::text[], ${t.map((r) => r.namespace)}::text[], ${t.map((r) => r.minute)}::text[],
                        ${t.map((r) => String(r.publishes))}::bigint[], ${t.map((r) => String(r.deliveries))}::bigint[], ${t.map((r) => String(r.bytes))}::bigint[])
              as x(p, n, m, pu, de, by)
            where exists (select 1 from products where id = x.p::uuid) -- a product deleted meanwhile is dropped, not retried forever
            on conflict (product_id, minute, namespace) do update set
              publishes = realtime_usage.publishes + excluded.publishes,
              deliveries = realtime_usage.deliveries + excluded.deliveries,
              bytes = realtime_usage.bytes + excluded.bytes`
        }
        if (c.length) {
          await tx`
            insert into realtime_connection_minutes (product_id, gateway, minute, opened, closed, peak)
            select p::uuid, ${this.source}, to_timestamp(m::bigint / 1000.0), o, cl, pk
            from unnest(${c.map((r) => r.product)}::text[], ${c.map((r) => r.minute)}::text[], ${c.map((r) => r.opened)}::int[],
                        ${c.map((r) => r.closed)}::int[], ${c.map((r) => r.peak)}::int[]) as x(p, m, o, cl, pk)
            where exists (select 1 from products where id = x.p::uuid)
            on conflict (product_id, minute, gateway) do update set
              opened = realtime_connection_minutes.opened + excluded.opened,
              closed = realtime_connection_minutes.closed + excluded.closed,
              peak = greatest(realtime_connection_minutes.peak, excluded.peak)`
        }
      })
    } catch (error) {
      // Keep the counts for the next flush (merged with what arrived meanwhile), within the bound.
      for (const [key, v] of traffic) this.mergeTraffic(key, v)
      for (const [key, v] of connections) this.mergeConnections(key, v)
      log('warn', 'realtime usage not flushed; kept for the next flush', describeError(error))
    }
  }

  private mergeTraffic(key: string, v: Traffic): void {
    const entry = this.traffic.get(key)
    if (entry) {
      entry.publishes += v.publishes
      entry.deliveries += v.deliveries
      entry.bytes += v.bytes
    } else if (this.traffic.size < MAX_KEYS) this.traffic.set(key, v)
  }

  private mergeConnections(key: string, v: Connections): void {
    const entry = this.connections.get(key)
    if (entry) {
      entry.opened += v.opened
      entry.closed += v.closed
      entry.peak = Math.max(entry.peak, v.peak)
    } else if (this.connections.size < MAX_KEYS) this.connections.set(key, v)
  }
}

/** This process's recorder. */
export const usage = new UsageRecorder()
