// The console's only way to the platform: operations by their catalog id (the MCP tool name), resolved to a method and
// path through the API's own /openapi.json. The console cannot call anything the catalog does not publish.
export interface ApiErrorBody { error: string; message: string; fields?: { path: string; message: string }[] }

export class ConsoleApiError extends Error {
  constructor(readonly status: number, readonly body: ApiErrorBody) {
    super(body.message)
  }
}

interface Route { method: string; path: string }
export interface CallOptions {
  path?: Record<string, string>
  query?: Record<string, string | number | undefined>
  body?: unknown
}

export class Api {
  /** A login session (pls_) held in memory; across a reload it comes back from /console/session (session.ts). */
  token: string | undefined
  productId: string | undefined
  /** Called when the API refuses the session (expired, or ended elsewhere): the page signs in again. */
  onSessionEnded: (() => void) | undefined
  private routes: Promise<Map<string, Route>> | undefined

  private catalog(): Promise<Map<string, Route>> {
    this.routes ??= fetch('/openapi.json').then(async (response) => {
      if (!response.ok) throw new Error(`openapi.json: ${response.status}`)
      const document = await response.json() as { paths: Record<string, Record<string, { operationId: string }>> }
      const routes = new Map<string, Route>()
      for (const [path, methods] of Object.entries(document.paths)) {
        for (const [method, operation] of Object.entries(methods)) routes.set(operation.operationId, { method: method.toUpperCase(), path })
      }
      return routes
    }).catch((error) => {
      this.routes = undefined
      throw error
    })
    return this.routes
  }

  /** Runs one operation; its error body becomes a ConsoleApiError. */
  async run<T = any>(operationId: string, options: CallOptions = {}): Promise<T> {
    const route = (await this.catalog()).get(operationId)
    if (!route) throw new Error(`the API publishes no operation ${operationId}`)
    const path = route.path.replace(/\{(\w+)\}/g, (_, name: string) => {
      const value = options.path?.[name]
      if (value === undefined) throw new Error(`${operationId}: path parameter ${name} missing`)
      return encodeURIComponent(value)
    })
    const query = new URLSearchParams()
    for (const [name, value] of Object.entries(options.query ?? {})) if (value !== undefined) query.set(name, String(value))
    const headers: Record<string, string> = {}
    if (this.token) headers.authorization = `Bearer ${this.token}`
    if (this.productId) headers['x-product-id'] = this.productId
    if (options.body !== undefined) headers['content-type'] = 'application/json'
    const response = await fetch(`${path}${query.size ? `?${query}` : ''}`, {
      method: route.method, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body),
    })
    const body = await response.json().catch(() => ({ error: 'invalid_response', message: `${response.status} without a JSON body` }))
    if (response.status === 401 && this.token) {
      this.token = undefined
      this.onSessionEnded?.()
    }
    if (!response.ok) throw new ConsoleApiError(response.status, body as ApiErrorBody)
    return body as T
  }
}

export const api = new Api()

/** An error as one line a person can act on: the message and each failing field. */
export function describe(error: unknown): string {
  if (error instanceof ConsoleApiError) {
    const fields = error.body.fields?.map((field) => `${field.path}: ${field.message}`).join('; ')
    return `${error.body.message}${fields ? ` (${fields})` : ''}`
  }
  return error instanceof Error ? error.message : String(error)
}
