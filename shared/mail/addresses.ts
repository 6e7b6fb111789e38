// Email addresses as senders write them: `addr`, `Name <addr>` or `"Name, with specials" <addr>`. Strict on the address
// itself (what SMTP servers accept without quoting), and on the display name exactly where a header parser would read
// more than one mailbox: an unquoted name may not hold RFC 5322 specials, so `ceo@bank.com, Acme <news@dom>` is refused
// rather than shown by mail clients as coming from ceo@bank.com.
const ADDRESS = /^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@([A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+)$/
const NAMED = /^\s*(?:"([^"\\]*)"|([^<>"]*?))\s*<([^<>\s]+)>\s*$/
/** RFC 5322 specials but the period (obsolete syntax every client still reads: `Acme Inc. <a@b>`): never unquoted. */
const SPECIALS = /[()<>[\]:;@\\,"]/

export interface Mailbox {
  /** The display name, when given. */
  name?: string
  address: string
  /** Lower-case domain of the address. */
  domain: string
}

/** Parses `addr` or `Name <addr>`; null when it is neither. */
export function parseMailbox(value: string): Mailbox | null {
  if (value.length > 512 || /[\r\n]/.test(value)) return null
  const named = NAMED.exec(value)
  const address = (named ? named[3]! : value.trim())
  const match = ADDRESS.exec(address)
  if (!match || address.length > 254) return null
  if (named && named[2] !== undefined && SPECIALS.test(named[2])) return null
  const name = named ? (named[1] ?? named[2] ?? '').trim() : ''
  return { ...(name ? { name } : {}), address, domain: match[1]!.toLowerCase() }
}

/** A domain name as registered: lower case, at least two labels, each 1..63 of letters, digits and inner hyphens. */
export function isDomainName(value: string): boolean {
  return value.length <= 253 && /^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]$/.test(value)
}

/** The recipient lists of a send: a string or an array, the same address at most once per list (case-insensitive). */
export const asList = (value: string | string[] | undefined): string[] => (value === undefined ? [] : Array.isArray(value) ? value : [value])
