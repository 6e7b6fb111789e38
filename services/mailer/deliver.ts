// One delivery attempt of a claimed email: drop suppressed recipients, assemble the message signed with the domain's
// DKIM key (./message.ts), hand it to the transport passed in (SMTP_URL in the mailer), and record what happened:
// `sent` (with `delivered`) only once the server accepted it. nodemailer gets only values built here: mailboxes as
// {name, address} and headers as a list of {key, value} strings checked again, never an object a request carried.
import { config } from '../../shared/config'
import { describeError, log } from '../../shared/log'
import { type HeaderLine, headerLines } from '../../shared/mail/headers'
import { signingDomain } from '../../shared/mail/sending-domain'
import { assembleMessage, type DomainKey, type Mailboxes, mailboxesOf } from './message'
import { classifyAccepted, classifyFailure, type Outcome, retryDelayMs } from './outcome'
import { mailerMetrics } from './metrics'
import { type ClaimedEmail, type Finish, finish as recordFinish, renewLease, suppressedAmong } from './queue'
import type { MailTransport } from './transport'

/** Sends and classifies: the SMTP server's answer, or the failure to reach it. */
async function attempt(transport: MailTransport, email: ClaimedEmail, mailboxes: Mailboxes, headers: HeaderLine[], key: DomainKey, recipients: string[]): Promise<Outcome> {
  const started = performance.now()
  let outcome: Outcome
  try {
    outcome = classifyAccepted(await transport.send(assembleMessage(email, mailboxes, headers, key, recipients)))
  } catch (error) {
    outcome = classifyFailure(error as Parameters<typeof classifyFailure>[0])
  }
  mailerMetrics.smtp(outcome.kind, (performance.now() - started) / 1000)
  return outcome
}

/**
 * Records an outcome (./queue.ts) and counts it, also when recording fails (`recorded="error"`): the attempt was made.
 * `record` is a parameter for the unit test of that count.
 */
export async function finish(email: ClaimedEmail, outcome: Finish, record = recordFinish): Promise<boolean> {
  let recorded: boolean | 'error' = 'error'
  try {
    recorded = await record(email, outcome)
    return recorded
  } finally {
    mailerMetrics.attempt(outcome.kind, recorded)
  }
}

/** Runs one attempt over `transport` and records it. Never throws for the email's own failures; database failures propagate. */
export async function deliver(email: ClaimedEmail, transport: MailTransport): Promise<void> {
  const mailboxes = mailboxesOf(email)
  const all = [...mailboxes.to, ...mailboxes.cc, ...mailboxes.bcc].map((m) => m.address.toLowerCase())
  const suppressed = await suppressedAmong(email.productId, all)
  const recipients = [...new Set(all.filter((address) => !suppressed.has(address)))]
  if (recipients.length === 0) {
    return void (await finish(email, { kind: 'suppressed', detail: `every recipient is on the suppression list: ${[...suppressed].join(', ')}` }))
  }
  const domain = email.domainId ? await signingDomain(email.domainId) : null
  if (!domain) return void (await finish(email, { kind: 'failed', detail: 'the sending domain was deleted before delivery' }))
  if (domain.status !== 'verified') {
    return void (await finish(email, { kind: 'failed', detail: `the sending domain is no longer verified (status ${domain.status})` }))
  }
  let headers: HeaderLine[]
  let headerNote: string | undefined
  try {
    // Checked again: an email queued before the header rules (or written by hand) may hold anything. A header that could
    // inject or forge fails the email (never sent); one merely reserved or counted since is dropped, and noted.
    ;({ lines: headers, note: headerNote } = headerLines(email.headers, config.mail.maxHeaders))
  } catch (error) {
    return void (await finish(email, { kind: 'failed', detail: (error as Error).message.slice(0, 500) }))
  }
  const key: DomainKey = domain
  const outcome = await whileLeased(email, () => attempt(transport, email, mailboxes, headers, key, recipients))
  const notes = [suppressed.size ? `suppressed recipients skipped: ${[...suppressed].join(', ')}` : undefined, headerNote].filter(Boolean)
  const sentDetail = notes.length ? notes.join('; ') : undefined
  const recorded = await finish(email, toFinish(email, outcome, sentDetail))
  if (!recorded) log('warn', 'mail outcome not recorded: the lease passed to another mailer', { emailId: email.id, outcome: outcome.kind })
  else if (outcome.kind !== 'delivered') log('info', 'mail attempt failed', { emailId: email.id, attempt: email.attempts, outcome: outcome.kind, reason: outcome.reason })
}

/**
 * Runs `work` while renewing the email's lease every third of its length, so no other mailer takes the email over
 * while this one is still talking to the SMTP server. A renewal that fails (the database is away) is logged and tried
 * again at the next tick; only a lease that really lapses lets another mailer in (at-least-once, as documented).
 */
async function whileLeased<T>(email: ClaimedEmail, work: () => Promise<T>): Promise<T> {
  const leaseMs = config.mail.leaseMs
  const timer = setInterval(() => {
    renewLease(email, leaseMs).then(
      (held) => held || log('warn', 'mail lease lost during an attempt', { emailId: email.id }),
      (error) => log('warn', 'mail lease renewal failed', { emailId: email.id, ...describeError(error) }),
    )
  }, Math.max(50, Math.floor(leaseMs / 3)))
  try {
    return await work()
  } finally {
    clearInterval(timer)
  }
}

function toFinish(email: ClaimedEmail, outcome: Outcome, sentDetail: string | undefined) {
  switch (outcome.kind) {
    case 'delivered': {
      const refused = outcome.refused.map((r) => `${r.address} (${r.code ?? 'refused'})`)
      const permanent = outcome.refused.filter((r) => (r.code ?? 0) >= 500).map((r) => r.address.toLowerCase())
      return { kind: 'delivered' as const, ...(refused.length ? { detail: `refused: ${refused.join(', ')}` } : {}), suppress: permanent, sentDetail }
    }
    case 'temporary':
      if (email.attempts >= config.mail.maxAttempts) {
        return { kind: 'failed' as const, detail: `gave up after ${email.attempts} attempts; last: ${outcome.reason}` }
      }
      return { kind: 'delivery_delayed' as const, detail: outcome.reason, retryInMs: retryDelayMs(email.attempts, config.mail.retryBaseMs, config.mail.retryMaxMs) }
    case 'bounced':
      return { kind: 'bounced' as const, detail: outcome.reason, suppress: outcome.suppress.map((a) => a.toLowerCase()) }
    case 'failed':
      return { kind: 'failed' as const, detail: outcome.reason }
  }
}
