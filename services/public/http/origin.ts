// Browser origins on the public routes: only https://<subdomain>.{developerDomain} and the configured extra origins.
import { config } from '../../../shared/config'
import { ApiError } from '../../../shared/errors'

/** 403 for a browser origin the public routes do not serve (both areas). */
const originNotAllowed = (origin: string) =>
  new ApiError('origin_not_allowed', `Browser requests from ${origin} are not accepted; allowed origins are https://*.${config.developerDomain}`)

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
const LABEL = '[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?'
// One or more labels in front of the developer domain, https only, no port: "https://*.{developer_domain}".
const DEVELOPER_ORIGIN = new RegExp(`^https://(?:${LABEL}\\.)+${escapeRegExp(config.developerDomain.toLowerCase())}$`)
const EXTRA = new Set(config.extraAllowedOrigins.map((o) => o.toLowerCase()))

export const ALLOW_METHODS = 'GET, POST, OPTIONS'
export const ALLOW_HEADERS = 'X-Api-Key, Content-Type, Content-Encoding'
export const EXPOSE_HEADERS = 'Retry-After, X-Request-Id'

/** @example isAllowedOrigin('https://app.example.dev') // true when developerDomain is example.dev */
export function isAllowedOrigin(origin: string): boolean {
  const lower = origin.toLowerCase()
  return DEVELOPER_ORIGIN.test(lower) || EXTRA.has(lower)
}

/**
 * Requests without Origin (servers) pass. A browser request from another origin is refused before anything else runs.
 * Returns the CORS headers every response to this request must carry.
 */
export function checkOrigin(request: Request): Record<string, string> {
  const origin = request.headers.get('origin')
  if (origin === null) return {}
  if (!isAllowedOrigin(origin)) throw originNotAllowed(origin)
  return { 'access-control-allow-origin': origin, 'access-control-expose-headers': EXPOSE_HEADERS, vary: 'Origin' }
}

/** CORS preflight: 204 with the allowed methods and headers for an allowed origin, else 403 with no CORS headers. */
export function preflight(request: Request): Response {
  const headers = checkOrigin(request)
  if (!headers['access-control-allow-origin']) throw originNotAllowed('(no Origin header)')
  return new Response(null, {
    status: 204,
    headers: {
      ...headers,
      'access-control-allow-methods': ALLOW_METHODS,
      'access-control-allow-headers': ALLOW_HEADERS,
      'access-control-max-age': '600',
    },
  })
}
