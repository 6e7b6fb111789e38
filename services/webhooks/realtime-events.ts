// The Realtime webhook events into the outbox: the shards' hooks streams (produced, de-flapped, by the presence and
// occupancy scripts; shared/realtime/hook-events.ts) read with the consumer group `webhooks`, each batch recorded in
// one transaction and acknowledged after it commits. A process killed in between leaves the batch pending: it is read
// again (or claimed by another process) and recorded once, since each event's stream entry is its dedupe key.
import { config } from '../../shared/config'
import { sql } from '../../shared/db/client'
import { consumeHookEvents, type HookEvent } from '../../shared/realtime/hook-events'
import { log } from '../../shared/log'
import { EVENT_KINDS } from '../../shared/webhooks/events'
import { recordEvent } from '../../shared/webhooks/outbox'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
const KINDS: readonly string[] = EVENT_KINDS.realtime

/** Records one shard's batch: for each event, a message and its deliveries when an endpoint wants it (else nothing). */
export async function recordHookEvents(events: HookEvent[]): Promise<void> {
  await sql.begin(async (tx) => {
    for (const event of events) {
      // An entry no script of ours writes would fail its batch at every read, stalling the shard: dropped, and said.
      if (!UUID.test(event.productId) || !KINDS.includes(event.kind)) {
        log('warn', 'realtime webhook event dropped: not one the scripts write', { id: event.id, kind: String(event.kind).slice(0, 64) })
        continue
      }
      await recordEvent(tx, { productId: event.productId, area: 'realtime', kind: event.kind, data: event.data, dedupeKey: event.id })
    }
  })
}

/** Reads and records until stopped; `stop` resolves once every shard's loop has ended. */
export function startRealtimeEvents(): { stop(): Promise<void> } {
  const controller = new AbortController()
  const done = consumeHookEvents({ consumer: config.webhooks.consumer, handle: recordHookEvents, signal: controller.signal })
  return {
    async stop() {
      controller.abort()
      await done
    },
  }
}
