// Builds the public surface's OpenAPI 3.1 document from the route catalog (services/public/catalog.ts) alone; served
// at GET {public_url}/openapi.json, built once per process.
import { createHash } from 'node:crypto'
import type { TSchema } from 'typebox'
import { bodyRequired } from '../../shared/catalog/operation'
import { ERROR_SCHEMA } from '../../shared/catalog/error-schema'
import { ERRORS, type ErrorCode } from '../../shared/error-catalog'
import { CREDENTIAL_ERRORS, type PublicCredential, type PublicRoute, REQUEST_ERRORS } from './catalog'
import { IDEMPOTENCY_KEY_MAX_CHARS } from '../../shared/http/idempotency-key'

/** Strips typebox-internal keys so only JSON Schema is published. */
const jsonSchema = (schema: TSchema): Record<string, unknown> => JSON.parse(JSON.stringify(schema))

/** The security scheme of each credential, as the routes really read it. */
const SCHEME: Record<PublicCredential, string> = { realtime_key: 'productKey', mail_key: 'sendingKey', capture_key: 'captureKey' }

const SECURITY_SCHEMES = {
  productKey: { type: 'apiKey', in: 'header', name: 'X-Api-Key', description: 'A Realtime product API key (rtk_...) holding the scope the route names.' },
  sendingKey: { type: 'apiKey', in: 'header', name: 'X-Api-Key', description: 'A Mail sending key (lmk_...); domains and templates need a full_access key. Never in the URL or an Authorization header.' },
  captureKey: { type: 'apiKey', in: 'query', name: 'key', description: 'A publishable capture key (ptk_...): sendBeacon and CORS preflights cannot carry headers, so it travels in the URL.' },
}

/** Every code a route can answer, by status: its credential's, the request's, its own. */
function errorsByStatus(route: PublicRoute): Map<number, ErrorCode[]> {
  const byStatus = new Map<number, ErrorCode[]>()
  for (const code of new Set([...REQUEST_ERRORS, ...CREDENTIAL_ERRORS[route.credential], ...route.errors])) {
    const entry: { status: number; alsoStatus?: number } = ERRORS[code]
    for (const status of [entry.status, entry.alsoStatus]) {
      if (status === undefined) continue
      if (!byStatus.has(status)) byStatus.set(status, [])
      byStatus.get(status)!.push(code)
    }
  }
  return new Map([...byStatus].sort(([a], [b]) => a - b))
}

function parameters(route: PublicRoute) {
  const out: Record<string, unknown>[] = [
    { name: 'productId', in: 'path', required: true, schema: { type: 'string', format: 'uuid' }, description: 'The product the key belongs to' },
  ]
  for (const [where, schema] of [['path', route.params], ['query', route.query]] as const) {
    if (!schema) continue
    const s = jsonSchema(schema) as { properties?: Record<string, Record<string, unknown>>; required?: string[] }
    for (const [name, property] of Object.entries(s.properties ?? {})) {
      const { description, ...rest } = property
      out.push({ name, in: where, required: where === 'path' || (s.required ?? []).includes(name), schema: rest, ...(description ? { description } : {}) })
    }
  }
  if (route.idempotencyKey) {
    out.push({
      name: 'Idempotency-Key', in: 'header', required: false, schema: { type: 'string', minLength: 1, maxLength: IDEMPOTENCY_KEY_MAX_CHARS },
      description: 'A repeat with the same key answers what the first request did and does nothing again; the same key with another body is 409.',
    })
  }
  if (route.gzip) {
    out.push({ name: 'Content-Encoding', in: 'header', required: false, schema: { type: 'string', enum: ['identity', 'gzip'] }, description: 'A gzip body is accepted' })
  }
  return out
}

function operation(route: PublicRoute) {
  const responses: Record<string, unknown> = {
    '200': {
      description: 'Success',
      headers: {
        'X-Request-Id': { description: 'The request id, in logs too', schema: { type: 'string' } },
        ...Object.fromEntries(Object.entries(route.responseHeaders ?? {}).map(([name, h]) => [name, { description: h.description, schema: h.schema }])),
      },
      content: { 'application/json': { schema: jsonSchema(route.response) } },
    },
  }
  for (const [status, codes] of errorsByStatus(route)) {
    responses[String(status)] = {
      description: codes.map((code) => `\`${code}\`: ${ERRORS[code].description}`).join('. '),
      content: { 'application/json': { schema: { allOf: [{ $ref: '#/components/schemas/Error' }], properties: { error: { enum: codes } } } } },
    }
  }
  const body = route.body && jsonSchema(route.body)
  return {
    operationId: route.id,
    tags: [route.area[0]!.toUpperCase() + route.area.slice(1)],
    summary: route.summary,
    ...(route.description || route.scope ? { description: [route.description, route.scope && `Needs a key with \`${route.scope}\`.`].filter(Boolean).join(' ') } : {}),
    security: [{ [SCHEME[route.credential]]: [] }],
    parameters: parameters(route),
    ...(body ? {
      requestBody: {
        required: bodyRequired(route.body),
        content: { 'application/json': { schema: body, ...(route.example === undefined ? {} : { example: route.example }) } },
      },
    } : {}),
    responses,
  }
}

/**
 * The document, with `info.version` a hash of everything else in it: it changes whenever a route, schema or status
 * changes, and is stable otherwise (the ETag of GET /openapi.json).
 */
export function buildPublicOpenApi(routes: readonly PublicRoute[], serverUrl: string) {
  const paths: Record<string, Record<string, unknown>> = {}
  for (const route of routes) (paths[route.path] ??= {})[route.method.toLowerCase()] = operation(route)
  const content = {
    openapi: '3.1.0',
    info: {
      title: 'Platform public API',
      description: "The routes a product's own code calls with its keys: Realtime (tokens, publish, channel reads), Mail (emails, domains, templates) and Analytics capture. Errors have one body (`Error`); `info.version` is a hash of this document.",
    },
    servers: [{ url: serverUrl }],
    tags: [
      { name: 'Realtime', description: 'Gateway tokens, publishes and channel reads, with a product API key (rtk_)' },
      { name: 'Mail', description: 'Emails, sending domains and templates, with a sending key (lmk_)' },
      { name: 'Capture', description: 'Analytics events from browsers and apps, with a publishable capture key (ptk_)' },
    ],
    paths,
    components: { securitySchemes: SECURITY_SCHEMES, schemas: { Error: ERROR_SCHEMA } },
  }
  const version = createHash('sha256').update(JSON.stringify(content)).digest('hex').slice(0, 16)
  return { ...content, info: { ...content.info, version } }
}
