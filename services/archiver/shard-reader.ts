// One shard's fan-out stream into the archive, through the consumer group `archiver`: at least once (an entry is
// acknowledged only after its batch is committed) and idempotent (the archive's key skips a redelivered entry).
//
// Each round takes, in turn: entries pending with a consumer that died (XAUTOCLAIM after ARCHIVER_CLAIM_IDLE_MS), this
// consumer's own pending entries after a restart (XREADGROUP from 0), then new entries (`>`, through archive-read.lua,
// which counts the entries trimmed before the group read them). Reads never block: on a Redis Cluster each command goes
// to the node holding the shard's slot through the shared cluster client, MOVED included.
import type { ArchiveEntry } from '../../shared/realtime/archive'
import { archiveEntries } from '../../shared/realtime/archive'
import { fanArchivedKey, fanDeadKey, fanKey } from '../../shared/realtime/keys'
import { namespaceOf } from '../../shared/realtime/names'
import { productPolicies } from '../../shared/realtime/policies'
import ARCHIVE_READ_LUA from '../../shared/realtime/lua/archive-read.lua' with { type: 'text' }
import { redis } from '../../shared/redis/client'
import { redisScript } from '../../shared/redis-script'
import { log } from '../../shared/log'
import { isUuid } from '../../shared/ids'

export const GROUP = 'archiver'


type StreamEntry = [id: string, fields: string[] | null]

const readNew = redisScript<[number, StreamEntry[]]>('realtime archive read', ARCHIVE_READ_LUA)

export interface ReaderOptions {
  consumer: string
  batch: number
  /** Most payload bytes per INSERT (at least one row). */
  batchBytes: number
  claimIdleMs: number
  ackDelayMs: number
}

/** What the archiver has done since it started, for its logs and the tests. */
export interface ArchiverCounts {
  /** Entries read from the streams (archivable or not). */
  read: number
  /** Rows written (redeliveries of archived entries not counted). */
  archived: number
  /** Entries trimmed from a stream before the group received them, or while pending: never archived. */
  lost: number
  /** Entries PostgreSQL refused for their content, set aside in the shard's dead letters (keys.ts fanDeadKey). */
  deadLettered: number
}

/** Most dead letters a shard keeps (newest first): enough to see what went wrong, never a growing list. */
export const ARCHIVE_DEAD_LETTERS_MAX = 1000

/** A row to archive and the fan-out entry it came from. */
interface Pending {
  streamId: string
  raw: string[]
  row: ArchiveEntry
}

/**
 * Whether PostgreSQL refused the statement for what it carries (a data exception, a constraint, a program limit such
 * as an index row too large), which no retry changes; anything else (a timeout, a lost connection) may pass later.
 */
function refusesData(error: unknown): boolean {
  if (error instanceof RangeError) return true // a publish time no Date holds
  const code = (error as { code?: unknown }).code
  return typeof code === 'string' && /^(22|23|54)/.test(code)
}

function fieldsOf(fields: string[]): Record<string, string> {
  const out: Record<string, string> = {}
  for (let i = 0; i + 1 < fields.length; i += 2) out[fields[i]!] = fields[i + 1]!
  return out
}

export class ShardReader {
  /** '0' while this consumer's own pending entries (left by a previous run) are being read again; then '>'. */
  private pendingFrom: string | null = '0'
  private groupReady = false
  private nextClaim = 0
  private claimCursor = '0-0'

  constructor(readonly shard: number, private readonly options: ReaderOptions, private readonly counts: ArchiverCounts) {}

  private get key() {
    return fanKey(this.shard)
  }

