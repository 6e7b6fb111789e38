// Webhook endpoint management, one set of operations per area that has webhooks (`/realtime/webhooks`,
// `/mail/webhooks`), built from one factory over one table: an endpoint is seen only through its own area's routes.
import Type, { type TSchema } from 'typebox'
import { defineOperation, productOf } from '../../../shared/catalog/operation'
import { HasMore, listed, listObject, pageQuery } from '../../../shared/catalog/pagination'
import { iso, Strict, Timestamp, Uuid } from '../../../shared/catalog/schemas'
import { ALL_KINDS, EVENT_KINDS, type WebhookArea, WEBHOOK_AREAS } from '../../../shared/webhooks/events'
import {
  createEndpoint, deleteEndpoint, DESCRIPTION_MAX, type Endpoint, getEndpoint, listEndpoints, PREVIOUS_SECRET_HOURS,
  rotateEndpointSecret, updateEndpoint,
} from '../../../shared/webhooks/endpoints'
import { URL_MAX_BYTES } from '../../../shared/webhooks/url-policy'

const Url = () => Type.String({
  minLength: 1, maxLength: URL_MAX_BYTES,
  description: `Where events are POSTed: https, at most ${URL_MAX_BYTES} bytes, no user name, password or fragment; its host must be a `
    + 'public address, or a name whose every address is public (checked now; WEBHOOK_ALLOW_PRIVATE_URLS also allows http and '
    + 'loopback or private addresses, for development)',
})
const Description = () => Type.Union([Type.String({ maxLength: DESCRIPTION_MAX }), Type.Null()], { description: 'A label only' })
const Enabled = () => Type.Boolean({ description: 'Whether events are delivered to it' })

/** 1 to all of the area's kinds, each once, or ["*"] alone for all of them (later ones included). */
function EventKinds(area: WebhookArea) {
  const kinds = [...EVENT_KINDS[area], ALL_KINDS]
  return Type.Array(Type.Unsafe<string>({ type: 'string', enum: kinds }), {
    minItems: 1, maxItems: EVENT_KINDS[area].length, uniqueItems: true,
    description: `Any of ${EVENT_KINDS[area].join(', ')}; or ["${ALL_KINDS}"] alone for every ${area} kind`,
  })
}

function EndpointSchema(area: WebhookArea) {
  return {
    id: Uuid(), url: Type.String(), description: Type.Union([Type.String(), Type.Null()]), eventKinds: EventKinds(area),
    enabled: Type.Boolean(),
    disabledReason: Type.Union([Type.String(), Type.Null()], { description: 'Why the platform disabled the endpoint; null otherwise' }),
    secretPrefix: Type.String({ description: 'whsec_ plus the six characters after it' }),
    previousSecretExpiresAt: Type.Union([Timestamp(), Type.Null()], {
      description: `Until when the secret replaced by the last rotation still signs beside the new one (${PREVIOUS_SECRET_HOURS} h)`,
    }),
    createdAt: Timestamp(), updatedAt: Timestamp(),
  }
}

const Secret = () => Type.String({ description: 'The signing secret (whsec_ + base64 of 32 bytes), shown only here' })
/** Any string: an id that is not a UUID names nothing (404), as another product's or another area's endpoint. */
const IdPath = Strict({ id: Type.String({ minLength: 1, description: 'Webhook endpoint id' }) })

const out = (e: Endpoint) => ({
  ...e, createdAt: iso(e.createdAt), updatedAt: iso(e.updatedAt), previousSecretExpiresAt: e.previousSecretExpiresAt && iso(e.previousSecretExpiresAt),
})

