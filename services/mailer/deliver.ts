// One delivery attempt of a claimed email: drop suppressed recipients, build the MIME message with nodemailer, sign it
// with the domain's DKIM key, hand it to SMTP_URL, and record what happened.
import { createTransport, type Transporter } from 'nodemailer'
import { config } from '../../shared/config'
import { sql } from '../../shared/db/client'
import { aadOf } from '../../shared/db/seal-secrets'
import { describeError, log } from '../../shared/log'
import { parseMailbox } from '../../shared/mail/addresses'
import { open } from '../../shared/secrets'
import { classifyAccepted, classifyFailure, type Outcome, retryDelayMs } from './outcome'
import { type ClaimedEmail, finish, markSent, renewLease, suppressedAmong } from './queue'

interface DomainKey {
  name: string
  selector: string
  privateKey: string
}

/** Private DKIM keys by domain id: unsealed once per mailer (a domain's key never changes). */
const privateKeys = new Map<string, string>()

/** The sending domain as it is now: deleted (null), no longer verified, or its signing key. */
async function sendingDomain(domainId: string): Promise<{ status: string; key: DomainKey } | null> {
  const cached = privateKeys.get(domainId)
  const [row] = cached
    ? await sql`select name, dkim_selector, status from mail_domains where id = ${domainId}`
    : await sql`select name, dkim_selector, status, secret_sealed from mail_domains where id = ${domainId}`
  if (!row) return null
  const privateKey = cached ?? open(Buffer.from(row.secret_sealed), aadOf('mail_domains', domainId)).toString()
  privateKeys.set(domainId, privateKey)
  return { status: row.status, key: { name: row.name, selector: row.dkim_selector, privateKey } }
}

let transport: Transporter | undefined

/** One transport per mailer, from SMTP_URL: plain SMTP, upgraded with STARTTLS when the server offers it. */
function smtp(): Transporter {
  if (transport) return transport
  const url = new URL(config.mail.smtpUrl)
  transport = createTransport({
    host: url.hostname,
    port: Number(url.port || (url.protocol === 'smtps:' ? 465 : 25)),
    secure: url.protocol === 'smtps:',
    ...(url.username ? { auth: { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) } } : {}),
    connectionTimeout: config.mail.smtpTimeoutMs,
    greetingTimeout: config.mail.smtpTimeoutMs,
    socketTimeout: config.mail.smtpTimeoutMs,
  })
  return transport
}

const addressOf = (value: string) => parseMailbox(value)?.address ?? value
/**
 * A stored mailbox as nodemailer's {name, address}: nodemailer then quotes and encodes the name itself, so nothing in
 * a display name is ever read as header syntax (an address that no longer parses goes as a bare address).
 */
const mailboxOf = (value: string) => {
  const mailbox = parseMailbox(value)
  return mailbox ? { name: mailbox.name ?? '', address: mailbox.address } : { name: '', address: value }
}

/** Sends and classifies: the SMTP server's answer, or the failure to reach it. */
async function attempt(email: ClaimedEmail, key: DomainKey, recipients: string[]): Promise<Outcome> {
  try {
    const info = await smtp().sendMail({
      from: mailboxOf(email.fromAddress), to: email.to.map(mailboxOf), cc: email.cc.map(mailboxOf), bcc: email.bcc.map(mailboxOf),
      replyTo: email.replyTo.map(mailboxOf),
      subject: email.subject, html: email.html ?? undefined, text: email.text ?? undefined, headers: email.headers,
      messageId: email.messageId, date: email.createdAt,
      envelope: { from: addressOf(email.fromAddress), to: recipients },
      dkim: { domainName: key.name, keySelector: key.selector, privateKey: key.privateKey },
    })
    return classifyAccepted(info as { rejectedErrors?: { recipient?: string; responseCode?: number }[] })
  } catch (error) {
    return classifyFailure(error as Parameters<typeof classifyFailure>[0])
  }
}

/** Runs one attempt and records it. Never throws for the email's own failures; database failures propagate. */
export async function deliver(email: ClaimedEmail): Promise<void> {
  const all = [...email.to, ...email.cc, ...email.bcc].map((value) => addressOf(value).toLowerCase())
  const suppressed = await suppressedAmong(email.productId, all)
  const recipients = [...new Set(all.filter((address) => !suppressed.has(address)))]
  if (recipients.length === 0) {
    return void (await finish(email, { kind: 'suppressed', detail: `every recipient is on the suppression list: ${[...suppressed].join(', ')}` }))
  }
  const domain = email.domainId ? await sendingDomain(email.domainId) : null
  if (!domain) return void (await finish(email, { kind: 'failed', detail: 'the sending domain was deleted before delivery' }))
  if (domain.status !== 'verified') {
    return void (await finish(email, { kind: 'failed', detail: `the sending domain is no longer verified (status ${domain.status})` }))
  }
  const key = domain.key
  if (email.attempts === 1) {
    const note = suppressed.size ? `suppressed recipients skipped: ${[...suppressed].join(', ')}` : undefined
    if (!(await markSent(email, note))) return
  }
  const outcome = await whileLeased(email, () => attempt(email, key, recipients))
  const recorded = await finish(email, toFinish(email, outcome))
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

function toFinish(email: ClaimedEmail, outcome: Outcome) {
  switch (outcome.kind) {
    case 'delivered': {
      const refused = outcome.refused.map((r) => `${r.address} (${r.code ?? 'refused'})`)
      const permanent = outcome.refused.filter((r) => (r.code ?? 0) >= 500).map((r) => r.address.toLowerCase())
      return { kind: 'delivered' as const, ...(refused.length ? { detail: `refused: ${refused.join(', ')}` } : {}), suppress: permanent }
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

/** Closes the SMTP transport (at shutdown). */
export function closeTransport(): void {
  try {
    transport?.close()
  } catch (error) {
    log('warn', 'smtp transport close failed', describeError(error))
  }
  transport = undefined
}
