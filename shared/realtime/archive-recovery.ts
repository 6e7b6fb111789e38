// History that outlives Redis: a cursor read whose first missed entry has left the Redis history (trimmed by size or
// age) is answered from the archive, when the namespace archives and the archive proves continuity. The Redis answer
// stands whenever it recovers by itself, and `recovered: false` stays whenever the archive cannot prove a gapless run
// from the cursor to what Redis still holds. docs/realtime-data-plane.md, "Archive".
import { config } from '../config'
import { logUnlessOutage } from '../errors'
import { archivedRunAfter } from './archive-read'
import { redis } from '../redis/client'
import { readHistory, type HistoryPolicy, type HistoryQuery, type HistoryResult } from './broker'
import { channelKeys } from './keys'

/** Most entries one recovery takes from the archive (a larger gap is refused unread): the most a Redis history holds. */
export const ARCHIVE_RECOVERY_MAX_ENTRIES = 10_000

/**
 * readHistory, and for a cursor Redis cannot serve, the archive: entries `offset + 1 ..` of the cursor's epoch from the
 * archive, without a hole, up to an offset from which Redis recovers the rest (a second cursor read). All or nothing,
 * within the same reply budget as history: any doubt (another epoch, a hole, a gap over the budget, the archiver not
 * yet past the entries Redis dropped) answers Redis' own `recovered: false`. `archiveDaysOf` answers the namespace's
 * archive retention (0: it does not archive); it is asked only when Redis alone cannot recover.
 */
export async function readHistoryWithArchive(
  productId: string, channel: string, policy: HistoryPolicy, archiveDaysOf: () => Promise<number>, query: HistoryQuery,
  maxReplyBytes = config.realtime.historyMaxReplyBytes,
): Promise<HistoryResult> {
  const result = await readHistory(productId, channel, policy, query, maxReplyBytes)
  if (result.recovered || !('offset' in query)) return result
  // Only within the epoch Redis still has: an epoch change means the offsets started again.
  if (query.epoch !== result.epoch || query.offset >= result.offset) return result
  try {
    return (await fromArchive(productId, channel, policy, archiveDaysOf, query, result, maxReplyBytes)) ?? result
  } catch (error) {
    // The archive is what PostgreSQL adds; without it (down, slow) the answer is Redis' own, never an error.
    logUnlessOutage('history recovery from the archive failed', error, { productId })
    return result
  }
}

/** The recovered answer, or null when the archive cannot prove a gapless run to what Redis holds. */
async function fromArchive(
  productId: string, channel: string, policy: HistoryPolicy, archiveDaysOf: () => Promise<number>,
  query: { offset: number; epoch: string }, result: HistoryResult, maxReplyBytes: number,
): Promise<HistoryResult | null> {
  // Redis' first entry first: the archive supplies only the offsets below it, and a gap larger than any recovery is
  // refused before PostgreSQL is asked anything.
  const first = await firstHistoryOffset(productId, channel, result.offset, policy.historySize)
  const upTo = first - 1
  if (upTo <= query.offset || upTo - query.offset > ARCHIVE_RECOVERY_MAX_ENTRIES) return null
  // Asked only now: most reads recover from Redis alone.
  const archiveDays = await archiveDaysOf()
  if (archiveDays <= 0) return null
  const run = await archivedRunAfter(productId, channel, archiveDays, query.epoch, query.offset, upTo, maxReplyBytes)
  if (!run) return null
  const rest = await readHistory(productId, channel, policy, { offset: upTo, epoch: query.epoch }, maxReplyBytes - run.bytes)
  if (!rest.recovered || rest.epoch !== query.epoch) return null
  return { entries: [...run.entries, ...rest.entries], offset: rest.offset, epoch: rest.epoch, recovered: true }
}

/**
 * The offset of the first entry Redis' history serves, or `top + 1` when its stream holds none: the stream's head, or
 * the first of the newest `size` when it holds more between its batched trims (history.lua serves no older one).
 */
async function firstHistoryOffset(productId: string, channel: string, top: number, size: number): Promise<number> {
  const [head] = await redis().xrange(channelKeys(productId, channel).hist, '-', '+', 'COUNT', 1)
  return head ? Math.max(Number(head[0].split('-')[0]), top - size + 1) : top + 1
}
