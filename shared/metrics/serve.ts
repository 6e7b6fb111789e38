// Each worker's metrics listener: `GET /metrics` in the Prometheus text format on its own port (METRICS_PORT, or
// foreman's PORT + METRICS_PORT_OFFSET), never on the service port. Workers share their service port (reusePort), so a
// scrape there would reach whichever worker the kernel picked; on its own port each worker is its own target.
import type { Server } from 'bun'
import { createHash, timingSafeEqual } from 'node:crypto'
import { config } from '../config'
import { isLoopback, metricsHostRefusal } from '../config/rules'
import { log } from '../log'
import { watchBreakers } from './breakers'
import { watchPools } from './pools'
import { registry } from './registry'

/** What the listener itself needs of config.metrics. */
type ListenerSettings = Pick<typeof config.metrics, 'port' | 'portOffset' | 'host' | 'token'>

/** The port this worker's metrics are served on, or 0 for none. */
export function metricsPort(settings: ListenerSettings = config.metrics, foremanPort = process.env.PORT): number {
  if (settings.portOffset > 0 && foremanPort) {
    const port = Number(foremanPort) + settings.portOffset
    if (!Number.isInteger(port) || port <= 0 || port > 65_535) throw new Error(`PORT (${foremanPort}) + METRICS_PORT_OFFSET (${settings.portOffset}) is not a port`)
    return port
  }
  return settings.port
}

// Compared as digests: equal lengths for timingSafeEqual, and the time taken says nothing about the token.
const digest = (value: string) => createHash('sha256').update(value).digest()

/** Whether `header` is `Bearer <token>`, compared in constant time. */
export function bearerMatches(header: string | null, token: string): boolean {
  const presented = header?.startsWith('Bearer ') ? header.slice(7) : ''
  return timingSafeEqual(digest(presented), digest(token))
}

export { isLoopback }

/**
 * Refuses a metrics listener reachable from other hosts without a token (the rule is the configuration's, checked at
 * every start when a metrics port is set: shared/config/rules.ts); here for listeners given their own settings.
 */
export function checkMetricsSettings(settings: { host: string; token: string } = config.metrics): void {
  const refusal = metricsHostRefusal(settings.host, settings.token)
  if (refusal) throw new Error(refusal)
}

const problem = (status: number, error: string, message: string, headers: Record<string, string> = {}) =>
  Response.json({ error, message }, { status, headers })

/**
 * Starts the listener when a metrics port is configured (and the breaker and pool gauges with it); returns it, or undefined.
 * A port already taken fails the process at start, as any listener would: two workers given the same METRICS_PORT;
 * so does a METRICS_HOST other than loopback without METRICS_TOKEN (checkMetricsSettings). `settings`: the
 * configuration's unless given (tests start a listener in their own process).
 */
export function serveMetrics(processName: string, settings: ListenerSettings = config.metrics): Server<undefined> | undefined {
  const port = metricsPort(settings)
  if (port === 0) return undefined
  checkMetricsSettings(settings)
  watchBreakers()
  watchPools()
  const token = settings.token
  // Concurrent scrapes share one collection (its scrape-time queries included) instead of running one each.
  let collecting: Promise<string> | undefined
  const collect = () => (collecting ??= registry.metrics().finally(() => (collecting = undefined)))
  const server = Bun.serve({
    hostname: settings.host,
    port,
    async fetch(request) {
      const path = new URL(request.url).pathname
      if (path !== '/metrics') return problem(404, 'not_found', `No route ${request.method} ${path}: this port serves GET /metrics`)
      if (request.method !== 'GET' && request.method !== 'HEAD') return problem(405, 'method_not_allowed', 'GET /metrics', { allow: 'GET, HEAD' })
      if (token && !bearerMatches(request.headers.get('authorization'), token)) {
        return problem(401, 'unauthorized', 'Send Authorization: Bearer <METRICS_TOKEN>', { 'www-authenticate': 'Bearer' })
      }
      return new Response(await collect(), { headers: { 'content-type': registry.contentType } })
    },
  })
  log('info', 'metrics listening', { name: processName, host: settings.host, port: server.port })
  return server
}
