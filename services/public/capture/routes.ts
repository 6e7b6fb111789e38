// The capture route, at /{productId}/capture: a publishable key (ptk_) in the query, its own browser origins,
// then the platform API's capture rules (shared/analytics/capture.ts). docs/analytics.md, "Capture from browsers".
import { Elysia } from 'elysia'
import { captureEvents, type CapturedEvent } from '../../../shared/analytics/capture'
import { validateInput } from '../../../shared/catalog/validate'
import { config } from '../../../shared/config'
import { ApiError, toErrorResponse } from '../../../shared/errors'
import { clientIp } from '../../../shared/http/serve'
import { readBody } from '../http/body'
import { endpoint, type Guards, ROUTE_HOOKS } from '../http/endpoint'
import { IpLimit } from '../http/rate-limit'
import { authenticateCaptureKey, captureOriginHeaders, type CaptureKeyIdentity } from './key-auth'
import { CAPTURE_IP_RULE, limitKeyEvents } from './limits'
import { elysiaPath, PUBLIC_ROUTES } from '../catalog'

/** Its path and body schema, as the OpenAPI document describes them (services/public/catalog.ts). */
const route = PUBLIC_ROUTES.capture.eventsCapture

/**
 * The body as the platform API bounds it (API_BODY_LIMIT, 1 MiB), on the wire and decompressed alike: a gzip body is
 * inflated only up to that many bytes (413 beyond), so a small bomb never costs more memory than a plain body.
 * Whatever its Content-Type (sendBeacon sends text/plain), it is read as JSON.
 */
const captureBody = (request: Request) => readBody(request, config.apiBodyLimit, { gzip: { maxDecompressed: config.apiBodyLimit } })

const guards: Guards<CaptureKeyIdentity> = {
  browser: false, // the key's own origins decide, once it is known (originFor)
  originFor: captureOriginHeaders,
  ipRule: CAPTURE_IP_RULE,
  authenticate: authenticateCaptureKey,
  read: captureBody,
}

/**
 * CORS preflight of the capture route (the URL carries the key, the preflight does not carry headers): 204 for an
 * origin the key allows; otherwise the refusal the request itself would get (401, 404, 403, 429), without CORS headers.
 */
async function capturePreflight(request: Request, productId: string): Promise<Response> {
  try {
    if (request.headers.get('origin') === null) throw new ApiError('origin_not_allowed', 'A preflight needs an Origin header')
    const ip = new IpLimit(clientIp(request), CAPTURE_IP_RULE)
    const key = await authenticateCaptureKey(request, productId.toLowerCase(), () => ip.check())
    return new Response(null, {
      status: 204,
      headers: {
        ...captureOriginHeaders(request, key),
        'access-control-allow-methods': 'POST, OPTIONS',
        'access-control-allow-headers': 'Content-Type, Content-Encoding',
        'access-control-max-age': '600',
      },
    })
  } catch (error) {
    return toErrorResponse(error)
  }
}

export const captureRoutes = () =>
  new Elysia()
    .options(elysiaPath(route), ({ request, params }) => capturePreflight(request, String((params as Record<string, string>).productId)))
    .post(elysiaPath(route), endpoint(guards, async ({ key, body }) => {
      const events = (validateInput({ body: route.body }, { body }).body as { events: CapturedEvent[] }).events
      await limitKeyEvents(key.keyId, events.length)
      return captureEvents(key.productId, events, new Date(), 'public')
    }), ROUTE_HOOKS)
