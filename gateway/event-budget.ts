// A client event with the product-wide client-event budget: events per second of one product across all its
// connections and gateways, counted in Redis (one-second fixed windows, key `gw:ce:<productId>:<second>`), besides each
// connection's token bucket. On one Redis the count and the publish are one script (publish-request.lua, the budget as
// its per-channel limit): one round trip per event. On a cluster the counter is in another slot: counted first.
import { countWhileDown, hitWindow, windowOf } from '../shared/fixed-window'
import { config } from '../shared/config'
import { publish, type PublishInput } from '../shared/realtime/broker'
import { publishInOneStep, scriptNotRun } from '../shared/realtime/publish-request'
import { onCluster } from '../shared/redis/cluster'

const WHAT = 'client event budget'
const prefix = (productId: string) => `gw:ce:${productId}`

/**
 * Publishes a client event unless the product is past config.realtime.productClientEventsPerSecond in this second
 * (then null, nothing published). Throws ApiError 429 past the fan-out byte budget, 503 when Redis cannot publish.
 * While Redis cannot count, the event is counted in this gateway's memory (see hitWindow): the limit then holds per gateway.
 */
export async function publishClientEvent(event: PublishInput & { senderConnectionId: string }, now = Date.now()): Promise<{ id: string } | null> {
  const limit = config.realtime.productClientEventsPerSecond
  if (onCluster()) {
    const { count } = await hitWindow(prefix(event.productId), 1, WHAT, now)
    if (count > limit) return null
    return publish(event)
  }
  const window = windowOf(prefix(event.productId), 1, now)
  try {
    const outcome = await publishInOneStep([{ ...event, id: event.id ?? crypto.randomUUID() }], { quota: { window, limit } })
    if (!('channels' in outcome)) throw new Error('a client event has no IP limit or key to refuse it')
    const [result] = outcome.channels
    if ('overQuota' in result!) return null
    if ('refused' in result!) throw result.refused
    return { id: result!.published.id }
  } catch (error) {
    // Redis did not run the script: the event is counted here, as hitWindow would, and the publish answers its 503.
    const cause = scriptNotRun(error)
    if (cause !== undefined && countWhileDown(WHAT, window, cause, now) > limit) return null
    throw error
  }
}
