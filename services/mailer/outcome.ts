// What an SMTP attempt means for an email, as pure functions: which refusals are temporary (retried with backoff) and
// which are permanent (bounced), and how long to wait before the next attempt.

/** One recipient the server refused, with its reply code (4xx temporary, 5xx permanent). */
export interface Refusal {
  address: string
  code: number | undefined
}

export type Outcome =
  /** The server took the message for at least one recipient; `refused` lists the others. */
  | { kind: 'delivered'; refused: Refusal[] }
  /** Try again later: a 4xx reply, or no usable connection. */
  | { kind: 'temporary'; reason: string }
  /**
   * Refused for good: 5xx. `suppress` lists the addresses the server said do not exist (refused at RCPT), which go on
   * the product's suppression list; a refusal of the content (at DATA) suppresses nobody.
   */
  | { kind: 'bounced'; reason: string; suppress: string[] }
  /** Not an SMTP answer and not a connection problem: the message itself could not be built. */
  | { kind: 'failed'; reason: string }

const CONNECTION_CODES = new Set(['ECONNECTION', 'ETIMEDOUT', 'ESOCKET', 'ECONNREFUSED', 'ECONNRESET', 'EDNS', 'EPROTOCOL', 'ETLS', 'EAUTH'])

/** The SMTP commands whose 5xx answer is about the message: nodemailer's `command` on the error. */
const MESSAGE_COMMANDS = new Set(['MAIL FROM', 'RCPT TO', 'DATA'])

interface SmtpError {
  code?: string
  command?: string
  responseCode?: number
  response?: string
  message?: string
  rejected?: string[]
  rejectedErrors?: { recipient?: string; responseCode?: number }[]
}

/** Classifies a failed send (nodemailer's error). */
export function classifyFailure(error: SmtpError): Outcome {
  const reason = (error.response ?? error.message ?? String(error)).slice(0, 500)
  if (error.code === 'EENVELOPE' && error.rejectedErrors?.length) {
    // Every recipient refused: temporary if any refusal was, so the permanent ones are not lost by bouncing early.
    const codes = error.rejectedErrors.map((r) => r.responseCode ?? 0)
    if (codes.some((c) => c < 500)) return { kind: 'temporary', reason }
    return { kind: 'bounced', reason, suppress: error.rejectedErrors.map((r) => r.recipient!).filter(Boolean) }
  }
  // The link to the relay first: a 535 at AUTH or a 5xx refusing STARTTLS is the platform's relay set-up failing, not
  // the message being refused, and must not bounce (or suppress) anyone.
  if (error.code === 'ETLS') {
    // The server's reply alone ("502 command not recognized") would not say why: the reason names TLS.
    return { kind: 'temporary', reason: `TLS with the SMTP server could not be established: ${error.message ?? ''}${error.response ? ` (${error.response})` : ''}`.slice(0, 500) }
  }
  if (error.code && CONNECTION_CODES.has(error.code)) return { kind: 'temporary', reason }
  const code = error.responseCode
  if (code !== undefined && code >= 400 && code < 500) return { kind: 'temporary', reason }
  if (code !== undefined && code >= 500) {
    // Permanent for this message only when answered to the message itself (its sender, recipients or content).
    return MESSAGE_COMMANDS.has(error.command ?? '') ? { kind: 'bounced', reason, suppress: [] } : { kind: 'temporary', reason }
  }
  return { kind: 'failed', reason }
}

/** A send the server accepted (possibly for some recipients only). */
export function classifyAccepted(info: { rejectedErrors?: { recipient?: string; responseCode?: number }[] }): Outcome {
  return { kind: 'delivered', refused: (info.rejectedErrors ?? []).map((r) => ({ address: r.recipient ?? '', code: r.responseCode })) }
}

/** Wait before attempt `attempts + 1`, after `attempts` temporary failures: base, 2 × base, 4 × base, ... capped. */
export function retryDelayMs(attempts: number, baseMs: number, maxMs: number): number {
  return Math.min(maxMs, baseMs * 2 ** Math.max(0, attempts - 1))
}
