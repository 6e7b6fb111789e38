// The mailer's metrics (docs/metrics.md): each delivery attempt by the outcome it recorded, how long the SMTP
// conversations took, and the queue (read at scrape time). `outcome` is one of the kinds an attempt ends in, a fixed list.
import { sql } from '../../shared/db/client'
import { cached } from '../../shared/metrics/cached'
import { counter, gauge, histogram } from '../../shared/metrics/registry'
import type { Finish } from './queue'

const attempts = counter('mailer_attempts_total',
  'Delivery attempts by the outcome recorded: delivered, delivery_delayed, bounced, failed, suppressed (no recipient left)', ['outcome', 'recorded'])
// Up to 60 s: past MAILER_SMTP_TIMEOUT_MS (30 s by default), so the conversations that time out land in a bucket of their own.
const SMTP_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 45, 60]
const smtp = histogram('mailer_smtp_duration_seconds', 'One SMTP conversation (connect to the server\'s answer or failure), by the kind of answer', ['result'], SMTP_BUCKETS)

export const mailerMetrics = {
  /**
   * `recorded`: false when the lease had passed to another mailer, which attempts the email again; `error` when
   * recording it failed (PostgreSQL away): the lease lapses and the email is attempted again.
   */
  attempt: (outcome: Finish['kind'], recorded: boolean | 'error') => attempts.inc({ outcome, recorded: String(recorded) }),
  smtp: (result: 'delivered' | 'temporary' | 'bounced' | 'failed', seconds: number) => smtp.observe({ result }, seconds),
}

/** Most unfinished emails the queue gauges count: a scrape reads at most this many index entries, whatever the backlog. */
export const QUEUE_COUNT_CAP = 100_000

/**
 * Due and waiting, each counted on its own up to the cap over the queue's own index (`emails_due`): one cap over both
 * would let a backlog of one hide the other. Kept 5 s, one query at a time (./cached.ts).
 */
const countQueue = cached(async () => {
  const [row] = await sql`
    select
      (select count(*) from (select 1 from emails where last_event in ('queued', 'sent', 'delivery_delayed') and next_attempt_at <= now() limit ${QUEUE_COUNT_CAP}) d)::int as due,
      (select count(*) from (select 1 from emails where last_event in ('queued', 'sent', 'delivery_delayed') and next_attempt_at > now() limit ${QUEUE_COUNT_CAP}) w)::int as waiting`
  return { due: row!.due as number, waiting: row!.waiting as number }
})

let watching = false

// Declared once, when the module loads; it reports only in a process that watches the queue (the mailer).
gauge('mailer_emails_pending', `Emails not yet finished, all mailers together: due now (those being attempted included), or waiting for a retry; each counted up to ${QUEUE_COUNT_CAP}`,
  ['state'], async function () {
    if (!watching) return
    try {
      const { due, waiting } = await countQueue()
      this.set({ state: 'due' }, due)
      this.set({ state: 'waiting' }, waiting)
    } catch {
      this.set({ state: 'due' }, Number.NaN)
      this.set({ state: 'waiting' }, Number.NaN)
    }
  })

/**
 * Reports the queue gauge from now on, NaN while PostgreSQL does not answer. `state="due"` staying above zero means the
 * mailers are behind. Calling it again changes nothing.
 */
export function watchQueue(): void {
  watching = true
}
