// Publishable capture keys (ptk_): format and allowed origins. Shared by the api (management) and public (the capture
// route). Stored readable on purpose: docs/analytics.md, "Capture from browsers".
import Type from 'typebox'

export const CAPTURE_KEY_PREFIX = 'ptk_'
/** Most allowed origins one key lists (the migration checks it too). */
export const MAX_ALLOWED_ORIGINS = 20
/** Longest allowed origin, in characters. */
export const MAX_ORIGIN_LENGTH = 200

/**
 * An origin as browsers send it: `scheme://host[:port]`, http or https, no path, no trailing slash, no default port.
 * Compared in lower case.
 * @example isExactOrigin('https://shop.example.com') // true; 'https://shop.example.com/' and '*.example.com' are false
 */
export function isExactOrigin(value: string): boolean {
  // The URL parser takes hosts browsers never send as an origin ("*"): the host is a name, an IPv4 or a bracketed IPv6.
  if (value.length > MAX_ORIGIN_LENGTH || !/^https?:\/\/(?:\[[0-9a-f:.]+\]|[a-z0-9.-]+)(?::[0-9]{1,5})?$/i.test(value)) return false
  try {
    return new URL(value).origin === value.toLowerCase()
  } catch {
    return false
  }
}

export const AllowedOrigins = Type.Array(
  Type.String({ minLength: 1, maxLength: MAX_ORIGIN_LENGTH, description: 'An exact origin: scheme://host[:port], e.g. https://shop.example.com' }),
  { maxItems: MAX_ALLOWED_ORIGINS, description: `Browser origins the key works from, exact (at most ${MAX_ALLOWED_ORIGINS}); empty: any origin` },
)

/** Lower-cased and deduplicated, in the order given: equal lists are stored and shown identically. */
export const normalizeOrigins = (origins: readonly string[]) => [...new Set(origins.map((o) => o.toLowerCase()))]
