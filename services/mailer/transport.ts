// How the mailer hands an assembled message to SMTP: a narrow MailTransport passed in, so delivery never imports
// nodemailer's SMTP client itself. The real one is smtpTransport (SMTP_URL); a test may pass one kept in memory.
import { createTransport, type Transporter } from 'nodemailer'
import { describeError, log } from '../../shared/log'
import type { OutgoingMessage } from './message'

/** What the server answered for an accepted message: the recipients it refused at RCPT, if any (./outcome.ts). */
export interface Accepted {
  rejectedErrors?: { recipient?: string; responseCode?: number }[]
}

export interface MailTransport {
  /** Hands one message over: resolves once the server accepted it, rejects with its refusal or the failure to reach it. */
  send(message: OutgoingMessage): Promise<Accepted>
  /** Ends its connections (at shutdown); never throws. */
  close(): void
}

/**
 * nodemailer's options for SMTP_URL: `smtps://` is TLS from the first byte; `smtp://` with credentials must upgrade
 * with STARTTLS before AUTH (requireTLS): a man in the middle who strips the STARTTLS offer then fails the attempt
 * (delivery_delayed, reason naming TLS) instead of reading the password. Plain `smtp://` without credentials upgrades
 * when the server offers it.
 */
function transportOptions(smtpUrl: string, timeoutMs: number) {
  const url = new URL(smtpUrl)
  const secure = url.protocol === 'smtps:'
  const credentials = url.username !== '' || url.password !== ''
  return {
    host: url.hostname,
    port: Number(url.port || (secure ? 465 : 25)),
    secure,
    requireTLS: credentials && !secure,
    ...(credentials ? { auth: { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) } } : {}),
    connectionTimeout: timeoutMs,
    greetingTimeout: timeoutMs,
    socketTimeout: timeoutMs,
  }
}

/** One nodemailer SMTP transport for `smtpUrl` (transportOptions), made at the first send. */
export function smtpTransport(smtpUrl: string, timeoutMs: number): MailTransport {
  let transporter: Transporter | undefined
  return {
    async send(message) {
      transporter ??= createTransport(transportOptions(smtpUrl, timeoutMs))
      return (await transporter.sendMail(message)) as Accepted
    },
    close() {
      try {
        transporter?.close()
      } catch (error) {
        log('warn', 'smtp transport close failed', describeError(error))
      }
      transporter = undefined
    },
  }
}
