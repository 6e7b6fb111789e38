// Email addresses as senders write them: `addr`, `Name <addr>` or `"Name, with specials" <addr>`. Strict on the address
// itself (what SMTP servers accept without quoting), and on the display name exactly where a header parser would read
// more than one mailbox: an unquoted name may not hold RFC 5322 specials, so `ceo@bank.com, Acme <news@dom>` is refused
// rather than shown by mail clients as coming from ceo@bank.com.
//
// Parsed by one left-to-right scan, never a backtracking regular expression: the input is the sender's, and a regex such
// as /^\s*(?:"([^"\\]*)"|([^<>"]*?))\s*<([^<>\s]+)>\s*$/ costs polynomial time on 512 characters of spaces or quotes.
// Every character is looked at once (and the address's once more), so any input costs microseconds.

/** Longest mailbox accepted, display name included. */
export const MAX_MAILBOX_CHARS = 512
/** Longest address (RFC 5321 path limit less the angle brackets). */
const MAX_ADDRESS_CHARS = 254

export interface Mailbox {
  /** The display name, when given. */
  name?: string
  address: string
  /** Lower-case domain of the address. */
  domain: string
}

/** What the mailer needs of one mailbox, stored at queue time (jsonb) so the mailer never parses again. */
export interface StoredMailbox {
  name: string
  address: string
}

/** Every mailbox of an email as stored at queue time (`emails.mailboxes`, jsonb): what the mailer hands nodemailer. */
export interface StoredMailboxes {
  from: StoredMailbox
  to: StoredMailbox[]
  cc: StoredMailbox[]
  bcc: StoredMailbox[]
  reply_to: StoredMailbox[]
}

const TAB = 9, LF = 10, CR = 13, SPACE = 32, QUOTE = 34, BACKSLASH = 92, LT = 60, GT = 62

/** JavaScript's `\s` (and String.prototype.trim's) whitespace, as the accepted grammar has always read it. */
function isSpace(c: number): boolean {
  if (c === SPACE || (c >= TAB && c <= CR)) return true
  if (c < 0xa0) return false
  return c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 || c === 0x202f ||
    c === 0x205f || c === 0x3000 || c === 0xfeff
}

/** RFC 5322 specials but the period (obsolete syntax every client still reads: `Acme Inc. <a@b>`): never unquoted. */
function isSpecial(c: number): boolean {
  // ( ) < > [ ] : ; @ \ , "
  return c === 40 || c === 41 || c === LT || c === GT || c === 91 || c === 93 || c === 58 || c === 59 || c === 64 ||
    c === BACKSLASH || c === 44 || c === QUOTE
}

const isAlnum = (c: number) => (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122)
/** Characters of an unquoted local part: letters, digits, `.` and ``!#$%&'*+/=?^_`{|}~-``. */
const LOCAL_EXTRA = new Set([...".!#$%&'*+/=?^_`{|}~-"].map((ch) => ch.charCodeAt(0)))

/**
 * The domain (lower case) of `address` when it is one the platform sends to or from, else null: a local part of 1 to 64
 * atext characters and dots, `@`, then at least two labels of 1 to 63 letters, digits and inner hyphens. One pass.
 */
function addressDomain(address: string): string | null {
  if (address.length === 0 || address.length > MAX_ADDRESS_CHARS) return null
  let i = 0
  for (; i < address.length; i++) {
    const c = address.charCodeAt(i)
    if (c === 64) break
    if (!isAlnum(c) && !LOCAL_EXTRA.has(c)) return null
  }
  if (i === 0 || i > 64 || i === address.length) return null
  const domainStart = i + 1
  let labels = 0
  let labelStart = domainStart
  for (let j = domainStart; j <= address.length; j++) {
    const c = j < address.length ? address.charCodeAt(j) : 46 // the end closes the last label like a dot
    if (c === 46) {
      const length = j - labelStart
      if (length < 1 || length > 63) return null
      if (!isAlnum(address.charCodeAt(labelStart)) || !isAlnum(address.charCodeAt(j - 1))) return null
      labels++
      labelStart = j + 1
    } else if (!isAlnum(c) && c !== 45) {
      return null
    }
  }
  return labels >= 2 ? address.slice(domainStart).toLowerCase() : null
}

