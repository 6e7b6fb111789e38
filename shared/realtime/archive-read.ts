// Reads of the Realtime archive: one channel by time range, newest or oldest first, a page at a time with an opaque
// cursor. The public route and the platform operation both answer through readArchive. docs/realtime-data-plane.md, "Archive".
import { createHmac, timingSafeEqual } from 'node:crypto'
import Type from 'typebox'
import { Strict } from '../catalog/schemas'
import { config } from '../config'
import { sql } from '../db/client'
import { badRequest } from '../errors'
import { requireSecretKey } from '../secrets'
import type { HistoryEntry, PayloadRef } from './broker'
import { HISTORY_ENTRY_FRAMING_BYTES } from './broker'
import { namespaceOf } from './names'

export const ARCHIVE_LIMIT_MAX = 1000
export const ARCHIVE_LIMIT_DEFAULT = 100
export type ArchiveOrder = 'newest' | 'oldest'

/** The query of an archive page as the public route and the operation take it (one schema for both, and for OpenAPI). */
export const ArchiveQuerySchema = Strict({
  from: Type.Optional(Type.String({ maxLength: 40, description: 'ISO-8601 time with a zone; inclusive' })),
  to: Type.Optional(Type.String({ maxLength: 40, description: 'ISO-8601 time with a zone; exclusive (default now)' })),
  order: Type.Optional(Type.Union([Type.Literal('newest'), Type.Literal('oldest')], { default: 'newest' })),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: ARCHIVE_LIMIT_MAX, default: ARCHIVE_LIMIT_DEFAULT })),
  cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 400, description: '`next` of the previous page' })),
})

export interface ArchiveQuery {
  /** Inclusive lower bound, ISO-8601 with a zone; default: as far back as retention keeps. */
  from?: string
  /** Exclusive upper bound, ISO-8601 with a zone; default: now. */
  to?: string
  order?: ArchiveOrder
  /** 1..ARCHIVE_LIMIT_MAX; default ARCHIVE_LIMIT_DEFAULT. */
  limit?: number
  /** `next` of the previous page, with the same channel and order. */
  cursor?: string
}

export interface ArchiveResult {
  channel: string
  /** In the order asked for; each with `data` or `ref`, as history answers. */
  entries: HistoryEntry[]
  /** The cursor of the next page, or null when this page is the last. */
  next: string | null
}

const ISO_WITH_ZONE = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,6})?)?(Z|([+-])(\d{2}):(\d{2}))$/

/**
 * The instant an ISO-8601 time with a zone names, or null: the text must name a real calendar time (the Date parser
 * would roll 2026-02-30 over to March) within years 0001..9999 and an offset within ±14:00.
 */
export function parseZonedTime(text: string): Date | null {
  const m = ISO_WITH_ZONE.exec(text)
  if (!m) return null
  const ms = Date.parse(text)
  if (Number.isNaN(ms)) return null
  const offset = m[7] === 'Z' ? 0 : (Number(m[9]) * 60 + Number(m[10])) * (m[8] === '-' ? -1 : 1)
  if (Math.abs(offset) > 14 * 60 || Number(m[10] ?? 0) > 59) return null
  const local = new Date(ms + offset * 60_000)
  const same = local.getUTCFullYear() === Number(m[1]) && local.getUTCMonth() + 1 === Number(m[2]) && local.getUTCDate() === Number(m[3])
    && local.getUTCHours() === Number(m[4]) && local.getUTCMinutes() === Number(m[5]) && local.getUTCSeconds() === Number(m[6] ?? 0)
  const year = new Date(ms).getUTCFullYear()
  return same && year >= 1 && year <= 9999 ? new Date(ms) : null
}

/** Where a page ended: the last entry's sort key, bound to its product, channel and order. */
interface Position {
  t: number
  epoch: string
  offset: number
}

/** The instants PostgreSQL's timestamptz and Date both hold: years 0001..9999. */
const YEAR_1 = -62_135_596_800_000
const YEAR_10000 = 253_402_300_800_000

/** The cursor key: derived from the master key, so a cursor cannot be forged without it and never names the key. */
const cursorKeys = new Map<Buffer, Buffer>()
function cursorKey(master: Buffer): Buffer {
  let key = cursorKeys.get(master)
  if (!key) cursorKeys.set(master, key = createHmac('sha256', master).update('realtime archive cursor v2').digest())
  return key
}

/** The MAC of a position in its scope: 16 bytes of HMAC-SHA256, base64url. */
const macOf = (master: Buffer, productId: string, channel: string, order: ArchiveOrder, p: Position) =>
  createHmac('sha256', cursorKey(master)).update(JSON.stringify([productId, channel, order, p.t, p.epoch, p.offset])).digest().subarray(0, 16)

/**
 * The cursor after `position`: base64url of JSON, with a MAC over the position and its product, channel and order,
 * keyed by PLATFORM_SECRET_KEY. Opaque to clients; it only moves within one channel's archive, and any altered part
 * (the position included) is refused.
 */
