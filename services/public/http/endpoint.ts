// The one guard pipeline of every public route, whichever area: browser origin, per-IP rate limit, credential, body,
// then the handler. Each area passes its own authenticator; the order, error mapping and response headers are here.
// A route may count the IP limit in its own Redis round trip instead (POST /messages: one script counts it, the quota
// and publishes); it is still counted first among the request's Redis and database work, and once.
import { toErrorResponse } from '../../../shared/errors'
import { clientIp, requestIdOf } from '../../../shared/http/serve'
import { describeError, log } from '../../../shared/log'
import { checkOrigin } from './origin'
import { IpLimit, type IpRule } from './rate-limit'

export interface Call<Key> {
  request: Request
  /** The authenticated credential, as the area's authenticator answered it. */
  key: Key
  body: unknown
  /** Path parameters as the router decoded them. */
  params: Record<string, string>
  query: Record<string, string>
  /** The request's IP limit: already counted, unless the route defers it (`deferIpLimit`); then the handler counts it. */
  ip: IpLimit
  /** The response's headers: a handler may add its own (`idempotent-replayed`). */
  headers: Record<string, string>
}

export interface Guards<Key> {
  /**
   * Whether browsers may call the route: the origin check runs first (403) and every response carries the CORS headers
   * of an allowed origin. Server-only areas (Mail's sending keys) leave it off.
   */
  browser: boolean
  /**
   * A browser policy of the credential's own (capture keys list their origins): checked right after `authenticate`,
   * it answers the CORS headers of an allowed origin or throws 403. Used with `browser: false`.
   */
  originFor?: (request: Request, key: Key) => Record<string, string>
  /** The per-IP limit the route counts in (default: PUBLIC_IP_RATE_LIMIT's window, shared by Realtime and Mail). */
  ipRule?: IpRule
  /**
   * The credential (401/403/404, or 429 for an area's own per-key budgets), for the product named in the path. Calls
   * `beforeLookup` before it looks a key up outside the process (so a deferred IP limit still bounds key guessing).
   */
  authenticate: (request: Request, productId: string, beforeLookup: () => Promise<void>) => Key | Promise<Key>
  /** Reads the body within the route's limit (413); runs after the credential, so anonymous bodies are never read. */
  read: (request: Request) => Promise<unknown>
  /**
   * The handler counts the IP limit itself, first among its Redis work (`call.ip.take()` in a script of its own, or
   * `call.ip.check()`), to save the round trip. A request that fails before is counted here, and answers 429 if over.
   */
  deferIpLimit?: boolean
}

/** A route handler behind the guards; answers the 200 body. */
export type Handler<Key> = (call: Call<Key>) => Promise<unknown> | unknown

/**
 * Origin (403), IP rate limit (429; or counted by the handler, see `deferIpLimit`), credential, body limit (413), then
 * `handler`. Every response, errors included, carries an x-request-id (and the CORS headers for a browser route);
 * anything unexpected is logged with it.
 */
export function endpoint<Key>(guards: Guards<Key>, handler: Handler<Key>) {
  return async ({ request, params }: { request: Request; params: Record<string, string | undefined> }) => {
    const headers: Record<string, string> = { 'x-request-id': requestIdOf(request) }
    const ip = new IpLimit(clientIp(request), guards.ipRule)
    let ipOwed = false // a deferred IP limit the request reached (a refused origin is not counted, as before)
    try {
      if (guards.browser) Object.assign(headers, checkOrigin(request))
      if (guards.deferIpLimit) ipOwed = true
      else await ip.check()
      const found = guards.authenticate(request, String(params.productId ?? '').toLowerCase(), () => ip.check())
      const key = found instanceof Promise ? await found : found
      if (guards.originFor) Object.assign(headers, guards.originFor(request, key))
      const body = await guards.read(request)
      const query = request.url.includes('?') ? Object.fromEntries(new URL(request.url).searchParams) : {}
      const result = await handler({ request, key, body, params: params as Record<string, string>, query, ip, headers })
      return Response.json(result, { headers })
    } catch (failure) {
      // A deferred IP limit not counted yet (the request failed before the handler counted it): counted now, and a
      // request past it answers 429 as it would have before anything else ran.
      const error = !ipOwed || ip.done ? failure : await ip.check().then(() => failure, (limited: unknown) => limited)
      const response = toErrorResponse(error, (e) => log('error', 'public route failed', { requestId: headers['x-request-id'], ...describeError(e) }))
      for (const [name, value] of Object.entries(headers)) response.headers.set(name, value)
      return response
    }
  }
}

/** Routes take the raw body: the guards read it within their limit, Elysia must not parse it first. */
export const ROUTE_HOOKS = { parse: 'none' } as const
