// Registers each catalog operation as an Elysia route that reads the raw request and calls invoke().
import { Elysia } from 'elysia'
import type { AnyOperation } from '../../shared/catalog/operation'
import { toErrorResponse } from '../../shared/errors'
import { readJson } from '../../shared/http/body'
import { clientIp, requestIdOf } from '../../shared/http/serve'
import { describeError, log } from '../../shared/log'
import { labelRoute } from '../../shared/metrics/http'
import { invoke } from './invoke'

/**
 * `/products/{productId}` to Elysia's `/products/:p0`, with the operation's own names by position. Elysia's router
 * needs one parameter name per position, and the spec names the same position differently in different operations
 * (`/analytics/dashboards/{idOrSlug}` for get, `{id}` for update).
 */
function elysiaPath(path: string): { path: string; names: string[] } {
  const names: string[] = []
  return { path: path.replace(/\{(\w+)\}/g, (_, name: string) => `:p${names.push(name) - 1}`), names }
}

export function restRoutes(operations: readonly AnyOperation[], bodyLimit: number) {
  const app = new Elysia()
  for (const op of operations) {
    const route = elysiaPath(op.path)
    app.route(op.method, route.path, async ({ request, params: positional }) => {
      labelRoute(request, op.id) // counted by operation, as the catalog names it (shared/metrics/http.ts)
      const params = Object.fromEntries(route.names.map((name, i) => [name, (positional as Record<string, string>)[`p${i}`]]))
      const requestId = requestIdOf(request)
      const headers = { 'x-request-id': requestId }
      try {
        const hasBody = op.method !== 'GET' && op.method !== 'DELETE'
        const body = hasBody ? await readJson(request, bodyLimit) : undefined
        const query = Object.fromEntries(new URL(request.url).searchParams)
        const result = await invoke(op, { params, query, body }, {
          authorization: request.headers.get('authorization'),
          productId: request.headers.get('x-product-id'),
          requestId,
          clientIp: clientIp(request),
        })
        return Response.json(result, { headers })
      } catch (error) {
        const response = toErrorResponse(error, (e) => log('error', 'operation failed', { op: op.id, requestId, ...describeError(e) }))
        response.headers.set('x-request-id', requestId)
        return response
      }
    }, { parse: 'none' })
  }
  return app
}