export function encodeCursor(productId: string, channel: string, order: ArchiveOrder, position: Position): string {
  const mac = macOf(requireSecretKey().current, productId, channel, order, position).toString('base64url')
  return Buffer.from(JSON.stringify([2, position.t, position.epoch, position.offset, mac])).toString('base64url')
}

const badCursor = (why: string) =>
  badRequest(`Invalid cursor: ${why}; pass \`next\` of the previous page unchanged, with the same channel and order`, [{ path: '/query/cursor', message: why }])

/** The position a cursor names; 400 naming the cursor when it is malformed, altered, or from another channel or order. */
export function decodeCursor(productId: string, channel: string, order: ArchiveOrder, cursor: string): Position {
  let parsed: unknown
  try {
    if (!/^[A-Za-z0-9_-]{1,400}$/.test(cursor)) throw new Error()
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'))
  } catch {
    throw badCursor('not a cursor this API issued')
  }
  if (!Array.isArray(parsed) || parsed.length !== 5 || parsed[0] !== 2) throw badCursor('not a cursor this API issued')
  const [, t, epoch, offset, mac] = parsed as unknown[]
  // Checked before the MAC as well: even a cursor signed by a leaked key never reaches PostgreSQL out of range.
  if (!Number.isSafeInteger(t) || (t as number) < YEAR_1 || (t as number) >= YEAR_10000 || typeof epoch !== 'string'
    || epoch.length > 64 || !Number.isSafeInteger(offset) || (offset as number) < 0 || typeof mac !== 'string') {
    throw badCursor('not a cursor this API issued')
  }
  const position = { t: t as number, epoch, offset: offset as number }
  const given = Buffer.from(mac, 'base64url')
  // Every key of the ring verifies, so cursors stay valid across a master key rotation.
  const valid = [...requireSecretKey().all.values()].some((master) => {
    const expected = macOf(master, productId, channel, order, position)
    return given.length === expected.length && timingSafeEqual(given, expected)
  })
  if (!valid) throw badCursor('altered, or issued for another channel or order')
  return position
}

/** The checked query: 400 naming each bad field. */
function checkQuery(query: ArchiveQuery): { from: Date | null; to: Date | null; order: ArchiveOrder; limit: number } {
  const fields = []
  const from = query.from === undefined ? null : parseZonedTime(query.from)
  const to = query.to === undefined ? null : parseZonedTime(query.to)
  if (query.from !== undefined && !from) fields.push({ path: '/query/from', message: 'ISO-8601 time with a zone (2026-11-25T12:00:00Z)' })
  if (query.to !== undefined && !to) fields.push({ path: '/query/to', message: 'ISO-8601 time with a zone (2026-11-25T12:00:00Z)' })
  const order = query.order ?? 'newest'
  if (order !== 'newest' && order !== 'oldest') fields.push({ path: '/query/order', message: 'newest or oldest' })
  const limit = query.limit ?? ARCHIVE_LIMIT_DEFAULT
  if (!Number.isInteger(limit) || limit < 1 || limit > ARCHIVE_LIMIT_MAX) fields.push({ path: '/query/limit', message: `integer 1..${ARCHIVE_LIMIT_MAX}` })
  if (fields.length) throw badRequest(`Invalid request: ${fields.map((f) => `${f.path} ${f.message}`).join('; ')}`, fields)
  if (from && to && from.getTime() >= to.getTime()) {
    throw badRequest('from must be before to', [{ path: '/query/from', message: 'must be before to' }, { path: '/query/to', message: 'must be after from' }])
  }
  return { from, to, order, limit }
}

/**
 * Rows published after the namespace was last deleted: the rows of a deleted namespace are never answered, also
 * when a namespace of the same name is created again before the sweeper has deleted them.
 */
const afterPurge = (productId: string, channel: string) => sql`published_at >= coalesce((
  select purge_before from realtime_archive_namespaces where product_id = ${productId} and namespace = ${namespaceOf(channel)}), '-infinity')`

interface Row {
  epoch: string
  offset: string
  id: string
  published_at: Date
  data: string | null
  ref: string | null
}

/**
 * One page of a channel's archive. `archiveDays` is the namespace's current retention (0 when it does not archive):
 * rows past it, or past their own retention when it is 0, are never answered, even before the sweeper deletes them.
 * A page holds at most `limit` entries and about `maxReplyBytes` of payload (at least one entry).
 */
