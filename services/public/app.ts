// The public app ({public_url}): product-key routes under /{productId}/realtime and /{productId}/mail, event capture
// with a publishable key at /{productId}/capture, CORS preflight, health.
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
