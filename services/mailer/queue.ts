// The delivery queue is the emails table. A mailer claims due emails with a lease (FOR UPDATE SKIP LOCKED: mailers
// never claim the same email at once), and records each outcome only while its lease stands. A mailer that dies
// leaves its emails leased; when the lease runs out another mailer claims them again: nothing is lost, and an email
// whose acceptance was not recorded yet may be sent twice, with the same Message-ID (at-least-once; docs/mail.md).
import { sql } from '../../shared/db/client'
import type { StoredMailboxes } from '../../shared/mail/addresses'
import { type Queryable, recordEvent } from '../../shared/webhooks/outbox'

export interface ClaimedEmail {
  id: string
  productId: string
  domainId: string | null
  fromAddress: string
  to: string[]
  cc: string[]
  bcc: string[]
  replyTo: string[]
  subject: string
  html: string | null
  text: string | null
  /** As stored: checked again before use (shared/mail/headers.ts), never handed to nodemailer as it is. */
  headers: unknown
  /** Every mailbox parsed at queue time; null on emails queued before mailboxes were stored (parse the text then). */
  mailboxes: StoredMailboxes | null
  messageId: string
  createdAt: Date
  /** This attempt's number (1 for the first). */
  attempts: number
  /** Proves the lease is still this mailer's when the outcome is recorded. */
  leaseToken: string
}

export type EventKind = 'sent' | 'delivered' | 'delivery_delayed' | 'bounced' | 'failed' | 'suppressed'

/** Claims up to `limit` due emails for `leaseMs`. */
export async function claimDue(limit: number, leaseMs: number): Promise<ClaimedEmail[]> {
  const rows = await sql`
    with due as (
      select id from emails
      where last_event in ('queued', 'sent', 'delivery_delayed') and next_attempt_at <= now()
        and (lease_until is null or lease_until < now())
      order by next_attempt_at
      limit ${limit}
      for update skip locked
    )
    update emails e
    set lease_until = now() + ${leaseMs} * interval '1 millisecond', lease_token = gen_random_uuid(), attempts = e.attempts + 1
    from due where e.id = due.id
    returning e.*`
  return rows.map((row) => ({
    id: row.id, productId: row.product_id, domainId: row.domain_id, fromAddress: row.from_address, to: row.to_addresses,
    cc: row.cc_addresses, bcc: row.bcc_addresses, replyTo: row.reply_to, subject: row.subject, html: row.html,
    text: row.text, headers: row.headers, mailboxes: row.mailboxes ?? null, messageId: row.message_id,
    createdAt: row.created_at, attempts: row.attempts, leaseToken: row.lease_token,
  }))
}

/**
 * Gives back emails claimed but never attempted (the mailer was stopped while it claimed them): no lease, and the
 * attempt it counted uncounted, so the next mailer takes them at once and their attempt numbers stay true. Only where
 * the lease is still this claim's.
 */
export async function releaseClaims(emails: ClaimedEmail[]): Promise<void> {
  if (emails.length === 0) return
  await sql`
    update emails e set lease_until = null, lease_token = null, attempts = e.attempts - 1
    from unnest(${emails.map((e) => e.id)}::uuid[], ${emails.map((e) => e.leaseToken)}::uuid[]) as claimed(id, token)
    where e.id = claimed.id and e.lease_token = claimed.token`
}

/** The addresses among `addresses` (lower case) on the product's suppression list. */
export async function suppressedAmong(productId: string, addresses: string[]): Promise<Set<string>> {
  if (addresses.length === 0) return new Set()
  const rows = await sql`select address from mail_suppressions where product_id = ${productId} and address = any(${addresses})`
  return new Set(rows.map((r) => r.address as string))
}

/**
 * Extends the lease of an email whose attempt is still running: an SMTP conversation may legitimately outlast one lease
 * (a slow server, a large message), and a lease that ran out mid-attempt would let another mailer send it again. False
 * when the lease is no longer this mailer's.
 */
export async function renewLease(email: ClaimedEmail, leaseMs: number): Promise<boolean> {
  const rows = await sql`
    update emails set lease_until = now() + ${leaseMs} * interval '1 millisecond'
    where id = ${email.id} and lease_token = ${email.leaseToken} returning id`
  return rows.length > 0
}

// Every event's time is its transaction's `now()`: the same instant as the email's last_event_at.

/**
 * The webhook event of an email event (`email.<kind>`, docs/webhooks.md), recorded in the same transaction: a product's
 * Mail endpoints hear of it if and only if it was recorded.
 */
function recordEmailEvent(tx: Queryable, email: ClaimedEmail, kind: EventKind, detail: string | undefined) {
  return recordEvent(tx, {
    productId: email.productId, area: 'mail', kind: `email.${kind}`,
    // emailId stays the first member of data: an email's deliveries are found by it at the payload's start
    // (mail_emails_deliveries_list, migration 0023).
    data: {
      emailId: email.id, from: email.fromAddress, to: email.to, subject: email.subject,
      createdAt: email.createdAt.toISOString(), attempt: email.attempts, detail: detail ?? null,
    },
  })
}

export interface Finish {
  kind: Exclude<EventKind, 'sent'>
  detail?: string
  /** For `delivered`: the detail of the `sent` event recorded with it (recipients skipped as suppressed). */
  sentDetail?: string
  /** For `delivery_delayed`: when the next attempt may start. */
  retryInMs?: number
  /** Addresses to put on the product's suppression list (lower case), with why. */
  suppress?: string[]
}

/**
 * Records an attempt's outcome, its event and any suppressions, in one transaction, and releases the lease. False
 * (nothing written) when the lease is no longer this mailer's: another mailer took the email over.
 *
 * `sent` is written here only, and only with `delivered`: the SMTP server accepted the message. An email is never
 * `sent` while its attempt is in flight, so a mailer that dies mid-attempt leaves it `queued` (or `delivery_delayed`)
 * for the next one. A row left `sent` by a mailer from before this rule gets no second `sent`.
 */
export async function finish(email: ClaimedEmail, outcome: Finish): Promise<boolean> {
  return sql.begin(async (tx) => {
    const [held] = await tx`select last_event from emails where id = ${email.id} and lease_token = ${email.leaseToken} for update`
    if (!held) return false
    if (outcome.kind === 'delivered' && held.last_event !== 'sent') {
      await tx`insert into email_events (email_id, kind, detail, at) values (${email.id}, 'sent', ${outcome.sentDetail ?? null}, now())`
      await recordEmailEvent(tx, email, 'sent', outcome.sentDetail)
    }
    const next = outcome.retryInMs !== undefined ? sql`now() + ${outcome.retryInMs} * interval '1 millisecond'` : sql`next_attempt_at`
    const [row] = await tx`
      update emails set last_event = ${outcome.kind}, last_event_at = now(), lease_until = null, lease_token = null,
        next_attempt_at = ${next}
      where id = ${email.id} and lease_token = ${email.leaseToken}
      returning id`
    if (!row) return false
    await tx`insert into email_events (email_id, kind, detail, at) values (${email.id}, ${outcome.kind}, ${outcome.detail ?? null}, now())`
    await recordEmailEvent(tx, email, outcome.kind, outcome.detail)
    for (const address of outcome.suppress ?? []) {
      await tx`
        insert into mail_suppressions (product_id, address, reason) values (${email.productId}, ${address}, ${outcome.detail ?? 'bounced'})
        on conflict do nothing`
    }
    return true
  })
}
