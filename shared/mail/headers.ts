// Custom mail headers: what a sender may give in `headers`, checked by hand for every key (not through a record schema,
// whose key pattern in typebox 1.x leaves keys that do not match it unchecked), and the plain list the mailer hands
// nodemailer. nodemailer writes a value given as {prepared: true, value} raw, CR/LF included, and strips spaces and
// colons from names, so only strings this module built may ever reach it.
import type { FieldError } from '../errors'

/** RFC 5322 field name: printable ASCII but the colon (33..57, 59..126); at most 76 so `Name: ` fits a folded line. */
export const HEADER_NAME = /^[!-9;-~]{1,76}$/
/** Longest value: RFC 5322's line limit (nodemailer folds and encodes what it writes, so this bounds the text given). */
export const MAX_HEADER_VALUE_CHARS = 998
/** No CR, LF or other control character but the tab: a value is one line of text. */
const VALUE_FORBIDDEN = /[\u0000-\u0008\u000a-\u001f\u007f]/

/**
 * Headers a sender may not give: addressing and identity (the platform writes them from the body), MIME structure
 * (nodemailer builds it), what nodemailer or the signer writes (X-Mailer, DKIM-Signature), and every header a receiving
 * server adds, which a sender could forge to make a message look authenticated, relayed or badged (BIMI).
 * Threading (In-Reply-To, References), List-* and other X-* stay the sender's.
 */
const RESERVED = new Set([
  'from', 'to', 'cc', 'bcc', 'reply-to', 'sender', 'subject', 'date', 'message-id', 'mime-version', 'return-path',
  'received', 'received-spf', 'authentication-results', 'delivered-to', 'x-original-to', 'envelope-to',
  'domainkey-signature', 'x-mailer', 'bimi-location', 'bimi-indicator', 'x-priority', 'x-msmail-priority', 'importance',
])
const RESERVED_PREFIXES = ['content-', 'dkim-', 'arc-', 'resent-']

export const isReservedHeader = (name: string) => {
  const lower = name.toLowerCase()
  return RESERVED.has(lower) || RESERVED_PREFIXES.some((prefix) => lower.startsWith(prefix))
}

/** RFC 6901: `~` and `/` in a key are escaped, so a pointer names exactly one key. */
export const pointerToken = (key: string) => key.replaceAll('~', '~0').replaceAll('/', '~1')

/** A header name printed in a message: control and non-ASCII characters as \u escapes, so the error is readable. */
const shown = (name: string) => JSON.stringify(name.length > 80 ? `${name.slice(0, 80)}…` : name)

/**
 * Every rule a `headers` value breaks, one error per header, each naming `/body/headers/<name>`. An absent value
 * (undefined) is fine; anything but a plain object of strings is not.
 */
export function headerErrors(headers: unknown, maxHeaders: number, root = '/body/headers'): FieldError[] {
  if (headers === undefined) return []
  if (headers === null || typeof headers !== 'object' || Array.isArray(headers)) {
    return [{ path: root, message: 'must be an object of header names to string values' }]
  }
  const errors: FieldError[] = []
  const entries = Object.entries(headers)
  if (entries.length > maxHeaders) errors.push({ path: root, message: `must have at most ${maxHeaders} headers` })
  const seen = new Set<string>()
  for (const [name, value] of entries) {
    const path = `${root}/${pointerToken(name)}`
    const error = nameError(name, seen) ?? valueError(value)
    if (error) errors.push({ path, message: error })
  }
  return errors
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

function valueError(value: unknown): string | undefined {
  if (typeof value !== 'string') return `must be a string, not ${value === null ? 'null' : Array.isArray(value) ? 'an array' : `a ${typeof value}`}`
  if (value.length > MAX_HEADER_VALUE_CHARS) return `must be at most ${MAX_HEADER_VALUE_CHARS} characters`
  if (VALUE_FORBIDDEN.test(value)) return 'must be one line: no CR, LF or other control characters'
  return undefined
}

/** One header as the mailer hands it to nodemailer: two strings it checked itself. */
export interface HeaderLine {
  key: string
  value: string
}

/**
 * The headers of a stored email as nodemailer's `[{key, value}]` list of plain strings, checked again with the same
 * rules: a row queued before these rules (or written by hand) may hold anything. Throws, naming the first bad header,
 * when any is bad: such an email must not be sent at all (the mailer fails it).
 */
export function headerLines(stored: unknown, maxHeaders: number): HeaderLine[] {
  const errors = headerErrors(stored ?? {}, maxHeaders, '')
  if (errors.length) throw new Error(`the stored headers break the header rules: ${errors.map((e) => `${e.path || 'headers'} ${e.message}`).join('; ')}`)
  return Object.entries(stored as Record<string, string>).map(([key, value]) => ({ key: String(key), value: String(value) }))
}