// biome-ignore lint/suspicious/noConstEnum: module-private, so inlined by Bun and tsc alike; the parser reads it per character
const enum State { Lead, Quoted, AfterQuote, Name, Address, Trail }

/** Parses `addr`, `Name <addr>` or `"Name" <addr>`; null when it is none of them. Linear in the input's length. */
export function parseMailbox(value: string): Mailbox | null {
  if (value.length > MAX_MAILBOX_CHARS) return null
  let state = State.Lead
  let nameStart = 0
  let nameEnd = 0 // exclusive; for an unquoted name, just past its last non-space character
  let quoted = false
  let special = false
  let addressStart = 0
  let addressEnd = 0
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i)
    if (c === CR || c === LF) return null // a mailbox is never more than one line
    switch (state) {
      case State.Lead:
        if (isSpace(c)) break
        if (c === QUOTE) {
          state = State.Quoted
          quoted = true
          nameStart = i + 1
        } else if (c === LT) {
          state = State.Address
          addressStart = i + 1
        } else if (c === GT) {
          return null
        } else {
          state = State.Name
          nameStart = i
          nameEnd = i + 1
          special = isSpecial(c)
        }
        break
      case State.Quoted:
        if (c === QUOTE) {
          nameEnd = i
          state = State.AfterQuote
        } else if (c === BACKSLASH) {
          return null // no quoted-pairs: the name must say exactly what it shows
        }
        break
      case State.AfterQuote:
        if (c === LT) {
          state = State.Address
          addressStart = i + 1
        } else if (!isSpace(c)) {
          return null
        }
        break
      case State.Name:
        if (c === LT) {
          state = State.Address
          addressStart = i + 1
        } else if (c === QUOTE || c === GT) {
          return null // a quote inside an unquoted name, or a stray bracket: neither form
        } else if (!isSpace(c)) {
          nameEnd = i + 1
          if (isSpecial(c)) special = true
        }
        break
      case State.Address:
        if (c === GT) {
          addressEnd = i
          state = State.Trail
        } else if (c === LT || isSpace(c)) {
          return null
        }
        break
      case State.Trail:
        if (!isSpace(c)) return null
        break
    }
  }
  if (state === State.Name) {
    // No angle brackets: the whole (trimmed) text is a bare address.
    const address = value.slice(nameStart, nameEnd)
    const domain = addressDomain(address)
    return domain ? { address, domain } : null
  }
  if (state !== State.Trail) return null
  if (!quoted && special) return null
  const address = value.slice(addressStart, addressEnd)
  const domain = addressDomain(address)
  if (!domain) return null
  const name = quoted ? value.slice(nameStart, nameEnd).trim() : value.slice(nameStart, nameEnd)
  if (NAME_FORBIDDEN.test(name)) return null
  return { ...(name ? { name } : {}), address, domain }
}

/**
 * What a display name may never hold, as a header value may not: C0 controls but the tab, DEL, C1 controls, and the
 * bidirectional formatting characters (LRM, RLM, ALM, the embeddings and overrides U+202A-202E, the isolates
 * U+2066-2069), with which a name could show its text reversed or reordered (`Acme\u202Emoc.lapyap` reads as `Acme
 * paypal.com`). A character class: linear on any input.
 */
export const NAME_FORBIDDEN = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/

/** Why `value` is not a mailbox, for a 400's message: a forbidden character in its name, or its form. */
export const mailboxProblem = (value: string): string =>
  NAME_FORBIDDEN.test(value)
    ? 'holds a control or bidirectional formatting character (refused in a display name, as in a header value)'
    : 'is not an email address: use addr, Name <addr> or "Name" <addr>'

/** The stored form of a parsed mailbox: the name ('' without one) and the address, as nodemailer takes them. */
export const storedMailbox = (mailbox: Mailbox): StoredMailbox => ({ name: mailbox.name ?? '', address: mailbox.address })

/** A domain name as registered: lower case, at least two labels, each 1..63 of letters, digits and inner hyphens. */
export function isDomainName(value: string): boolean {
  return value.length <= 253 && /^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]$/.test(value)
}

/** The recipient lists of a send: a string or an array, the same address at most once per list (case-insensitive). */
export const asList = (value: string | string[] | undefined): string[] => (value === undefined ? [] : Array.isArray(value) ? value : [value])