  /** Creates the group (reading from the stream's start: whatever is still there is archived) unless it exists. */
  private async ensureGroup(): Promise<void> {
    if (this.groupReady) return
    try {
      await redis().xgroup('CREATE', this.key, GROUP, '0', 'MKSTREAM')
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith('BUSYGROUP')) throw error
    }
    this.groupReady = true
  }

  /** One round: archives what it read and returns how many entries that was (0: nothing new on this shard). */
  async round(): Promise<number> {
    await this.ensureGroup()
    try {
      if (Date.now() >= this.nextClaim) {
        this.nextClaim = Date.now() + Math.max(100, this.options.claimIdleMs / 2)
        const claimed = await this.claim()
        if (claimed > 0) return claimed
      }
      if (this.pendingFrom !== null) {
        const reply = await redis().xreadgroup('GROUP', GROUP, this.options.consumer, 'COUNT', this.options.batch, 'STREAMS', this.key, this.pendingFrom) as [string, StreamEntry[]][] | null
        const entries = reply?.[0]?.[1] ?? []
        if (entries.length === 0) this.pendingFrom = null
        else {
          this.pendingFrom = entries.at(-1)![0]
          return await this.handle(entries)
        }
      }
      const [lost, entries] = await readNew.run([this.key, fanArchivedKey(this.shard)], [GROUP, this.options.consumer, this.options.batch])
      if (Number(lost) > 0) this.reportLost(Number(lost), 'trimmed before the archiver read them')
      return await this.handle(entries)
    } catch (error) {
      // The stream or its group was deleted (FLUSHALL, a Redis that lost its data): made again on the next round.
      if (String((error as { cause?: Error }).cause?.message ?? (error as Error).message).includes('NOGROUP')) this.groupReady = false
      // What was read and not written (PostgreSQL down) is pending with this consumer: read it again first, before
      // anything new, rather than leave it for a claim while the stream's retention runs out.
      this.pendingFrom = '0'
      throw error
    }
  }

  /** Takes over entries another consumer left pending too long (it died); returns how many it archived. */
  private async claim(): Promise<number> {
    const reply = await redis().call('XAUTOCLAIM', this.key, GROUP, this.options.consumer, this.options.claimIdleMs,
      this.claimCursor, 'COUNT', this.options.batch) as [string, StreamEntry[], string[]]
    const [next, entries, deleted] = reply
    this.claimCursor = next
    if (deleted?.length) this.reportLost(deleted.length, 'trimmed while pending with a consumer that died')
    if (next !== '0-0') this.nextClaim = 0 // more to claim: next round
    return entries.length ? await this.handle(entries) : 0
  }

  private reportLost(count: number, why: string): void {
    this.counts.lost += count
    log('warn', 'archive gap: fan-out entries were never archived', { shard: this.shard, count, why, lostTotal: this.counts.lost })
  }

  /**
   * Archives the entries of archiving namespaces among `entries`, then acknowledges them all, with the dead letters in
   * the same transaction (the dead-letter list shares the stream's slot). Counted only once acknowledged: a batch that
   * fails part-way is read again, and its gaps and dead letters would count (and be set aside) twice.
   */
  private async handle(entries: StreamEntry[]): Promise<number> {
    if (entries.length === 0) return 0
    const rows: Pending[] = []
    let gone = 0
    for (const [streamId, raw] of entries) {
      if (!raw) {
        gone++ // trimmed while pending: only its id is left
        continue
      }
      const f = fieldsOf(raw)
      // Stored publications only: client events and presence events carry no offset, and are never archived.
      if (f.offset === undefined || f.epoch === undefined || !f.product || !f.channel || f.kind || (f.d === undefined && f.r === undefined)) continue
      if (!isUuid(f.product)) continue // not a product's entry (the tests' and benchmarks' raw ones): nothing to look up
      const days = await this.archiveDays(f.product, f.channel)
      if (days <= 0) continue
      rows.push({
        streamId, raw,
        row: {
          productId: f.product, channel: f.channel, epoch: f.epoch, offset: Number(f.offset), id: f.id ?? '',
          publishedAt: Number(f.t), ...(f.d !== undefined ? { data: f.d } : { ref: f.r }), retentionDays: days,
        },
      })
    }
    const letters: DeadLetter[] = []
    // Rows already archived are skipped by the archive's key when the batch is read again: counting them here is exact.
    for (const chunk of byBytes(rows, this.options.batchBytes)) this.counts.archived += await this.write(chunk, letters)
    if (this.options.ackDelayMs > 0) await Bun.sleep(this.options.ackDelayMs)
    const ack = redis().multi()
    if (letters.length) ack.lpush(fanDeadKey(this.shard), ...letters.map((l) => l.letter)).ltrim(fanDeadKey(this.shard), 0, ARCHIVE_DEAD_LETTERS_MAX - 1)
    ack.xack(this.key, GROUP, ...entries.map(([id]) => id))
    const replies = await ack.exec()
    const failure = replies?.find(([error]) => error)?.[0]
    if (!replies || failure) throw failure ?? new Error('archive acknowledgement aborted')
    this.counts.read += entries.length
    if (gone) this.reportLost(gone, 'trimmed while pending')
    for (const { entry, why } of letters) {
      this.counts.deadLettered++
      log('warn', 'archive dead letter: an entry PostgreSQL refuses was set aside, not archived', {
        shard: this.shard, streamId: entry.streamId, productId: entry.row.productId, channel: entry.row.channel, offset: entry.row.offset, ...why,
      })
    }
    return entries.length
  }

  /**
   * Writes `rows` in one statement. When PostgreSQL refuses it for what it carries, the batch is halved and each half
   * written on its own, down to the one entry it refuses, which is dead-lettered: one bad entry costs a few statements
   * and never stops its shard (its letter goes to `letters`, set aside with the batch's acknowledgement). Any other
   * failure (PostgreSQL down or slow) is thrown: the batch stays pending.
   */
  private async write(rows: Pending[], letters: DeadLetter[]): Promise<number> {
    if (rows.length === 0) return 0
    try {
      return await archiveEntries(rows.map((r) => r.row))
    } catch (error) {
      if (!refusesData(error)) throw error
      if (rows.length === 1) {
        letters.push(deadLetter(rows[0]!, error))
        return 0
      }
      const half = Math.ceil(rows.length / 2)
      return (await this.write(rows.slice(0, half), letters)) + (await this.write(rows.slice(half), letters))
    }
  }

  /** The namespace's archive retention from the cached policy (dropped on invalidation); 0 when it does not archive. */
  private async archiveDays(productId: string, channel: string): Promise<number> {
    const policies = await productPolicies(productId)
    return policies.namespaces.get(namespaceOf(channel))?.archiveDays ?? 0
  }
}

/** An entry PostgreSQL refuses, as the shard's capped dead-letter list keeps it for an operator to look at. */
interface DeadLetter {
  entry: Pending
  why: { error: string; code: string | null }
  letter: string
}

function deadLetter(entry: Pending, error: unknown): DeadLetter {
  const why = { error: error instanceof Error ? error.message : String(error), code: (error as { code?: string }).code ?? null }
  return { entry, why, letter: JSON.stringify({ streamId: entry.streamId, fields: entry.raw, error: why, at: new Date().toISOString() }) }
}

/** `rows` in consecutive chunks of at most `maxBytes` of payload each, at least one row per chunk. */
function byBytes(rows: Pending[], maxBytes: number): Pending[][] {
  const chunks: Pending[][] = []
  let chunk: Pending[] = []
  let bytes = 0
  for (const pending of rows) {
    const size = (pending.row.data ?? pending.row.ref ?? '').length + pending.row.channel.length + pending.row.id.length
    if (chunk.length > 0 && bytes + size > maxBytes) {
      chunks.push(chunk)
      chunk = []
      bytes = 0
    }
    chunk.push(pending)
    bytes += size
  }
  if (chunk.length) chunks.push(chunk)
  return chunks
}
