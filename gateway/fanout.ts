// Reads the shard fan-out streams (rt:{sN}:fan) that hold at least one channel this gateway's clients subscribe to,
// in order, and hands each entry to `deliver` once. A dedicated Redis connection blocks in XREAD; when a shard becomes
// wanted it is woken (CLIENT UNBLOCK) so the new shard is read at once.
//
// It never skips silently. After a failed read (Redis unreachable) and after every full batch (it may be behind), it
// checks that the entry at its cursor is still in the stream: streams are trimmed from the head (MAXLEN ~ FAN_MAXLEN)
// and lost whole when Redis loses its data, so if nothing at or before the cursor is left, entries after it may be gone.
// Then `gap(shard)` is called (the gateway tells that shard's subscriptions to recover through history) and reading
// goes on from the stream's top.
import type Redis from 'ioredis'
import { describeError, log } from '../shared/log'
import { fanKey } from '../shared/realtime/keys'
import { dedicatedRedis, redis } from '../shared/redis'

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
  /** Serialized JSON data, or the payload ref as JSON text. */
  d?: string
  r?: string
  /** Set on a presence event instead of data: `join` or `leave`, whose identity, and its info as JSON text. */
  kind?: 'join' | 'leave'
  identity?: string
  info?: string
}

const BLOCK_MS = 5000
const COUNT = 1000

function toEntry(shard: number, fields: string[]): FanEntry {
  const entry: Partial<FanEntry> & { shard: number } = { shard }
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const name = fields[i]!
    const value = fields[i + 1]!
    if (name === 't' || name === 'offset') entry[name] = Number(value)
    else (entry as unknown as Record<string, string>)[name] = value
  }
  return entry as FanEntry
}

export class FanoutReader {
  /** shard → last stream id read (or the top when it became wanted). */
  private readonly cursors = new Map<number, string>()
  private reader: Redis | undefined
  private readerId: number | undefined
  private blocked = false
  private running = false
  private wake: (() => void) | undefined
  /** Fails the read in progress when the reader's connection closes. */
  private dropped: ((error: Error) => void) | undefined

  constructor(
    private readonly deliver: (entry: FanEntry) => void,
    private readonly gap: (shard: number) => void,
    /** Called after each batch read has been delivered: the gateway writes out what the batch queued, per socket. */
    private readonly batchDone: () => void = () => {},
  ) {}

  /** Starts reading `shard` from its current top: entries published from now on are delivered. */
  async add(shard: number): Promise<void> {
    if (this.cursors.has(shard)) return
    const [top] = await redis().xrevrange(fanKey(shard), '+', '-', 'COUNT', 1)
    if (this.cursors.has(shard)) return // added meanwhile
    this.cursors.set(shard, top?.[0] ?? '0-0')
    this.interrupt()
  }

  /** Stops reading `shard` (its last subscriber here left). */
  remove(shard: number): void {
    this.cursors.delete(shard)
  }

  get readingShards(): number[] {
    return [...this.cursors.keys()]
  }

  start(): void {
    if (this.running) return
    this.running = true
    // A read pending when the connection drops must fail, not be sent again after the reconnect: the gap has to be
    // checked before reading on.
    this.reader = dedicatedRedis('fanout', { autoResendUnfulfilledCommands: false })
    this.reader.on('ready', () => {
      void this.reader!.client('ID').then((id) => (this.readerId = Number(id)), () => {})
    })
    // ioredis drops (never settles) a command pending at a disconnect when it does not resend: fail it ourselves.
    this.reader.on('close', () => this.dropped?.(new Error('fan-out reader connection closed')))
    void this.loop()
  }

  async stop(): Promise<void> {
    this.running = false
    this.interrupt()
    this.wake?.()
    this.reader?.disconnect()
  }

  /** Wakes a blocked XREAD so that a changed set of shards is read now. */
  private interrupt(): void {
    this.wake?.()
    if (this.blocked && this.readerId !== undefined) void redis().client('UNBLOCK', this.readerId).catch(() => {})
  }

  /** After a failed read or a full batch: the shards whose continuity cannot be proven are reported and moved to their top. */
  private async verify(shards: number[]): Promise<void> {
    for (const shard of shards) {
      const cursor = this.cursors.get(shard)
      if (cursor === undefined || cursor === '0-0') continue
      const [kept] = await redis().xrevrange(fanKey(shard), cursor, '-', 'COUNT', 1)
      if (kept) continue
      const [top] = await redis().xrevrange(fanKey(shard), '+', '-', 'COUNT', 1)
      if (!this.cursors.has(shard)) continue
      this.cursors.set(shard, top?.[0] ?? '0-0')
      log('warn', 'fan-out gap: subscriptions told to recover', { shard, cursor })
      this.gap(shard)
    }
  }

  private async loop(): Promise<void> {
    let suspect: number[] = []
    while (this.running) {
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
      const shards = [...this.cursors.keys()]
      if (shards.length === 0) {
        await new Promise<void>((resolve) => (this.wake = resolve))
        this.wake = undefined
        continue
      }
      let reply: [key: string, entries: [id: string, fields: string[]][]][] | null
      try {
        this.blocked = true
        const read = this.reader!.xread('COUNT', COUNT, 'BLOCK', BLOCK_MS, 'STREAMS',
          ...shards.map(fanKey), ...shards.map((s) => this.cursors.get(s)!)) as Promise<typeof reply>
        reply = await Promise.race([read, new Promise<never>((_, reject) => (this.dropped = reject))])
      } catch (error) {
        if (!this.running) return
        log('warn', 'fan-out read failed; retrying', describeError(error))
        suspect = [...this.cursors.keys()] // whatever happened meanwhile must be checked before reading on
        await Bun.sleep(200)
        continue
      } finally {
        this.blocked = false
        this.dropped = undefined
      }
      for (const [key, entries] of reply ?? []) {
        const shard = Number(/\{s(\d+)\}/.exec(key)![1])
        if (!this.cursors.has(shard)) continue // no longer wanted
        if (entries.length >= COUNT) suspect.push(shard) // a full batch: it may be behind, so check before the next read
        for (const [id, fields] of entries) {
          this.cursors.set(shard, id)
          try {
            this.deliver(toEntry(shard, fields))
          } catch (error) {
            log('error', 'fan-out delivery failed', describeError(error))
          }
        }
      }
      this.batchDone()
    }
  }
}
