// The product's active channels as the console and the API show them: each with its namespace, its subscribers over
// every gateway, and its presence counts where the namespace keeps a roster. Pages come from shared/realtime/active-channels.ts.
import { badRequest } from '../../../shared/errors'
import { PAGE_DEFAULT } from '../../../shared/catalog/pagination'
import { listActiveChannels } from '../../../shared/realtime/active-channels'
import { namespaceOf } from '../../../shared/realtime/names'
import { productPolicies } from '../../../shared/realtime/policies'
import { presenceCount } from '../../../shared/realtime/presence'

export interface ActiveChannelsFilter {
  prefix?: string
  namespace?: string
  limit?: number
  after?: string
}

export interface ActiveChannelOut {
  channel: string
  namespace: string
  subscribers: number
  /** Null when the namespace keeps no roster (presence off, or the namespace was deleted since). */
  presence: { members: number; connections: number } | null
}

/** One page of the product's active channels, by name; `prefix` and `namespace` narrow it (one or the other). */
export async function activeChannels(productId: string, filter: ActiveChannelsFilter): Promise<{ channels: ActiveChannelOut[]; has_more: boolean }> {
  if (filter.prefix !== undefined && filter.namespace !== undefined) {
    throw badRequest('Give prefix or namespace, not both', [
      { path: '/query/prefix', message: 'not allowed with namespace' }, { path: '/query/namespace', message: 'not allowed with prefix' },
    ])
  }
  // Not pageOf: it lower-cases a string cursor, and channel names are case-sensitive.
  const limit = filter.limit ?? PAGE_DEFAULT
  const prefix = filter.namespace !== undefined ? `${filter.namespace}:` : filter.prefix
  const [listed, policies] = await Promise.all([
    listActiveChannels(productId, { limit, ...(prefix !== undefined ? { prefix } : {}), ...(filter.after !== undefined ? { after: filter.after } : {}) }),
    productPolicies(productId),
  ])
  const channels = await Promise.all(listed.channels.map(async ({ channel, subscriptions }) => {
    const namespace = namespaceOf(channel)
    const presence = policies.namespaces.get(namespace)?.presence ? await presenceCount(productId, channel) : null
    return { channel, namespace, subscribers: subscriptions, presence }
  }))
  return { channels, has_more: listed.has_more }
}
