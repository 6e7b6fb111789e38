// Custom mail headers: what a sender may give in `headers`, checked by hand for every key up to the count limit (not
// through a record schema, whose key pattern in typebox 1.x leaves keys that do not match it unchecked), and the plain
// list the mailer hands nodemailer. nodemailer writes a value given as {prepared: true, value} raw, CR/LF included, and
// strips spaces and colons from names, so only strings this module built may ever reach it.
import type { FieldError } from '../errors'

/** RFC 5322 field name: printable ASCII but the colon (33..57, 59..126); at most 76 so `Name: ` fits a folded line. */
export const HEADER_NAME = /^[!-9;-~]{1,76}$/
/** Longest value: RFC 5322's line limit (nodemailer folds and encodes what it writes, so this bounds the text given). */
export const MAX_HEADER_VALUE_CHARS = 998
/** No CR, LF or other control character but the tab: a value is one line of text. */
const VALUE_FORBIDDEN = /[\u0000-\u0008\u000a-\u001f\u007f]/

/**
 * Headers a sender may not give because they would forge identity or provenance: addressing (the platform writes it
 * from the body, and Errors-To redirects bounces), MIME structure (nodemailer builds it), signatures (the signer's),
 * and every header a receiving server, relay or filter adds, which a sender could forge to make a message look
 * authenticated, relayed, spam-checked or badged (BIMI), or to ask relays to drop TLS (TLS-Required, RFC 8689).
 * Threading (In-Reply-To, References), List-* and other X-* stay the sender's.
 */
const FORGING = new Set([
  'from', 'to', 'cc', 'bcc', 'reply-to', 'sender', 'errors-to', 'subject', 'date', 'message-id', 'mime-version',
  'return-path', 'received', 'x-received', 'received-spf', 'authentication-results', 'delivered-to', 'x-original-to',
  'envelope-to', 'x-envelope-from', 'x-envelope-to', 'x-authenticated-sender', 'x-authenticated-user', 'x-original-from',
  'x-original-sender', 'domainkey-signature', 'bimi-location', 'bimi-indicator', 'tls-required',
])
const FORGING_PREFIXES = ['content-', 'dkim-', 'arc-', 'resent-', 'x-spam-']
/**
 * Reserved for style, forging nothing: what nodemailer writes itself (X-Mailer) and priority flags. Refused at send;
 * an email queued before they were reserved is still sent, without them (headerLines).
 */
const STYLE = new Set(['x-mailer', 'x-priority', 'x-msmail-priority', 'importance'])

const isForging = (lower: string) => FORGING.has(lower) || FORGING_PREFIXES.some((prefix) => lower.startsWith(prefix))

export const isReservedHeader = (name: string) => {
  const lower = name.toLowerCase()
  return isForging(lower) || STYLE.has(lower)
}

/** RFC 6901: `~` and `/` in a key are escaped, so a pointer names exactly one key. */
export const pointerToken = (key: string) => key.replaceAll('~', '~0').replaceAll('/', '~1')

/** A header name printed in a message: control and non-ASCII characters as \u escapes, so the error is readable. */
const shown = (name: string) => JSON.stringify(name.length > 80 ? `${name.slice(0, 80)}…` : name)

/**
 * Every rule a `headers` value breaks, one error per header, each naming `/body/headers/<name>` (at most `maxHeaders`
 * of them: over the count, the count error alone). An absent value (undefined) is fine; anything but a plain object of
 * strings is not.
 */
export function headerErrors(headers: unknown, maxHeaders: number, root = '/body/headers'): FieldError[] {
  if (headers === undefined) return []
  if (headers === null || typeof headers !== 'object' || Array.isArray(headers)) {
    return [{ path: root, message: 'must be an object of header names to string values' }]
  }
  // Counted first, stopping one past the limit: over it, the count is the only error. Checking (and naming) every key
  // of an object of 100 000 keys would answer megabytes to a request of hundreds of kilobytes.
  if (countKeys(headers, maxHeaders + 1) > maxHeaders) return [{ path: root, message: `must have at most ${maxHeaders} headers` }]
  const errors: FieldError[] = []
  const seen = new Set<string>()
  for (const [name, value] of Object.entries(headers)) {
    const path = `${root}/${pointerToken(name)}`
    const error = nameError(name, seen) ?? valueError(value)
    if (error) errors.push({ path, message: error })
  }
  return errors
}

