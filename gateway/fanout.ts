// Reads the shard fan-out streams (rt:{sN}:fan) that hold at least one channel this gateway's clients subscribe to,
// in order, and hands each entry to `deliver` once. A dedicated Redis connection blocks in XREAD; when a shard becomes
// wanted it is woken (CLIENT UNBLOCK) so the new shard is read at once. On a Redis Cluster one XREAD cannot span slots
// (CROSSSLOT, even on one node): each wanted shard has its own reading connection, to the node holding its slot, and
// its own loop; a MOVED reply (the slot migrated) re-reads the slot map, checks the shard's continuity, and reads it
// from the node that holds it now.
//
// It never skips silently. Every entry carries its shard's sequence number `n` (1, 2, 3..., keys.ts fanSeqKey), so an
// entry trimmed away (older than REALTIME_FANOUT_RETENTION_MS, while this gateway was behind that far) or lost with Redis's data shows as a jump;
// and after a failed read (Redis unreachable) the entry after the cursor is checked before reading on, since nothing
// may arrive to show the jump. Either way `gap(shard)` is called before anything after the gap is delivered (the
// gateway tells that shard's subscriptions to recover through history), and reading goes on from the stream's top.
import type Redis from 'ioredis'
import { describeError, log } from '../shared/log'
import { fanKey, fanSeqKey } from '../shared/realtime/keys'
import { dedicatedReader, redis } from '../shared/redis/client'
import { clusterNode, nodeOfKey, onCluster, refreshClusterSlots } from '../shared/redis/cluster'

/** One fan-out entry, as the publish script wrote it (docs/realtime-data-plane.md). */
export interface FanEntry {
  shard: number
  channel: string
  product: string
  id: string
  /** Publish time, ms (Redis clock). */
  t: number
  offset?: number
  epoch?: string
  /** The sending connection, for a client event. */
  sender?: string
  /** The entry's number in its shard's sequence (see fanSeqKey). */
  n?: number
  /** Serialized JSON data, or the payload ref as JSON text. */
  d?: string
  r?: string
  /** Set on a presence event instead of data: `join` or `leave`, whose identity, and its info as JSON text. */
  kind?: 'join' | 'leave'
  identity?: string
  info?: string
}

const BLOCK_MS = 5000
/**
 * A blocking read answers within BLOCK_MS (empty at worst). One that has not after this much longer is on a connection
 * that died without a reset (no RST ever arrives on a dead path): the reader reconnects and checks continuity.
 */
const READ_WATCHDOG_MS = BLOCK_MS + 3000
const COUNT = 1000

function toEntry(shard: number, fields: string[]): FanEntry {
  const entry: Partial<FanEntry> & { shard: number } = { shard }
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const name = fields[i]!
    const value = fields[i + 1]!
    if (name === 't' || name === 'offset' || name === 'n') entry[name] = Number(value)
    else (entry as unknown as Record<string, string>)[name] = value
  }
  return entry as FanEntry
}

/** Whether stream id `a` ("ms-seq") comes after `b`. */
function idAfter(a: string, b: string): boolean {
  const [aMs, aSeq] = a.split('-').map(Number) as [number, number]
  const [bMs, bSeq] = b.split('-').map(Number) as [number, number]
  return aMs > bMs || (aMs === bMs && aSeq > bSeq)
}

/** Where the reader stands on one shard: the last stream id read and the sequence number it carried. */
export interface Cursor {
  id: string
  /** Undefined only after an entry written without a number (older writers): the next one is taken as it comes. */
  n: number | undefined
}

/** One reading connection and its loop: every shard on one Redis, or one shard on the cluster node holding it. */
interface NodeReader {
  /** '' on one Redis; on a cluster "<host:port>/<shard>". */
  key: string
  /** The cluster node it reads from ("host:port"); '' on one Redis. */
  node: string
  connection: Redis
  id: number | undefined
  blocked: boolean
  wake: (() => void) | undefined
  /** Fails the read in progress when the reader's connection closes. */
  dropped: ((error: Error) => void) | undefined
  looping: boolean
  /** Stopped, or closed itself: its loop ends, even if the reader as a whole is started again meanwhile. */
  closed: boolean
}

/** How far a reader stands behind one shard's stream (docs/metrics.md, `platform_gateway_fanout_lag_*`). */
export interface FanoutLag {
  /** Entries written to the shard past the last one read (the shard's sequence counter past the cursor's number). */
  entries: number
  /** Age of the oldest entry not read yet, by the Redis clock that stamped it; 0 when every entry is read. */
  seconds: number
}

