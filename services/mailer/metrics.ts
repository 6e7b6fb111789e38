// The mailer's metrics (docs/metrics.md): each delivery attempt by the outcome it recorded, how long the SMTP
// conversations took, and the queue (read at scrape time). `outcome` is one of the kinds an attempt ends in, a fixed list.
import { sql } from '../../shared/db/client'
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
 * The queue gauge, from one capped count per scrape over the queue's own index (`emails_due`); NaN while PostgreSQL
 * does not answer. `state="due"` staying above zero means the mailers are behind.
 */
export function watchQueue(): void {
  gauge('mailer_emails_pending', `Emails not yet finished, all mailers together: due now (those being attempted included), or waiting for a retry; counted up to ${QUEUE_COUNT_CAP}`,
    ['state'], async function () {
      try {
        const [row] = await sql`
          select (count(*) filter (where next_attempt_at <= now()))::int as due, (count(*) filter (where next_attempt_at > now()))::int as waiting
          from (select next_attempt_at from emails where last_event in ('queued', 'sent', 'delivery_delayed') limit ${QUEUE_COUNT_CAP}) q`
        this.set({ state: 'due' }, row!.due as number)
        this.set({ state: 'waiting' }, row!.waiting as number)
      } catch {
        this.set({ state: 'due' }, Number.NaN)
        this.set({ state: 'waiting' }, Number.NaN)
      }
    })
}
