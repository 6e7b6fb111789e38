// The public app ({public_url}): product-key routes under /{productId}/realtime and /{productId}/mail, event capture
// with a publishable key at /{productId}/capture, CORS preflight, health, and the OpenAPI document of them all.
// Builds the app and never listens: main.ts listens, tests call app.handle().
import { Elysia } from 'elysia'
import { noRoute, toErrorResponse } from '../../shared/errors'
import { healthRoutes } from '../../shared/http/health'
import { routeLabels } from '../../shared/metrics/http'
import { invalidationsLive } from './invalidation'
import { isAllowedOrigin, preflight } from './http/origin'
import { captureRoutes } from './capture/routes'
import { mailRoutes } from './mail/routes'
import { realtimeRoutes } from './realtime/routes'
import { config } from '../../shared/config'
import { publicRoutes } from './catalog'
import { buildPublicOpenApi } from './openapi'

/**
 * GET /openapi.json: the document built once, its hash the ETag (a client revalidates with If-None-Match and gets 304
 * while nothing changed), readable from any page.
 */
function openApiRoute() {
  const document = buildPublicOpenApi(publicRoutes, config.publicUrl)
  const body = JSON.stringify(document)
  const etag = `"${document.info.version}"`
  const headers = { etag, 'cache-control': 'public, max-age=300', 'access-control-allow-origin': '*' }
  return new Elysia().get('/openapi.json', ({ request }) =>
    request.headers.get('if-none-match') === etag
      ? new Response(null, { status: 304, headers })
      : new Response(body, { headers: { ...headers, 'content-type': 'application/json' } }))
}

export function buildPublicApp() {
  return new Elysia()
    .use(routeLabels())
    .onError({ as: 'global' }, ({ code, error, request }) => {
      const response = code === 'NOT_FOUND'
        ? toErrorResponse(noRoute(request.method, new URL(request.url).pathname))
        : toErrorResponse(error)
      // An allowed page can read why its request failed; other origins get no CORS headers.
      const origin = request.headers.get('origin')
      if (origin !== null && isAllowedOrigin(origin)) {
        response.headers.set('access-control-allow-origin', origin)
        response.headers.set('vary', 'Origin')
      }
      return response
    })
    .use(healthRoutes([{ name: 'invalidations', ready: invalidationsLive }]))
    .use(openApiRoute())
    // Before the catch-all preflight: a capture key names its own origins.
    .use(captureRoutes())
    .options('/*', ({ request }) => {
      try {
        return preflight(request)
      } catch (error) {
        return toErrorResponse(error)
      }
    })
    .use(realtimeRoutes())
    .use(mailRoutes())
}