/** The lag of a cursor, given the shard's counter, the entry after the cursor (if any) and the Redis clock now. */
export function lagOf(cursor: Cursor, counter: number, next: FanEntry | undefined, redisNowMs: number): FanoutLag {
  return {
    entries: cursor.n === undefined ? NaN : Math.max(0, counter - cursor.n),
    seconds: next?.t === undefined ? 0 : Math.max(0, redisNowMs - next.t) / 1000,
  }
}

export class FanoutReader {
  private readonly cursors = new Map<number, Cursor>()
  /** Shards whose starting position is being read: every subscriber of the shard waits for the same read. */
  private readonly starting = new Map<number, Promise<void>>()
  /** By key (see NodeReader.key); made when its shard is first wanted. */
  private readonly readers = new Map<string, NodeReader>()
  private running = false
  private retryReaders: ReturnType<typeof setTimeout> | undefined

  constructor(
    private readonly deliver: (entry: FanEntry) => void,
    private readonly gap: (shard: number) => void,
    /** Called after each batch read has been delivered: the gateway writes out what the batch queued, per socket. */
    private readonly batchDone: () => void = () => {},
  ) {}

  /**
   * Reads `shard` from its current top on: entries published after this resolves are delivered. Every subscription
   * of the shard awaits it (the first caller starts the read, later ones share it); it rejects when Redis cannot be
   * read, and the next call tries again.
   */
  add(shard: number): Promise<void> {
    if (this.cursors.has(shard)) return Promise.resolve()
    let starting = this.starting.get(shard)
    if (!starting) {
      starting = this.top(shard).then(
        (cursor) => {
          // Removed meanwhile (its last subscriber left): stay unread.
          if (this.starting.get(shard) !== starting) return
          this.starting.delete(shard)
          this.cursors.set(shard, cursor)
          const reader = this.readerOf(shard)
          if (reader) this.interrupt(reader)
          else this.ensureReaders()
        },
        (error) => {
          if (this.starting.get(shard) === starting) this.starting.delete(shard)
          throw error
        },
      )
      this.starting.set(shard, starting)
    }
    return starting
  }

  /** Stops reading `shard` (its last subscriber here left). */
  remove(shard: number): void {
    this.cursors.delete(shard)
    this.starting.delete(shard)
  }

  get readingShards(): number[] {
    return [...this.cursors.keys()]
  }

  /**
   * Every shard read now and how far behind it this reader is: one MULTI per shard (the entry after the cursor, the
   * sequence counter, the Redis clock), at scrape time only. A shard Redis does not answer for is NaN.
   */
  async lag(): Promise<Map<number, FanoutLag>> {
    const lags = new Map<number, FanoutLag>()
    await Promise.all([...this.cursors].map(async ([shard, cursor]) => {
      try {
        const replies = await redis().multi().xrange(fanKey(shard), `(${cursor.id}`, '+', 'COUNT', 1).get(fanSeqKey(shard)).time().exec()
        if (!replies || replies.some(([error]) => error)) throw new Error('fan-out lag read failed')
        const [next] = replies[0]![1] as [string, string[]][]
        const [seconds, micros] = replies[2]![1] as [string, string]
        lags.set(shard, lagOf(cursor, Number(replies[1]![1] ?? 0), next && toEntry(shard, next[1]), Number(seconds) * 1000 + Number(micros) / 1000))
      } catch {
        lags.set(shard, { entries: NaN, seconds: NaN })
      }
    }))
    return lags
  }

  start(): void {
    if (this.running) return
    this.running = true
    if (!onCluster()) this.readerOf(0) // one Redis: connect now (on a cluster, a shard's reader is made with its cursor)
    this.ensureReaders()
  }

  async stop(): Promise<void> {
    this.running = false
    clearTimeout(this.retryReaders)
    for (const reader of this.readers.values()) {
      reader.closed = true
      this.interrupt(reader)
      reader.connection.disconnect()
    }
    this.readers.clear()
  }

  /**
   * Every wanted shard has its reader (on a cluster, after slots moved, or a node was not known yet). One that cannot be
   * made now (no node holds its slot: a failover) is tried again shortly.
   */
  private ensureReaders(): void {
    if (!this.running) return
    let missing = false
    for (const shard of this.cursors.keys()) missing = this.readerOf(shard) === undefined || missing
    clearTimeout(this.retryReaders)
    if (missing) this.retryReaders = setTimeout(() => this.ensureReaders(), 200)
  }

