// The product-wide client-event budget: events per second of one product across all its connections and gateways,
// counted in Redis (one-second fixed windows, key `gw:ce:<productId>:<second>`), besides each connection's token bucket.
import { config } from '../shared/config'
import { hitWindow } from '../shared/fixed-window'

/**
 * Counts one client event of the product; false past config.realtime.productClientEventsPerSecond in this second.
 * While Redis cannot count, the event is counted in this gateway's memory (see hitWindow): the limit then holds per gateway.
 */
export async function takeProductEvent(productId: string, now = Date.now()): Promise<boolean> {
  const { count } = await hitWindow(`gw:ce:${productId}`, 1, 'client event budget', now)
  return count <= config.realtime.productClientEventsPerSecond
}
