// The request target as every process routes and logs it, read without `new URL()` (which throws on a malformed Host)
// and without Elysia's shortcut of taking the path from the first "/" after character 11 of the URL (which a Host
// shorter than four characters shifts: `Host: a` + `/xy/openapi.json` would route as `/openapi.json`).

import { ApiError } from '../errors'

/** The 400 for a request whose Host header parseTarget refuses. */
export const invalidHost = () =>
  new ApiError('invalid_host', 'The Host header is not a valid host name (letters, digits, ".", "-", "_" or an IP literal, optional port 1-65535)')

/** A host name, IPv4 or bracketed IPv6 literal, with an optional port 1..65535. No `%`, spaces or delimiters. */
const HOST = /^(?:[A-Za-z0-9](?:[A-Za-z0-9._~-]*[A-Za-z0-9_~-])?|\[[0-9A-Fa-f:.]+\])(?::(\d{1,5}))?$/

/** The last Host found valid: a worker's requests name the same one or few (the pattern's run was 1 % of a publish). */
let lastValidHost: string | undefined // none yet: '' is not a valid host

export function isValidHost(host: string): boolean {
  if (host === lastValidHost) return true
  const valid = checkHost(host)
  if (valid) lastValidHost = host
  return valid
}

function checkHost(host: string): boolean {
  const match = HOST.exec(host)
  if (!match) return false
  const port = match[1]
  if (port !== undefined && (Number(port) < 1 || Number(port) > 65535)) return false
  // The pattern admits any bracketed run of hex digits and colons; only a real IPv6 literal may pass.
  return !host.startsWith('[') || URL.canParse(`http://${host}/`)
}

export interface RequestTarget {
  host: string
  /** Starts with "/"; without the query. */
  path: string
  /** "" or "?..." */
  search: string
}

/**
 * Splits `request.url` (scheme://host/path?query, as Bun builds it from the Host header; just /path?query when the
 * request had no Host, as HTTP/1.0 allows) into its parts. `hostHeader` is the Host header as received (null when
 * absent). Null when that header is not a valid host: malformed, or present but empty.
 * @example parseTarget('http://a/xy/openapi.json', 'a') // → { host: 'a', path: '/xy/openapi.json', search: '' }
 */
export function parseTarget(url: string, hostHeader: string | null): RequestTarget | null {
  let host = ''
  let rest = url
  if (!url.startsWith('/')) {
    const schemeEnd = url.indexOf('://')
    if (schemeEnd < 0) return null
    const hostStart = schemeEnd + 3
    // A '?' or '#' before any '/' belongs to the (invalid) host, which the host check below refuses.
    const pathStart = url.indexOf('/', hostStart)
    host = url.slice(hostStart, pathStart < 0 ? url.length : pathStart)
    rest = pathStart < 0 ? '/' : url.slice(pathStart)
  }
  // The header as sent, not the URL's host: Bun has already decoded it there ("a%41" reads "aA", "a:" reads "a").
  if (hostHeader === null ? host !== '' : !isValidHost(hostHeader)) return null
  const queryStart = rest.indexOf('?')
  return queryStart < 0
    ? { host, path: rest, search: '' }
    : { host, path: rest.slice(0, queryStart), search: rest.slice(queryStart) }
}

/** Elysia reads the path from character 11 on: a host this long or longer keeps scheme + host before that point. */
const MIN_ROUTABLE_HOST = 4

/**
 * The request itself, or a copy whose URL names a placeholder host when the real one is too short (or absent) for
 * Elysia's router.
 */
export function routable(request: Request, target: RequestTarget): Request {
  if (target.host.length >= MIN_ROUTABLE_HOST) return request
  return new Request(`http://host.invalid${target.path}${target.search}`, request)
}