  /** Which reader reads `shard`: '' on one Redis, "<node>/<shard>" on a cluster (from the node holding its slot now). */
  private keyOf(shard: number): string {
    const node = nodeOfKey(fanKey(shard))
    return node === undefined ? '' : `${node}/${shard}`
  }

  /**
   * The reader of `shard`, made and started on first use; none while stopped, or while no cluster node is known to hold
   * its slot (the caller tries again: ensureReaders).
   */
  private readerOf(shard: number): NodeReader | undefined {
    if (!this.running) return undefined
    const key = this.keyOf(shard)
    let reader = this.readers.get(key)
    if (reader) return reader
    if (key === '' && onCluster()) return undefined
    const node = key === '' ? '' : key.slice(0, key.lastIndexOf('/'))
    // A read pending when the connection drops must fail, not be sent again after the reconnect: the gap has to be
    // checked before reading on.
    const connection = dedicatedReader(key ? `fanout@${key}` : 'fanout', node || undefined, { autoResendUnfulfilledCommands: false })
    const made: NodeReader = { key, node, connection, id: undefined, blocked: false, wake: undefined, dropped: undefined, looping: false, closed: false }
    reader = made
    this.readers.set(key, made)
    connection.on('ready', () => {
      void connection.client('ID').then((id) => (made.id = Number(id)), () => {})
    })
    // ioredis drops (never settles) a command pending at a disconnect when it does not resend: fail it ourselves.
    connection.on('close', () => made.dropped?.(new Error('fan-out reader connection closed')))
    this.run(made)
    return made
  }

  /** Starts the reader's loop, once. */
  private run(reader: NodeReader): void {
    if (reader.looping) return
    reader.looping = true
    void this.loop(reader)
  }

  /** Wakes a blocked XREAD so that a changed set of shards is read now. */
  private interrupt(reader: NodeReader): void {
    reader.wake?.()
    if (reader.blocked && reader.id !== undefined) {
      void clusterNode(reader.node)?.client('UNBLOCK', reader.id).catch(() => {}) // on one Redis: its command connection
    }
  }

  /** After a MOVED reply: the slot map is read again, and every wanted shard is read by the node that holds it now. */
  private async followSlots(): Promise<void> {
    await refreshClusterSlots()
    this.ensureReaders()
    for (const reader of this.readers.values()) this.interrupt(reader)
  }

  /** The stream's top and the sequence number it reached, read together (one atomic step, as the scripts write them). */
  private async top(shard: number): Promise<Cursor> {
    const replies = await redis().multi().xrevrange(fanKey(shard), '+', '-', 'COUNT', 1).get(fanSeqKey(shard)).exec()
    const failed = replies?.find(([error]) => error)
    if (!replies || failed) throw failed?.[0] ?? new Error('fan-out position read aborted')
    const [entry] = replies[0]![1] as [string, string[]][]
    return { id: entry?.[0] ?? '0-0', n: Number(replies[1]![1] ?? 0) }
  }

  /** Continuity is lost on `shard`: its subscriptions are told to recover, and reading goes on from the top. */
  private async restartAtTop(shard: number, why: Record<string, unknown>): Promise<void> {
    const before = this.cursors.get(shard)
    const top = await this.top(shard)
    // Given up, or given up and wanted again (a new cursor at the top), while the top was read: nothing to restart.
    if (!before || this.cursors.get(shard) !== before) return
    this.cursors.set(shard, top)
    log('warn', 'fan-out gap: subscriptions told to recover', { shard, ...why })
    this.gap(shard)
  }

  /**
   * After a failed read: a shard is continuous when the entry after its cursor is the next number, or when nothing was
   * added since (the counter still stands at the cursor's number). Anything else (trimmed, or Redis lost its data) is a gap.
   */
  private async verify(shards: number[]): Promise<void> {
    for (const shard of shards) {
      const cursor = this.cursors.get(shard)
      if (cursor?.n === undefined) continue
      const replies = await redis().multi().xrange(fanKey(shard), `(${cursor.id}`, '+', 'COUNT', 1).get(fanSeqKey(shard)).exec()
      const failed = replies?.find(([error]) => error)
      if (!replies || failed) throw failed?.[0] ?? new Error('fan-out check aborted')
      const [next] = replies[0]![1] as [string, string[]][]
      const counter = Number(replies[1]![1] ?? 0)
      const continuous = next ? toEntry(shard, next[1]).n === cursor.n + 1 : counter === cursor.n
      if (!continuous && this.cursors.get(shard) === cursor) await this.restartAtTop(shard, { cursor: cursor.id, n: cursor.n, counter })
    }
  }

