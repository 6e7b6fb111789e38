// The console's session across a reload (docs/console.md, "The session across a reload"): the page keeps its bearer
// token in memory, and parks a copy in an HttpOnly cookie that only these three routes read, each refusing any request
// that is not the console's own page (same origin, and a header no form or simple cross-site request can carry).
// No other route of any process reads a cookie: for the REST API, MCP and the public routes it is not a credential.
import { createHash, timingSafeEqual } from 'node:crypto'
import { Elysia } from 'elysia'
import { config } from '../../../shared/config'
import { badRequest, forbidden, unauthorized } from '../../../shared/errors'
import { liveSessionExpiry } from '../accounts/users'

export const SESSION_COOKIE = 'console_session'
/** The only path the browser sends the cookie to: not the page, its assets or any API route. */
export const SESSION_PATH = '/console/session'
/** The header the page sends: a form cannot, and a cross-origin fetch must ask a preflight first. */
export const CONSOLE_HEADER = 'x-console'
/**
 * A random value the page keeps in its own localStorage and sends with each call; the cookie holds it beside the
 * token, and a restore answers only a cookie whose value matches. Another site can plant a cookie (a sibling
 * subdomain with Domain=, another port of this host: cookies ignore ports), but not write this origin's localStorage,
 * so a planted cookie never restores: no one is signed into someone else's account by a reload.
 */
export const BINDING_HEADER = 'x-console-binding'
const BINDING = /^[A-Za-z0-9_-]{43}$/

/** A header's value as a refusal quotes it: bounded, whatever the caller sent. */
const quoted = (value: string) => (value.length > 100 ? `${value.slice(0, 100)}…` : value)

/** Refuses anything but a fetch from a page of this very origin (browsers send Origin and Sec-Fetch-Site on it). */
function requireOwnPage(request: Request): void {
  const headers = request.headers
  if (headers.get(CONSOLE_HEADER) !== '1') throw forbidden(`The console session needs the ${CONSOLE_HEADER}: 1 header of the console's page`)
  const site = headers.get('sec-fetch-site')
  if (site !== null && site !== 'same-origin') throw forbidden(`The console session answers only its own page (Sec-Fetch-Site: ${quoted(site)})`)
  const origin = headers.get('origin')
  if (!origin) throw forbidden("The console session needs the Origin header of the console's page")
  if (origin !== new URL(config.apiUrl).origin && origin !== ownOrigin(request)) {
    throw forbidden(`The console session answers only its own page, not ${quoted(origin)}`)
  }
}

/**
 * This request's origin as the browser addressed it (the Host header), for an api reached at another name than
 * API_URL. Behind a proxy that ends TLS (TRUST_PROXY) the scheme is the proxy's X-Forwarded-Proto, not this hop's.
 */
function ownOrigin(request: Request): string | null {
  const host = request.headers.get('host')
  return host ? `${scheme(request)}//${host}` : null
}

function scheme(request: Request): string {
  const forwarded = config.trustProxy ? request.headers.get('x-forwarded-proto')?.split(',')[0]?.trim().toLowerCase() : undefined
  return forwarded === 'https' || forwarded === 'http' ? `${forwarded}:` : new URL(request.url).protocol
}

function secure(request: Request): boolean {
  return scheme(request) === 'https:' || new URL(config.apiUrl).protocol === 'https:'
}

function cookie(request: Request, value: string, maxAgeSeconds: number): string {
  return [`${SESSION_COOKIE}=${value}`, `Path=${SESSION_PATH}`, `Max-Age=${maxAgeSeconds}`, 'HttpOnly', 'SameSite=Strict',
    ...(secure(request) ? ['Secure'] : [])].join('; ')
}

/** Every value the request carries under the cookie's name (a planted one may sit beside the page's own). */
function cookieValues(request: Request): string[] {
  const values: string[] = []
  for (const part of (request.headers.get('cookie') ?? '').split(';').slice(0, 100)) {
    const [name, ...value] = part.trim().split('=')
    if (name === SESSION_COOKIE) values.push(value.join('='))
  }
  return values
}

const digest = (value: string) => createHash('sha256').update(value).digest()

/** The token of the cookie value `<token>.<binding>` whose binding is the page's, if any. */
function boundToken(values: readonly string[], binding: string): string | undefined {
  for (const value of values) {
    const dot = value.lastIndexOf('.')
    if (dot > 0 && timingSafeEqual(digest(value.slice(dot + 1)), digest(binding))) return value.slice(0, dot)
  }
  return undefined
}

const NO_STORE = { 'cache-control': 'no-store' }

/** Clears the cookie on `response`: sign-out, and any restore that finds its session ended (logout, expiry). */
function clearing(request: Request, response: Response): Response {
  response.headers.set('cache-control', 'no-store')
  response.headers.set('set-cookie', cookie(request, '', 0))
  return response
}

/**
 * POST /console/session (the page's bearer token: keep it), POST /console/session/restore (answer it after a reload,
 * or 204 when there is none), DELETE /console/session (forget it). Refusals are thrown as ApiError and drawn by the
 * app's one onError.
 */
export function consoleSessionRoutes() {
  return new Elysia()
    .post(SESSION_PATH, async ({ request }) => {
      requireOwnPage(request)
      const binding = request.headers.get(BINDING_HEADER) ?? ''
      if (!BINDING.test(binding)) {
        throw badRequest(`The console session needs the page's ${BINDING_HEADER}: 43 characters of base64url`, [
          { path: `/header/${BINDING_HEADER}`, message: 'must be 43 characters of [A-Za-z0-9_-]' },
        ])
      }
      const token = /^Bearer +(\S+)$/i.exec(request.headers.get('authorization')?.trim() ?? '')?.[1]
      const expiresAt = token ? await liveSessionExpiry(token) : null
      if (!token || !expiresAt) throw unauthorized('A live login session token (Bearer pls_...) is required')
      const maxAge = Math.max(1, Math.floor((expiresAt.getTime() - Date.now()) / 1000))
      return new Response(null, { status: 204, headers: { ...NO_STORE, 'set-cookie': cookie(request, `${token}.${binding}`, maxAge) } })
    }, { parse: 'none' })
    .post(`${SESSION_PATH}/restore`, async ({ request }) => {
      requireOwnPage(request)
      const binding = request.headers.get(BINDING_HEADER) ?? ''
      // A cookie of another binding (planted, or this browser's before its storage was cleared) restores nothing.
      const token = BINDING.test(binding) ? boundToken(cookieValues(request), binding) : undefined
      const expiresAt = token ? await liveSessionExpiry(token) : null
      // Nothing to restore is the ordinary first visit, not an error: 204, and a cookie of an ended session cleared.
      if (!token || !expiresAt) return clearing(request, new Response(null, { status: 204 }))
      return Response.json({ token, expiresAt: expiresAt.toISOString() }, { headers: NO_STORE })
    }, { parse: 'none' })
    .delete(SESSION_PATH, ({ request }) => {
      requireOwnPage(request)
      return clearing(request, new Response(null, { status: 204 }))
    }, { parse: 'none' })
}
