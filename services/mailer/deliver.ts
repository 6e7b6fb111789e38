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
import { type ClaimedEmail, finish, markSent, suppressedAmong } from './queue'

interface DomainKey {
  name: string
  selector: string
  privateKey: string
}

/** DKIM keys by domain id: opened once per mailer (a domain's key never changes; a deleted domain is not asked again). */
const keys = new Map<string, DomainKey>()

async function domainKey(domainId: string): Promise<DomainKey | null> {
  const cached = keys.get(domainId)
  if (cached) return cached
  const [row] = await sql`select name, dkim_selector, secret_sealed from mail_domains where id = ${domainId}`
  if (!row) return null
  const key = { name: row.name, selector: row.dkim_selector, privateKey: open(Buffer.from(row.secret_sealed), aadOf('mail_domains', domainId)).toString() }
  keys.set(domainId, key)
  return key
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

/** Sends and classifies: the SMTP server's answer, or the failure to reach it. */
async function attempt(email: ClaimedEmail, key: DomainKey, recipients: string[]): Promise<Outcome> {
  try {
    const info = await smtp().sendMail({
      from: email.fromAddress, to: email.to, cc: email.cc, bcc: email.bcc, replyTo: email.replyTo,
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
  const key = email.domainId ? await domainKey(email.domainId) : null
  if (!key) return void (await finish(email, { kind: 'failed', detail: 'the sending domain was deleted before delivery' }))
  if (email.attempts === 1) {
    const note = suppressed.size ? `suppressed recipients skipped: ${[...suppressed].join(', ')}` : undefined
    if (!(await markSent(email, note))) return
  }
  const outcome = await attempt(email, key, recipients)
  const recorded = await finish(email, toFinish(email, outcome))
  if (!recorded) log('warn', 'mail outcome not recorded: the lease passed to another mailer', { emailId: email.id, outcome: outcome.kind })
  else if (outcome.kind !== 'delivered') log('info', 'mail attempt failed', { emailId: email.id, attempt: email.attempts, outcome: outcome.kind, reason: outcome.reason })
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