  private async loop(reader: NodeReader): Promise<void> {
    let suspect: number[] = []
    while (this.running && !reader.closed) {
      if (suspect.length) {
        try {
          await this.verify(suspect)
          suspect = []
        } catch (error) {
          log('warn', 'fan-out check failed; retrying', describeError(error))
          await Bun.sleep(200)
          continue
        }
      }
      const shards = [...this.cursors.keys()].filter((shard) => this.keyOf(shard) === reader.key)
      if (shards.length === 0) {
        if (reader.key !== '') {
          // A cluster shard's reader whose shard left (unsubscribed, or its slot now on another node, as the client
          // learned from any reply): closed, and the shard's reader on its new node made if it is still wanted.
          if (this.readers.get(reader.key) === reader) this.readers.delete(reader.key)
          reader.closed = true
          reader.connection.disconnect()
          this.ensureReaders()
          return
        }
        await new Promise<void>((resolve) => (reader.wake = resolve))
        reader.wake = undefined
        continue
      }
      let reply: [key: string, entries: [id: string, fields: string[]][]][] | null
      try {
        reader.blocked = true
        const read = reader.connection.xread('COUNT', COUNT, 'BLOCK', BLOCK_MS, 'STREAMS',
          ...shards.map(fanKey), ...shards.map((s) => this.cursors.get(s)!.id)) as Promise<typeof reply>
        const watchdog = setTimeout(() => {
          log('warn', 'fan-out read unanswered past its block time; reconnecting the reader')
          reader.connection.disconnect(true) // its close fails the read (below) and a new connection is made
        }, READ_WATCHDOG_MS)
        try {
          reply = await Promise.race([read, new Promise<never>((_, reject) => (reader.dropped = reject))])
        } finally {
          clearTimeout(watchdog)
        }
      } catch (error) {
        if (!this.running || reader.closed) return
        // Whatever happened meanwhile must be checked before reading on: on one Redis every shard wanted now, as
        // before; a cluster reader's one shard even if the slot map moved it meanwhile (its next reader reads on
        // from the cursor this check vouches for).
        suspect = reader.key === '' ? [...this.cursors.keys()] : shards
        if (/^(MOVED|ASK) /.test((error as Error).message ?? '')) {
          log('info', 'fan-out shard moved to another cluster node; following', { reader: reader.key })
          await this.followSlots().catch((failure) => log('warn', 'cluster slots not re-read', describeError(failure)))
          // The map may not show the move yet (gossip), or the slot is still migrating (ASK): not again at once.
          await Bun.sleep(100)
          continue
        }
        log('warn', 'fan-out read failed; retrying', describeError(error))
        await Bun.sleep(200)
        continue
      } finally {
        reader.blocked = false
        reader.dropped = undefined
      }
      for (const [key, entries] of reply ?? []) {
        const shard = Number(/\{s(\d+)\}/.exec(key)![1])
        for (const [id, fields] of entries) {
          const cursor = this.cursors.get(shard)
          if (!cursor) break // no longer wanted (its last subscriber left, perhaps during this batch)
          // Read from an older cursor: the shard was given up and wanted again while this read was in flight, and its
          // new cursor already stands past this entry. Not a gap, and not for delivery (nobody there wanted it then).
          if (!idAfter(id, cursor.id)) continue
          const entry = toEntry(shard, fields)
          if (cursor.n !== undefined && entry.n !== undefined && entry.n !== cursor.n + 1) {
            log('warn', 'fan-out gap: subscriptions told to recover', { shard, cursor: cursor.id, n: cursor.n, next: entry.n })
            this.gap(shard) // before anything after the gap reaches them
            if (!this.cursors.has(shard)) break
          }
          this.cursors.set(shard, { id, n: entry.n })
          try {
            this.deliver(entry)
          } catch (error) {
            log('error', 'fan-out delivery failed', describeError(error))
          }
        }
      }
      this.batchDone()
    }
  }
}