/** Each area lists the way its other lists do: Mail as Resend (`{object: 'list', data}`), Realtime by member name. */
function listOperation(area: WebhookArea, Endpoint: TSchema) {
  const base = {
    id: `${area}_webhooks_list`, method: 'GET', path: `/${area}/webhooks`, area, auth: 'product',
    summary: `List the product's ${area} webhook endpoints, newest first (secrets never shown; paginated)`,
    query: Strict(pageQuery('webhook endpoint')),
  } as const
  if (area === 'mail') {
    return defineOperation({
      ...base,
      response: Strict({ object: Type.Literal('list'), has_more: HasMore(), data: Type.Array(Endpoint) }),
      handler: ({ query }, ctx) => listObject(query, (page) => listEndpoints(productOf(ctx), area, page), out),
    })
  }
  return defineOperation({
    ...base,
    response: Strict({ webhooks: Type.Array(Endpoint), has_more: HasMore() }),
    handler: ({ query }, ctx) => listed('webhooks', query, (page) => listEndpoints(productOf(ctx), area, page), out),
  })
}

/** The six operations of one area's webhook endpoints. */
export function webhookOperations(area: WebhookArea) {
  const fields = EndpointSchema(area)
  const Endpoint = Strict(fields)
  const WithSecret = Strict({ ...EndpointSchema(area), secret: Secret() })
  const common = { area, auth: 'product' } as const
  return [
    defineOperation({
      ...common, id: `${area}_webhooks_create`, method: 'POST', path: `/${area}/webhooks`,
      rateClass: 'expensive', // resolves the URL's host name
      summary: `Register a ${area} webhook endpoint: a URL and the event kinds it receives; its secret is answered only here`,
      description: 'Events are signed per Standard Webhooks with the whsec_ secret. Delivery is not built yet (docs/webhooks.md).',
      body: Strict({ url: Url(), eventKinds: EventKinds(area), description: Type.Optional(Description()), enabled: Type.Optional(Enabled()) }),
      response: WithSecret,
      handler: async ({ body }, ctx) => {
        const { secret, ...endpoint } = await createEndpoint(productOf(ctx), area, body)
        return { ...out(endpoint), secret }
      },
    }),
    listOperation(area, Endpoint),
    defineOperation({
      ...common, id: `${area}_webhooks_get`, method: 'GET', path: `/${area}/webhooks/{id}`,
      summary: `Get one ${area} webhook endpoint (its secret's prefix only)`,
      params: IdPath,
      response: Endpoint,
      handler: async ({ params }, ctx) => out(await getEndpoint(productOf(ctx), area, params.id)),
    }),
    defineOperation({
      ...common, id: `${area}_webhooks_update`, method: 'PATCH', path: `/${area}/webhooks/{id}`,
      rateClass: 'expensive', // may resolve a new URL's host name
      summary: `Change a ${area} webhook endpoint; only supplied fields change (enabling clears disabledReason)`,
      params: IdPath,
      body: Strict({
        url: Type.Optional(Url()), eventKinds: Type.Optional(EventKinds(area)), description: Type.Optional(Description()),
        enabled: Type.Optional(Enabled()),
      }),
      response: Endpoint,
      handler: async ({ params, body }, ctx) => out(await updateEndpoint(productOf(ctx), area, params.id, body)),
    }),
    defineOperation({
      ...common, id: `${area}_webhooks_delete`, method: 'DELETE', path: `/${area}/webhooks/{id}`,
      summary: `Delete a ${area} webhook endpoint`,
      params: IdPath,
      response: Strict({ id: Type.String(), deleted: Type.Literal(true) }),
      handler: async ({ params }, ctx) => {
        await deleteEndpoint(productOf(ctx), area, params.id)
        return { id: params.id, deleted: true as const }
      },
    }),
    defineOperation({
      ...common, id: `${area}_webhooks_rotate_secret`, method: 'POST', path: `/${area}/webhooks/{id}/rotate-secret`,
      summary: `Replace a ${area} webhook endpoint's secret; the new one is answered only here, the old one still signs for `
        + `${PREVIOUS_SECRET_HOURS} h`,
      params: IdPath,
      response: WithSecret,
      handler: async ({ params }, ctx) => {
        const { secret, ...endpoint } = await rotateEndpointSecret(productOf(ctx), area, params.id)
        return { ...out(endpoint), secret }
      },
    }),
  ]
}

/** Every area's webhook operations, for the catalog. */
export const webhookEndpointOperations = WEBHOOK_AREAS.flatMap(webhookOperations)
