// Channel reads for a backend: history (window or cursor), archive (time range, paged), presence roster, and status
// (occupancy and stream position).
import { badRequest, type FieldError } from '../errors'
import { readArchive, type ArchiveQuery, type ArchiveResult } from './archive-read'
import { readHistoryWithArchive } from './archive-recovery'
import { channelTop, type HistoryQuery as BrokerQuery, type HistoryResult } from './broker'
import { namespaceOf } from './names'
import { listPresence, presenceCount, type PresenceMember } from './presence'
import { namespaceNotRegistered, presenceDisabled } from './channel-errors'
import { productPolicies, type NamespacePolicy } from './policies'
import type { HistoryQuery } from './request-schemas'

async function policyOf(productId: string, channel: string): Promise<NamespacePolicy> {
  const namespace = namespaceOf(channel)
  const policy = (await productPolicies(productId)).namespaces.get(namespace)
  if (!policy) throw namespaceNotRegistered(namespace, '/path/channel')
  return policy
}

/** Exactly one of: a window (last_n or last_ms, not both) or a cursor (offset and epoch together). */
export function historyQuery(query: HistoryQuery): BrokerQuery {
  const has = (name: keyof HistoryQuery) => query[name] !== undefined
  const field = (name: string, message: string): FieldError => ({ path: `/query/${name}`, message })
  const window = has('last_n') || has('last_ms')
  const cursor = has('offset') || has('epoch')
  if (has('last_n') && has('last_ms')) {
    throw badRequest('Give one window: last_n or last_ms, not both', [field('last_n', 'not allowed with last_ms'), field('last_ms', 'not allowed with last_n')])
  }
  if (window && cursor) {
    const names = (['last_n', 'last_ms', 'offset', 'epoch'] as const).filter(has)
    throw badRequest('Give either a window (last_n or last_ms) or a cursor (offset and epoch), not both',
      names.map((name) => field(name, 'window and cursor cannot be combined')))
  }
  if (cursor && !(has('offset') && has('epoch'))) {
    const missing = has('offset') ? 'epoch' : 'offset'
    throw badRequest(`A cursor needs both offset and epoch; ${missing} is missing`, [field(missing, `is required with ${missing === 'epoch' ? 'offset' : 'epoch'}`)])
  }
  if (!window && !cursor) {
    throw badRequest('Give a window (last_n or last_ms) or a cursor (offset and epoch)', [
      field('last_n', 'one of last_n, last_ms or offset+epoch is required'), field('last_ms', 'one of last_n, last_ms or offset+epoch is required'),
      field('offset', 'one of last_n, last_ms or offset+epoch is required'), field('epoch', 'one of last_n, last_ms or offset+epoch is required'),
    ])
  }
  if (query.last_n !== undefined) return { last_n: query.last_n }
  if (query.last_ms !== undefined) return { last_ms: query.last_ms }
  return { offset: query.offset!, epoch: query.epoch! }
}

/** The broker's history result (entries ascending, each with `data` or `ref`), named by its channel. */
export type HistoryResponse = HistoryResult & { channel: string }

/**
 * A namespace that keeps no history answers an empty result (offset 0, epoch ''), not an error. A cursor whose entries
 * left Redis is recovered from the archive when the namespace archives and the archive proves continuity.
 */
export async function channelHistory(productId: string, channel: string, query: HistoryQuery): Promise<HistoryResponse> {
  const brokerQuery = historyQuery(query)
  const policy = await policyOf(productId, channel)
  return { channel, ...(await readHistoryWithArchive(productId, channel, policy.broker, async () => policy.archiveDays ?? 0, brokerQuery)) }
}

/**
 * One page of the channel's archive. A namespace that does not archive answers an empty page (as history does), except
 * for rows it kept before its archive was removed, until they expire.
 */
export async function channelArchive(productId: string, channel: string, query: ArchiveQuery): Promise<ArchiveResult> {
  const policy = await policyOf(productId, channel)
  return readArchive(productId, channel, policy.archiveDays ?? 0, query)
}

export async function channelPresence(productId: string, channel: string): Promise<{ channel: string; members: PresenceMember[] }> {
  const policy = await policyOf(productId, channel)
  if (!policy.presence) throw presenceDisabled(policy.name)
  return { channel, members: await listPresence(productId, channel) }
}

export interface ChannelStatus {
  channel: string
  namespace: string
  /** Null when the namespace has presence off. */
  presence: { members: number; connections: number } | null
  /** Null when the namespace keeps no history; offset 0 and epoch '' while the channel has none yet (or it expired). */
  history: { offset: number; epoch: string } | null
}

/** Is anyone there, and where is the stream: what a backend checks before publishing or to resume reading. */
export async function channelStatus(productId: string, channel: string): Promise<ChannelStatus> {
  const policy = await policyOf(productId, channel)
  const [presence, top] = await Promise.all([
    policy.presence ? presenceCount(productId, channel) : null,
    policy.history ? channelTop(productId, channel) : null,
  ])
  return {
    channel, namespace: policy.name, presence,
    history: policy.history ? (top ?? { offset: 0, epoch: '' }) : null,
  }
}
