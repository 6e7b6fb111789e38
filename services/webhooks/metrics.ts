// The webhooks process's metrics (docs/metrics.md): each attempt by outcome with its duration, the Realtime events
// recorded or dropped, and the deliveries pending across every webhooks process (read at scrape time). `outcome` is a fixed list: the answer's status class,
// `timeout`, or `refused` (no answer: the address refused by the URL rules, DNS failed, the connection failed).
import { sql } from '../../shared/db/client'
import { cached } from '../../shared/metrics/cached'
import { counter, gauge, histogram } from '../../shared/metrics/registry'
import type { OutboundResult } from '../../shared/webhooks/outbound'

/** Most pending deliveries the gauge counts: a scrape reads at most this many index entries, whatever the backlog. */
export const PENDING_COUNT_CAP = 100_000

const attempts = counter('webhook_attempts_total', 'Webhook delivery attempts by outcome: 2xx, 3xx (not followed), 4xx, 5xx, timeout, refused', ['outcome'])
const duration = histogram('webhook_attempt_duration_seconds', 'One webhook attempt, resolving to the end of the answer, by outcome', ['outcome'],
  [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30])

/**
 * What an attempt's result counts as. The timeout is told by sendOutbound's own words for it (shared/webhooks/outbound.ts:
 * no answer within the timeout, or an answer cut short by it).
 */
export function outcomeOf(result: OutboundResult): string {
  // Judged by the status when there is one, as the delivery is: a 2xx whose body was cut short is a success.
  if (result.status === null) return result.error?.startsWith('no answer within') ? 'timeout' : 'refused'
  const kind = Math.floor(result.status / 100)
  return kind >= 1 && kind <= 5 ? `${kind}xx` : 'other'
}

const realtimeEvents = counter('webhook_realtime_events_total',
  'Realtime webhook events read from the hooks streams, by outcome: recorded (a message for the endpoints that want it), unwanted (no endpoint wants it), dropped (trimmed from its stream while pending, or not one the scripts write)', ['outcome'])
const REALTIME_OUTCOMES = ['recorded', 'unwanted', 'dropped'] as const

export const webhookMetrics = {
  attempt(result: OutboundResult): void {
    const outcome = outcomeOf(result)
    attempts.inc({ outcome })
    duration.observe({ outcome }, result.durationMs / 1000)
  },
  /** Realtime events by outcome, once their batch is recorded (a batch read again after a crash counts again). */
  realtimeEvents(counts: Partial<Record<(typeof REALTIME_OUTCOMES)[number], number>>): void {
    for (const outcome of REALTIME_OUTCOMES) realtimeEvents.inc({ outcome }, counts[outcome] ?? 0)
  },
}

/** One capped count, kept 5 s and one query at a time (shared/metrics/cached.ts). */
const countPending = cached(async () => {
  const [row] = await sql`select count(*)::int as n from (select 1 from webhook_deliveries where state = 'pending' limit ${PENDING_COUNT_CAP}) p`
  return row!.n as number
})

let watching = false

// Declared once, when the module loads; it reports only in a process that watches the deliveries (webhooks).
gauge('webhook_deliveries_pending', `Webhook deliveries pending (due or waiting for a retry), all processes together; counted up to ${PENDING_COUNT_CAP}`, [],
  async function () {
    if (!watching) return
    try {
      this.set(await countPending())
    } catch {
      this.set(Number.NaN)
    }
  })

/** Reports the pending-deliveries gauge from now on; NaN while PostgreSQL does not answer. Calling it again changes nothing. */
export function watchPendingDeliveries(): void {
  watching = true
}
