// Builds the OpenAPI 3.1.0 document and the catalog version hash from the operation declarations alone.
import { createHash } from 'node:crypto'
import type { TSchema } from 'typebox'
import { AREAS, areaTag, type AnyOperation, bodyRequired, rateClassOf } from '../../shared/catalog/operation'
import { ERROR_SCHEMA } from '../../shared/catalog/error-schema'

/** Strips typebox-internal keys so only JSON Schema is published. */
function jsonSchema(schema: TSchema | undefined): Record<string, unknown> | undefined {
  return schema === undefined ? undefined : JSON.parse(JSON.stringify(schema))
}

/**
 * The catalog version: a hash of everything that defines an operation's contract, so it changes whenever an
 * operation is added, removed or changed, and is stable otherwise.
 */
export function catalogVersion(operations: readonly AnyOperation[]): string {
  const contract = [...operations]
    .sort((a, b) => a.id.localeCompare(b.id))
    .map((op) => ({
      id: op.id, method: op.method, path: op.path, area: op.area, auth: op.auth, sessionOnly: !!op.sessionOnly, ownerOnly: !!op.ownerOnly,
      rateClass: rateClassOf(op),
      summary: op.summary, description: op.description ?? null,
      params: jsonSchema(op.params) ?? null, query: jsonSchema(op.query) ?? null,
      body: jsonSchema(op.body) ?? null, response: jsonSchema(op.response),
    }))
  return createHash('sha256').update(JSON.stringify(contract)).digest('hex').slice(0, 16)
}

function parameters(op: AnyOperation) {
  const out: Record<string, unknown>[] = []
  for (const [where, schema] of [['path', op.params], ['query', op.query]] as const) {
    const s = jsonSchema(schema) as { properties?: Record<string, unknown>; required?: string[] } | undefined
    for (const [name, property] of Object.entries(s?.properties ?? {})) {
      out.push({ name, in: where, required: where === 'path' || (s?.required ?? []).includes(name), schema: property })
    }
  }
  if (op.auth === 'product' && !op.path.includes('{productId}')) {
    out.push({
      name: 'X-Product-Id', in: 'header', required: false, schema: { type: 'string', format: 'uuid' },
      description: 'The product a login session acts on. Platform keys act on their own product and may omit it.',
    })
  }
  return out
}

const errorResponse = (description: string) => ({
  description,
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
})

/** A path with its parameter names taken out: OpenAPI holds paths of the same shape to be one path. */
const shapeOf = (path: string) => path.replace(/\{\w+\}/g, '{}')
const namesIn = (path: string) => [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!)

/**
 * The spec names one position differently in different operations (`/analytics/dashboards/{idOrSlug}` for get, `{id}`
 * for update and delete); OpenAPI 3.1 takes such paths for the same one and forbids declaring it twice. Each shape is
 * published once, under the names of its first operation; a renamed parameter keeps its own schema (uuid only for
 * update) and says what the spec and the MCP tool call it. The REST route reads parameters by position, so either
 * name reaches the same handler.
 */
function publishedParameters(op: AnyOperation, published: string) {
  const renames = new Map(namesIn(op.path).map((name, i) => [name, namesIn(published)[i]!] as const))
  return parameters(op).map((p) => {
    const to = p.in === 'path' ? renames.get(p.name as string) : undefined
    if (!to || to === p.name) return p
    return { ...p, name: to, description: `\`${p.name}\` in the spec and in the MCP tool \`${op.id}\`` }
  })
}

export function buildOpenApi(operations: readonly AnyOperation[], serverUrl: string) {
  const paths: Record<string, Record<string, unknown>> = {}
  const publishedPaths = new Map<string, string>() // shape → the path it is published as
  for (const op of operations) {
    const shape = shapeOf(op.path)
    if (!publishedPaths.has(shape)) publishedPaths.set(shape, op.path)
    const published = publishedPaths.get(shape)!
    const responses: Record<string, unknown> = {
      '200': { description: 'Success', content: { 'application/json': { schema: jsonSchema(op.response) } } },
      '400': errorResponse('Validation failure; `fields` names every failing field'),
    }
    if (op.auth !== 'none') responses['401'] = errorResponse('Missing, malformed, expired or revoked bearer token')
    responses['429'] = errorResponse(op.auth === 'none'
      ? 'Too many sign-ups or logins from this address (rate_limited); wait Retry-After seconds'
      : `Too many ${rateClassOf(op)} requests for this credential or organization (rate_limited); wait Retry-After seconds`)
    responses.default = errorResponse('Any other failure')
    paths[published] ??= {}
    paths[published]![op.method.toLowerCase()] = {
      operationId: op.id,
      tags: [areaTag(op.area)],
      summary: op.summary,
      ...(op.description ? { description: op.description } : {}),
      security: op.auth === 'none' ? [] : [{ bearerAuth: [] }],
      // The operation's rate-limit class (docs/architecture.md, "Limits"); sign-up and login are limited per address.
      'x-rate-class': op.auth === 'none' ? 'address' : rateClassOf(op),
      parameters: publishedParameters(op, published),
      ...(op.body ? { requestBody: { required: bodyRequired(op.body), content: { 'application/json': { schema: jsonSchema(op.body) } } } } : {}),
      responses,
    }
  }
  const version = catalogVersion(operations)
  return {
    openapi: '3.1.0',
    info: {
      title: 'Platform API',
      version,
      description: 'Analytics, Mail and Realtime. `info.version` is the operation catalog hash; every operation is also an MCP tool of the same name at /mcp.',
    },
    servers: [{ url: serverUrl }],
    tags: AREAS.map((area) => ({ name: areaTag(area) })),
    security: [{ bearerAuth: [] }],
    paths,
    components: {
      securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', description: 'A login session token (pls_) or a platform API key (plk_).' } },
      schemas: { Error: ERROR_SCHEMA },
    },
    'x-catalog-version': version,
  }
}
