// Runs an Elysia app on Bun.serve with reusePort (several processes share one port), one structured log line per
// request, an x-request-id on every response, the client IP made available to handlers, and a clean shutdown on
// SIGTERM/SIGINT.
import type { Server } from 'bun'
import { randomUUID } from 'node:crypto'
import { config } from '../config'
import { toErrorResponse } from '../errors'
import { describeError, log } from '../log'
import { observeRequest, refusalCode } from '../metrics/http'
import { onShutdown } from './lifecycle'
import { invalidHost, parseTarget, routable } from './target'

interface Handler {
  /**
   * Elysia's composed handler itself: its `handle` is an async wrapper around it, one more promise per request (part of the
   * 4-6 % measured with requestIdOf's change, docs/performance.md); handleRequest catches a synchronous throw.
   */
  fetch(request: Request): Promise<Response> | Response
}

/** What serveApp knows of a request it routed: its peer, and its id once a route asked for it. */
interface Served {
  peer: string
  requestId?: string
}

const served = new WeakMap<Request, Served>()

/** The peer address of a request served by serveApp (or 127.0.0.1 for in-process app.handle calls). */
export function peerIp(request: Request): string {
  return served.get(request)?.peer ?? '127.0.0.1'
}

/**
 * The request's id, made at the first ask (a new one per call for a request serveApp did not route: in-process calls).
 * A route that asks puts it on every response it makes (x-request-id) and logs with it; serveApp then logs the same id
 * without reading a success's headers back (making them readable was 1.6 % of a worker's CPU per publish in a profile).
 */
export function requestIdOf(request: Request): string {
  const known = served.get(request)
  if (!known) return randomUUID()
  return (known.requestId ??= randomUUID())
}

/**
 * The client's address: the peer, or — with TRUST_PROXY behind a proxy — the last X-Forwarded-For address, the one that
 * proxy appended for the peer it saw. Earlier entries are whatever the client sent (nginx and cloud load balancers
 * append), so trusting the first would let any client pick its own rate-limit bucket.
 */
export function clientIp(request: Request): string {
  return clientIpOf(request.headers, peerIp(request))
}

/** The same rule for a server that knows the peer itself (the gateway's upgrades). */
export function clientIpOf(headers: Headers, peer: string): string {
  if (config.trustProxy) {
    const last = headers.get('x-forwarded-for')?.split(',').at(-1)?.trim()
    // Bounded: the value becomes part of a Redis key, and a proxy never forwards anything longer than an IPv6 address.
    if (last) return normalizeIp(last.slice(0, 64))
  }
  return peer
}

/** `::ffff:1.2.3.4` (an IPv4 peer on a dual-stack socket) is the IPv4 address 1.2.3.4. */
export const normalizeIp = (ip: string) => (ip.startsWith('::ffff:') && ip.includes('.') ? ip.slice(7) : ip)

/**
 * One request, start to end: the target is read once (a malformed Host is a 400 in the platform's body, never a throw),
 * the app routes the same path that is logged, any failure becomes the one error body, and a client that went away
 * mid-request is logged as such rather than as a server error.
 */
async function handleRequest(request: Request, peer: string, options: ServeOptions): Promise<Response> {
  const started = performance.now()
  const target = parseTarget(request.url, request.headers.get('host'))
  let response: Response
  let routed: Request | undefined
  const known: Served = { peer }
  try {
    if (!target) throw invalidHost()
    routed = routable(request, target)
    served.set(routed, known)
    response = await options.app.fetch(routed)
  } catch (error) {
    response = toErrorResponse(error, (e) => log('error', 'unhandled', describeError(e)))
  }
  // Routes that run an operation asked for their id (it is in their error logs) and set it on what they answer; every
  // other response gets one here. An error may have been answered by something else after the route asked (Elysia's
  // onError, the catch above), so errors are checked whatever was asked.
  let requestId = known.requestId
  if (requestId === undefined || response.status >= 400) {
    const sent = response.headers.get('x-request-id')
    requestId = sent ?? requestId ?? randomUUID()
    if (sent === null) response.headers.set('x-request-id', requestId)
  }
  const ms = performance.now() - started
  const refusal = refusalCode(response)
  observeRequest(routed, request.method, response.status, ms / 1000, refusal && await refusal)
  if (options.logRequests) {
    const aborted = request.signal.aborted
    log('info', 'request', {
      method: request.method, path: target?.path ?? null, status: response.status,
      ms: Math.round(ms * 10) / 10, ip: peer, requestId,
      ...(target ? {} : { host: request.headers.get('host'), url: request.url.slice(0, 512) }), ...(aborted ? { aborted: true } : {}),
    })
  }
  return response
}

export interface ServeOptions {
  name: string
  port: number
  app: Handler
  /** Bun's own hard cap, above every route's limit (routes enforce their limits and answer 413 themselves). */
  maxRequestBodySize: number
  logRequests: boolean
  /** Released on shutdown after the server stops accepting (pools, connections). */
  onStop?: () => Promise<void>
}

export function serveApp(options: ServeOptions): Server<undefined> {
  const server = Bun.serve({
    port: options.port,
    reusePort: true,
    maxRequestBodySize: options.maxRequestBodySize,
    // The runtime's development error page shows the working directory and source lines: never unless asked for.
    development: config.developmentErrors,
    fetch: (request, srv) => handleRequest(request, normalizeIp(srv.requestIP(request)?.address ?? '127.0.0.1'), options),
    // Only reached if handleRequest itself throws: still the platform's body, never the runtime's page.
    error: (error) => toErrorResponse(error, (e) => log('error', 'unhandled', describeError(e))),
  })
  log('info', 'listening', { name: options.name, port: server.port })

  onShutdown(async () => {
    await server.stop() // stop accepting, let in-flight requests finish
    await options.onStop?.()
  })
  return server
}