/** The object's own enumerable keys, counted up to `stop` at most. */
function countKeys(object: object, stop: number): number {
  let count = 0
  for (const key in object) {
    if (Object.hasOwn(object, key) && ++count >= stop) break
  }
  return count
}

function nameError(name: string, seen: Set<string>): string | undefined {
  if (!HEADER_NAME.test(name)) {
    return `${shown(name)} is not a header name: 1 to 76 printable ASCII characters, no space and no colon`
  }
  if (isReservedHeader(name)) return 'is set by the platform and cannot be given'
  const lower = name.toLowerCase()
  if (seen.has(lower)) return 'is given twice (header names are case-insensitive)'
  seen.add(lower)
  return undefined
}

/** What a value that should be a string is instead, for a message. */
const kindOf = (value: unknown) => (value === null ? 'null' : Array.isArray(value) ? 'an array' : `a ${typeof value}`)

function valueError(value: unknown): string | undefined {
  if (typeof value !== 'string') return `must be a string, not ${kindOf(value)}`
  if (value.length > MAX_HEADER_VALUE_CHARS) return `must be at most ${MAX_HEADER_VALUE_CHARS} characters`
  if (VALUE_FORBIDDEN.test(value)) return 'must be one line: no CR, LF or other control characters'
  return undefined
}

/** One header as the mailer hands it to nodemailer: two strings it checked itself. */
export interface HeaderLine {
  key: string
  value: string
}

/** Most dropped headers a note names one by one. */
const NOTED = 10

/**
 * The headers of a stored email as nodemailer's `[{key, value}]` list of plain strings, checked again: a row queued
 * before the current rules (or written by hand) may hold anything.
 *
 * Throws, naming the header, for what could inject or forge: a value that is not a string or holds a control character,
 * a name that is not an RFC 5322 field name, or a name that forges identity or provenance (From, DKIM-*, Received,
 * X-Spam-*, ...). Such an email must not be sent at all (the mailer fails it).
 *
 * Drops, and says so in `note`, what rules added since may have left in an older email without making it dangerous: a
 * name reserved for style only (X-Mailer, X-Priority, X-MSMail-Priority, Importance), a name given twice in other cases,
 * a value over 998 characters, and the headers past `maxHeaders`. The email is sent without them.
 */
export function headerLines(stored: unknown, maxHeaders: number): { lines: HeaderLine[]; note?: string } {
  if (stored === null || stored === undefined) return { lines: [] }
  if (typeof stored !== 'object' || Array.isArray(stored)) throw new Error('the stored headers are not an object of header names to string values')
  const lines: HeaderLine[] = []
  const dropped: string[] = []
  const seen = new Set<string>()
  for (const [name, value] of Object.entries(stored)) {
    const refuse = (why: string) => new Error(`the stored header ${shown(name)} ${why}: the email is not sent`)
    if (typeof value !== 'string') throw refuse(`is not a string (${kindOf(value)})`)
    if (VALUE_FORBIDDEN.test(value)) throw refuse('holds CR, LF or another control character')
    if (!HEADER_NAME.test(name)) throw refuse('is not a header name (1 to 76 printable ASCII characters, no space or colon)')
    const lower = name.toLowerCase()
    if (isForging(lower)) throw refuse('is set by the platform (a sender could forge identity or provenance with it)')
    if (STYLE.has(lower)) dropped.push(`${name} (reserved)`)
    else if (seen.has(lower)) dropped.push(`${name} (given twice)`)
    else if (value.length > MAX_HEADER_VALUE_CHARS) dropped.push(`${name} (over ${MAX_HEADER_VALUE_CHARS} characters)`)
    else if (lines.length >= maxHeaders) dropped.push(`${name} (over MAIL_MAX_HEADERS=${maxHeaders})`)
    else lines.push({ key: String(name), value: String(value) })
    seen.add(lower)
  }
  if (dropped.length === 0) return { lines }
  const listed = dropped.slice(0, NOTED).join(', ')
  return { lines, note: `custom headers dropped: ${listed}${dropped.length > NOTED ? `, and ${dropped.length - NOTED} more` : ''}` }
}
