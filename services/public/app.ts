// The public app ({public_url}): product-key routes under /{productId}/realtime, CORS preflight, health.
// Builds the app and never listens: main.ts listens, tests call app.handle().
import { Elysia } from 'elysia'
import { ApiError, toErrorResponse } from '../../shared/errors'
import { healthRoutes } from '../../shared/http/health'
import { invalidationsLive } from './realtime/invalidation'
import { preflight } from './realtime/origin'
import { realtimeRoutes } from './realtime/routes'

export function buildPublicApp() {
  return new Elysia()
    .onError({ as: 'global' }, ({ code, error, request }) => {
      if (code === 'NOT_FOUND') {
        return toErrorResponse(new ApiError(404, 'not_found', `No route ${request.method} ${new URL(request.url).pathname}`))
      }
      return toErrorResponse(error)
    })
    .use(healthRoutes([{ name: 'invalidations', ready: invalidationsLive }]))
    .options('/*', ({ request }) => {
      try {
        return preflight(request)
      } catch (error) {
        return toErrorResponse(error)
      }
    })
    .use(realtimeRoutes())
}
