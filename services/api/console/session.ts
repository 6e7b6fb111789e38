// The console's session across a reload (docs/console.md, "The session across a reload"): the page keeps its bearer
// token in memory, and parks a copy in an HttpOnly cookie that only these three routes read, each refusing any request
// that is not the console's own page (same origin, and a header no form or simple cross-site request can carry).
// No other route of any process reads a cookie: for the REST API, MCP and the public routes it is not a credential.
import { Elysia } from 'elysia'
import { config } from '../../../shared/config'
import { forbidden, unauthorized } from '../../../shared/errors'
import { liveSessionExpiry } from '../accounts/users'

export const SESSION_COOKIE = 'console_session'
/** The only path the browser sends the cookie to: not the page, its assets or any API route. */
export const SESSION_PATH = '/console/session'
/** The header the page sends: a form cannot, and a cross-origin fetch must ask a preflight first. */
export const CONSOLE_HEADER = 'x-console'

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

/** This request's origin as the browser addressed it (the Host header), for an api reached at another name than API_URL. */
function ownOrigin(request: Request): string | null {
  const host = request.headers.get('host')
  return host ? `${new URL(request.url).protocol}//${host}` : null
}

function secure(request: Request): boolean {
  return new URL(request.url).protocol === 'https:' || new URL(config.apiUrl).protocol === 'https:'
}

function cookie(request: Request, value: string, maxAgeSeconds: number): string {
  return [`${SESSION_COOKIE}=${value}`, `Path=${SESSION_PATH}`, `Max-Age=${maxAgeSeconds}`, 'HttpOnly', 'SameSite=Strict',
    ...(secure(request) ? ['Secure'] : [])].join('; ')
}

function cookieValue(request: Request): string | undefined {
  for (const part of (request.headers.get('cookie') ?? '').split(';')) {
    const [name, ...value] = part.trim().split('=')
    if (name === SESSION_COOKIE) return value.join('=')
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
      const token = /^Bearer +(\S+)$/i.exec(request.headers.get('authorization')?.trim() ?? '')?.[1]
      const expiresAt = token ? await liveSessionExpiry(token) : null
      if (!token || !expiresAt) throw unauthorized('A live login session token (Bearer pls_...) is required')
      const maxAge = Math.max(1, Math.floor((expiresAt.getTime() - Date.now()) / 1000))
      return new Response(null, { status: 204, headers: { ...NO_STORE, 'set-cookie': cookie(request, token, maxAge) } })
    }, { parse: 'none' })
    .post(`${SESSION_PATH}/restore`, async ({ request }) => {
      requireOwnPage(request)
      const token = cookieValue(request)
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
