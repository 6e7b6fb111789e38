// HTTP request metrics of the api and public workers (observed by shared/http/serve.ts): requests and their duration
// by method, route and status. `route` is bounded by construction: the catalog operation's id (set by the api's REST
// adapter), else the Elysia route template (`/:productId/realtime/messages`), else `unmatched`; never a path as sent.
import { Elysia } from 'elysia'
import { ERRORS } from '../error-catalog'
import { counter, keyedHistogram } from './registry'

const routes = new WeakMap<Request, string>()

/** Names the route of a request (an operation id); the label it is counted under. */
export function labelRoute(request: Request, route: string): void {
  routes.set(request, route)
}

/** Labels every routed request of the app it is used in with its route template, before its handler runs. */
export const routeLabels = () =>
  new Elysia({ name: 'route-labels' }).onTransform({ as: 'global' }, ({ request, route }) => {
    if (!routes.has(request)) routes.set(request, route)
  })

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])

let metrics: ReturnType<typeof define> | undefined

const LABELS = ['method', 'route', 'status'] as const
type Label = (typeof LABELS)[number]

function define() {
  // Observed by a string key per label set (keyedHistogram); the requests are the histogram's counts, handed to the
  // counter when it is scraped: prom-client hashes the labels of every `inc` and `observe`.
  const duration = keyedHistogram<Label>('http_request_duration_seconds', 'Time from a request\'s arrival to its response, by method, route and status code')
  return {
    requests: counter('http_requests_total', 'HTTP requests answered, by method, route (operation id or route template) and status code', LABELS, function () {
      this.reset()
      for (const { labels, count } of duration.series()) this.inc(labels, count)
    }),
    duration,
    refusals: counter('http_refusals_total', 'Requests answered with an error body, by route and error code of the catalog (shared/error-catalog.ts)', ['route', 'code']),
  }
}

/**
 * Counts one answered request; `routed` is the request the app handled (the one its route was labelled on), `code` the
 * catalog error code it was refused with, if any.
 */
export function observeRequest(routed: Request | undefined, method: string, status: number, seconds: number, code?: string): void {
  metrics ??= define()
  const labels: Record<Label, string> = {
    method: METHODS.has(method) ? method : 'other',
    route: (routed && routes.get(routed)) ?? 'unmatched',
    status: String(status),
  }
  metrics.duration.observe(`${labels.method} ${labels.status} ${labels.route}`, labels, seconds)
  if (code) metrics.refusals.inc({ route: labels.route, code })
}

/**
 * The catalog error code a response answers with (its body's `error`), or `other` for an error status without one;
 * undefined below 400, without a promise (most responses: nothing to wait for). Read from a copy of the body: a plugin
 * (CORS) may have rebuilt the response the app made, so nothing kept on that object survives. Error bodies are a few
 * hundred bytes.
 */
export function refusalCode(response: Response): Promise<string> | undefined {
  return response.status < 400 ? undefined : codeInBody(response)
}

async function codeInBody(response: Response): Promise<string> {
  if (!response.headers.get('content-type')?.startsWith('application/json')) return 'other'
  try {
    const code = ((await response.clone().json()) as { error?: unknown } | null)?.error
    return typeof code === 'string' && Object.hasOwn(ERRORS, code) ? code : 'other'
  } catch {
    return 'other'
  }
}
