// The Realtime webhook events into the outbox: the shards' hooks streams (produced, de-flapped, by the presence and
// occupancy scripts; shared/realtime/hook-events.ts) read with the consumer group `webhooks`, each batch recorded in
// one transaction and acknowledged after it commits. A process killed in between leaves the batch pending: it is read
// again (or claimed by another process) and recorded once, since each event's stream entry is its dedupe key.
import { config } from '../../shared/config'
import { sql } from '../../shared/db/client'
import { consumeHookEvents, type HookEvent } from '../../shared/realtime/hook-events'
import { log } from '../../shared/log'
import { ALL_KINDS, EVENT_KINDS } from '../../shared/webhooks/events'
import { recordEvent } from '../../shared/webhooks/outbox'
import { isUuid } from '../../shared/ids'
import { webhookMetrics } from './metrics'

const KINDS: readonly string[] = EVENT_KINDS.realtime

/**
 * Records one shard's batch: for each event, a message and its deliveries when an endpoint wants it (else nothing).
 * Most events are of products with no realtime endpoint: one query per batch finds the products and kinds that have
 * one, and only their events cost a statement each (none at all, no transaction, when the batch has none).
 */
export async function recordHookEvents(events: HookEvent[]): Promise<void> {
  const valid = events.filter((event) => {
    // An entry no script of ours writes would fail its batch at every read, stalling the shard: dropped, and said.
    if (isUuid(event.productId) && KINDS.includes(event.kind)) return true
    log('warn', 'realtime webhook event dropped: not one the scripts write', { id: event.id, kind: String(event.kind).slice(0, 64) })
    return false
  })
  const dropped = events.length - valid.length
  if (!valid.length) return webhookMetrics.realtimeEvents({ dropped })
  // Counted once the transaction commits: a batch that fails stays pending and is counted when it is recorded.
  let recorded = 0
  await sql.begin(async (tx) => {
    const products = [...new Set(valid.map((event) => event.productId))]
    const endpoints = await tx<{ product_id: string; event_kinds: string[] }[]>`
      select product_id, event_kinds from webhook_endpoints where area = 'realtime' and enabled and product_id in ${tx(products)}`
    const wanted = new Set(endpoints.flatMap((e) => e.event_kinds.map((kind) => `${e.product_id}/${kind}`)))
    for (const event of valid) {
      const product = event.productId.toLowerCase() // as PostgreSQL answers a uuid
      if (!wanted.has(`${product}/${event.kind}`) && !wanted.has(`${product}/${ALL_KINDS}`)) continue
      if (await recordEvent(tx, { productId: event.productId, area: 'realtime', kind: event.kind, data: event.data, dedupeKey: event.id })) recorded++
    }
  })
  webhookMetrics.realtimeEvents({ recorded, unwanted: valid.length - recorded, dropped })
}

/** Reads and records until stopped; `stop` resolves once every shard's loop has ended. */
export function startRealtimeEvents(): { stop(): Promise<void> } {
  const controller = new AbortController()
  const done = consumeHookEvents({
    consumer: config.webhooks.consumer, handle: recordHookEvents, signal: controller.signal,
    dropped: (entries) => webhookMetrics.realtimeEvents({ dropped: entries }),
  })
  return {
    async stop() {
      controller.abort()
      await done
    },
  }
}