export async function readArchive(
  productId: string, channel: string, archiveDays: number, query: ArchiveQuery,
  maxReplyBytes = config.realtime.archiveMaxReplyBytes,
): Promise<ArchiveResult> {
  const { from, to, order, limit } = checkQuery(query)
  const after = query.cursor === undefined ? null : decodeCursor(productId, channel, order, query.cursor)
  const newest = order === 'newest'
  const retained = archiveDays > 0
    ? sql`published_at >= now() - ${archiveDays * 86_400}::int * interval '1 second'`
    : sql`published_at >= now() - make_interval(days => retention_days)`
  const cursorAt = after && new Date(after.t)
  const past = !after ? sql`` : newest
    ? sql`and (published_at, epoch, "offset") < (${cursorAt}::timestamptz, ${after.epoch}::text, ${after.offset}::bigint)`
    : sql`and (published_at, epoch, "offset") > (${cursorAt}::timestamptz, ${after.epoch}::text, ${after.offset}::bigint)`
  const direction = newest ? sql`desc` : sql`asc`
  const framing = HISTORY_ENTRY_FRAMING_BYTES + channel.length
  // The running byte count is summed in PostgreSQL, so payloads past the reply budget are never sent here.
  const rows = await sql<(Row & { fetched: string })[]>`
    select epoch, "offset", id, published_at, data, ref, fetched from (
      select epoch, "offset", id, published_at, data, ref::text as ref,
        row_number() over w as n, count(*) over () as fetched,
        sum(coalesce(octet_length(data), octet_length(ref::text)) + octet_length(id) + ${framing}::int) over w as running
      from (
        select * from realtime_archive
        where product_id = ${productId} and channel = ${channel} and ${retained} and ${afterPurge(productId, channel)}
          ${from ? sql`and published_at >= ${from}` : sql``} ${to ? sql`and published_at < ${to}` : sql``}
          ${past}
        order by published_at ${direction}, epoch ${direction}, "offset" ${direction}
        limit ${limit + 1}
      ) page
      window w as (order by published_at ${direction}, epoch ${direction}, "offset" ${direction})
    ) counted
    where n = 1 or running <= ${maxReplyBytes}
    order by n`
  const taken = rows.slice(0, limit)
  // More follow when PostgreSQL found more rows than this page carries: the one past `limit`, or those past the budget.
  const more = rows.length > 0 && Number(rows[0]!.fetched) > taken.length
  const last = taken.at(-1)
  return {
    channel,
    entries: taken.map(toEntry),
    next: more && last ? encodeCursor(productId, channel, order, { t: last.published_at.getTime(), epoch: last.epoch, offset: Number(last.offset) }) : null,
  }
}

function toEntry(row: Row): HistoryEntry {
  const entry: HistoryEntry = { id: row.id, offset: Number(row.offset), epoch: row.epoch, publishedAt: row.published_at.toISOString() }
  if (row.ref !== null) entry.ref = JSON.parse(row.ref) as PayloadRef
  else {
    try {
      entry.data = JSON.parse(row.data!)
    } catch {
      entry.data = row.data // as history does: anything that is not JSON is kept as the text it was
    }
  }
  return entry
}

/**
 * The archived entries of `channel` in `epoch` with offsets `after + 1 .. upTo`, ascending, all of them or null: null
 * when one is missing (a hole, an archiver behind), stored twice (two publish times for one offset: a Redis that lost
 * writes and numbered again), or when together they pass `maxBytes` (each counted as history counts it). For a history
 * cursor whose entries left Redis (./archive-recovery.ts), `upTo` being the offset before Redis' first entry; served by
 * the primary key (product, channel, epoch, offset).
 */
export async function archivedRunAfter(
  productId: string, channel: string, archiveDays: number, epoch: string, after: number, upTo: number, maxBytes: number,
): Promise<{ entries: HistoryEntry[]; bytes: number } | null> {
  const need = upTo - after
  if (need <= 0) return null
  const rows = await archivedRunRows(productId, channel, archiveDays, epoch, after, upTo, maxBytes)
  // More rows than offsets in the range: an offset stored twice. Fewer: a hole. Fewer within the budget: too large.
  if (rows.length !== need || Number(rows[0]!.held) !== need) return null
  if (rows.some((row, i) => Number(row.offset) !== after + i + 1)) return null
  return { entries: rows.map(toEntry), bytes: Number(rows.at(-1)!.running) }
}

/**
 * The rows of archivedRunAfter as PostgreSQL sends them: those of the range within `maxBytes` by a running sum
 * computed in PostgreSQL (so a run past the budget is never loaded into the worker), each with `held`, how many rows
 * the range holds (counted up to one more than its offsets, to see a duplicate). Exported for the tests.
 */
export async function archivedRunRows(
  productId: string, channel: string, archiveDays: number, epoch: string, after: number, upTo: number, maxBytes: number,
): Promise<(Row & { held: string; running: string })[]> {
  const retained = archiveDays > 0
    ? sql`published_at >= now() - ${archiveDays * 86_400}::int * interval '1 second'`
    : sql`published_at >= now() - make_interval(days => retention_days)`
  return await sql<(Row & { held: string; running: string })[]>`
    select epoch, "offset", id, published_at, data, ref, held, running from (
      select epoch, "offset", id, published_at, data, ref::text as ref, count(*) over () as held,
        sum(coalesce(octet_length(data), octet_length(ref::text)) + octet_length(id) + ${HISTORY_ENTRY_FRAMING_BYTES + channel.length}::int) over w as running
      from (
        select * from realtime_archive
        where product_id = ${productId} and channel = ${channel} and epoch = ${epoch}
          and "offset" > ${after} and "offset" <= ${upTo} and ${retained} and ${afterPurge(productId, channel)}
        order by "offset", published_at
        limit ${upTo - after + 1}
      ) run
      window w as (order by "offset", published_at)
    ) counted
    where running <= ${maxBytes}
    order by "offset", published_at`
}
