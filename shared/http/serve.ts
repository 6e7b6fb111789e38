// Runs an Elysia app on Bun.serve with reusePort (several processes share one port), one structured log line per
// request, an x-request-id on every response, the client IP made available to handlers, and a clean shutdown on
// SIGTERM/SIGINT.
import type { Server } from 'bun'
import { randomUUID } from 'node:crypto'
import { config } from '../config'
import { toErrorResponse } from '../errors'
import { describeError, log } from '../log'

interface Handler {
  handle(request: Request): Promise<Response> | Response
}

const clientIps = new WeakMap<Request, string>()

/** The peer address of a request served by serveApp (or 127.0.0.1 for in-process app.handle calls). */
export function peerIp(request: Request): string {
  return clientIps.get(request) ?? '127.0.0.1'
}

/**
 * The client's address: the peer, or — with TRUST_PROXY behind a proxy — the last X-Forwarded-For address, the one that
 * proxy appended for the peer it saw. Earlier entries are whatever the client sent (nginx and cloud load balancers
 * append), so trusting the first would let any client pick its own rate-limit bucket.
 */
export function clientIp(request: Request): string {
  if (config.trustProxy) {
    const last = request.headers.get('x-forwarded-for')?.split(',').at(-1)?.trim()
    // Bounded: the value becomes part of a Redis key, and a proxy never forwards anything longer than an IPv6 address.
    if (last) return normalizeIp(last.slice(0, 64))
  }
  return peerIp(request)
}

/** `::ffff:1.2.3.4` (an IPv4 peer on a dual-stack socket) is the IPv4 address 1.2.3.4. */
export const normalizeIp = (ip: string) => (ip.startsWith('::ffff:') && ip.includes('.') ? ip.slice(7) : ip)

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
    async fetch(request, srv) {
      const started = performance.now()
      clientIps.set(request, normalizeIp(srv.requestIP(request)?.address ?? '127.0.0.1'))
      let response: Response
      try {
        response = await options.app.handle(request)
      } catch (error) {
        response = toErrorResponse(error, (e) => log('error', 'unhandled', describeError(e)))
      }
      // Routes that run an operation set their own id (it is in their error logs); every other response gets one here.
      let requestId = response.headers.get('x-request-id')
      if (!requestId) {
        requestId = randomUUID()
        response.headers.set('x-request-id', requestId)
      }
      if (options.logRequests) {
        const url = new URL(request.url)
        log('info', 'request', {
          method: request.method, path: url.pathname, status: response.status,
          ms: Math.round((performance.now() - started) * 10) / 10, ip: clientIps.get(request),
          requestId,
        })
      }
      return response
    },
  })
  log('info', 'listening', { name: options.name, port: server.port })

  let stopping = false
  const stop = async (signal: string) => {
    if (stopping) return
    stopping = true
    log('info', 'shutting down', { signal })
    await server.stop() // stop accepting, let in-flight requests finish
    await options.onStop?.().catch((error) => log('error', 'shutdown', describeError(error)))
    process.exit(0)
  }
  process.on('SIGTERM', () => void stop('SIGTERM'))
  process.on('SIGINT', () => void stop('SIGINT'))
  return server
}
