// The message of one delivery attempt, assembled as the options nodemailer writes MIME from: mailboxes as
// {name, address}, the header lines checked again (shared/mail/headers.ts), the html and text parts, the stored
// Message-ID and date, the envelope without suppressed recipients, and the domain's DKIM key to sign with. A plain
// function: nothing here sends or reads the database, so the unit tier checks the MIME it becomes.
import type Mail from 'nodemailer/lib/mailer'
import { parseMailbox, type StoredMailbox } from '../../shared/mail/addresses'
import type { HeaderLine } from '../../shared/mail/headers'
import type { ClaimedEmail } from './queue'

/** A sending domain's DKIM signing key. */
export interface DomainKey {
  name: string
  selector: string
  privateKey: string
}

/** What a MailTransport hands to SMTP: nodemailer's message options, built only by assembleMessage. */
export type OutgoingMessage = Mail.Options

/**
 * A mailbox of an email queued before mailboxes were stored: parsed from its text once, here (an address that no
 * longer parses goes as a bare address, which nodemailer checks and encodes itself).
 */
const legacyMailbox = (value: string): StoredMailbox => {
  const mailbox = parseMailbox(value)
  return mailbox ? { name: mailbox.name ?? '', address: mailbox.address } : { name: '', address: value }
}

/** The email's mailboxes as nodemailer's {name, address}: stored at queue time, or parsed once for older emails. */
export function mailboxesOf(email: ClaimedEmail) {
  if (email.mailboxes) {
    const { from, to, cc, bcc, reply_to: replyTo } = email.mailboxes
    return { from, to, cc, bcc, replyTo }
  }
  return {
    from: legacyMailbox(email.fromAddress), to: email.to.map(legacyMailbox), cc: email.cc.map(legacyMailbox),
    bcc: email.bcc.map(legacyMailbox), replyTo: email.replyTo.map(legacyMailbox),
  }
}
export type Mailboxes = ReturnType<typeof mailboxesOf>

/** The message for `recipients` (the envelope: Bcc is never a header), signed with `key`. */
export function assembleMessage(email: ClaimedEmail, mailboxes: Mailboxes, headers: HeaderLine[], key: DomainKey, recipients: string[]): OutgoingMessage {
  // A fresh object of strings only: nothing here is an object a request carried.
  const plain = (m: StoredMailbox) => ({ name: String(m.name), address: String(m.address) })
  return {
    from: plain(mailboxes.from), to: mailboxes.to.map(plain), cc: mailboxes.cc.map(plain), bcc: mailboxes.bcc.map(plain),
    replyTo: mailboxes.replyTo.map(plain),
    subject: email.subject, html: email.html ?? undefined, text: email.text ?? undefined, headers,
    messageId: email.messageId, date: email.createdAt,
    envelope: { from: mailboxes.from.address, to: recipients },
    dkim: { domainName: key.name, keySelector: key.selector, privateKey: key.privateKey },
  }
}
