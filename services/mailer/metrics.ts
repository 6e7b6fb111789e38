// The mailer's metrics (docs/metrics.md): each delivery attempt by the outcome it recorded, and how long the SMTP
// conversations took. `outcome` is one of the kinds an attempt ends in, a fixed list.
import { counter, histogram } from '../../shared/metrics/registry'
import type { Finish } from './queue'

const attempts = counter('mailer_attempts_total',
  'Delivery attempts by the outcome recorded: delivered, delivery_delayed, bounced, failed, suppressed (no recipient left)', ['outcome', 'recorded'])
const smtp = histogram('mailer_smtp_duration_seconds', 'One SMTP conversation (connect to the server\'s answer or failure), by the kind of answer', ['result'])

export const mailerMetrics = {
  /** `recorded`: false when the lease had passed to another mailer, which attempts the email again. */
  attempt: (outcome: Finish['kind'], recorded: boolean) => attempts.inc({ outcome, recorded: String(recorded) }),
  smtp: (result: 'delivered' | 'temporary' | 'bounced' | 'failed', seconds: number) => smtp.observe({ result }, seconds),
}
