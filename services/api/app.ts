// The platform REST API app (auth, products, area management), its OpenAPI document and its MCP endpoint.
// Builds the app and never listens: main.ts listens, tests call app.handle().
import { cors } from '@elysiajs/cors'
import { Elysia } from 'elysia'
import { config } from '../../shared/config'
import { buildOpenApi } from './openapi'
import { noRoute, toErrorResponse } from '../../shared/errors'
import { healthRoutes } from '../../shared/http/health'
import { routeLabels } from '../../shared/metrics/http'
import { CATALOG_VERSION, operations } from './catalog'
import { consoleRoutes } from './console/serve'
import { mcpEndpoint } from './mcp'
import { restRoutes } from './rest'

export function buildApiApp() {
  const openapi = buildOpenApi(operations, config.apiUrl)
  const mcp = mcpEndpoint(operations, CATALOG_VERSION, config.apiBodyLimit)
  return new Elysia()
    .use(routeLabels())
    .onError({ as: 'global' }, ({ code, error, request }) => {
      if (code === 'NOT_FOUND') {
        return toErrorResponse(noRoute(request.method, new URL(request.url).pathname))
      }
      return toErrorResponse(error)
    })
    // Bearer tokens only: any origin may call, and no credentials are ever shared. The console's cookie is no credential
    // here: only /console/session reads it, and only for the console's own page (console/session.ts).
    .use(cors({ credentials: false, exposeHeaders: ['x-request-id'] }))
    .use(healthRoutes())
    .get('/openapi.json', () => openapi)
    .use(consoleRoutes())
    .all('/mcp', ({ request }) => mcp(request), { parse: 'none' })
    .use(restRoutes(operations, config.apiBodyLimit))
}
