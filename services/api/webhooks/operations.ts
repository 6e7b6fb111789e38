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
import {
  type Attempt, type Delivery, type DeliveryDetail, getDelivery, listDeliveries, replayDelivery, sendTestEvent,
} from '../../../shared/webhooks/deliveries'
import { TEST_EVENT_KIND } from '../../../shared/webhooks/outbox'
import { URL_MAX_BYTES } from '../../../shared/webhooks/url-policy'

const Url = () => Type.String({
  minLength: 1, maxLength: URL_MAX_BYTES,
  description: `Where events are POSTed: https, at most ${URL_MAX_BYTES} bytes, no user name, password or fragment; port 443, 80 `
    + 'or one from 1024 up that no known service uses (not 3306, 5432, 6379, ...); its host must be a '
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

const AttemptSchema = () => Strict({
  attemptedAt: Timestamp(),
  durationMs: Type.Integer({ description: 'From the start of the request to the end of the answer (or the failure), in ms' }),
  statusCode: Type.Union([Type.Integer(), Type.Null()], { description: 'The HTTP status; null when no answer came (see error)' }),
  error: Type.Union([Type.String(), Type.Null()], {
    description: 'Why there was no status (refused address, DNS, timeout, connection), why a 3xx was not followed, or that the answer was cut short',
  }),
  responseExcerpt: Type.String({ description: 'The first 1 KiB of the answer' }),
})

/** A delivery as every delivery list answers it (one email's deliveries add the endpoint). */
export const deliveryFields = () => ({
  id: Uuid(),
  messageId: Type.String({ description: 'The webhook-id header: the same on every attempt and on a replay' }),
  eventKind: Type.String(),
  state: Type.Union([Type.Literal('pending'), Type.Literal('succeeded'), Type.Literal('failed')]),
  attemptCount: Type.Integer({ description: 'Attempts made so far' }),
  nextAttemptAt: Type.Union([Timestamp(), Type.Null()], { description: 'When the next attempt is due; null once succeeded or failed' }),
  replayOf: Type.Union([Uuid(), Type.Null()], { description: 'The delivery this one replays' }),
  createdAt: Timestamp(), updatedAt: Timestamp(),
  lastAttempt: Type.Union([AttemptSchema(), Type.Null()], { description: 'The latest attempt; null before the first' }),
})
const DeliverySchema = () => Strict(deliveryFields())
const DeliveryDetailSchema = () => Strict({
  ...deliveryFields(),
  payload: Type.Unknown({ description: 'The body sent: {type, timestamp, data}' }),
  attempts: Type.Array(AttemptSchema(), { description: 'Every attempt, oldest first' }),
})

const attemptOut = (a: Attempt) => ({ ...a, attemptedAt: iso(a.attemptedAt) })
export const deliveryOut = (d: Delivery) => ({
  ...d, createdAt: iso(d.createdAt), updatedAt: iso(d.updatedAt), nextAttemptAt: d.nextAttemptAt && iso(d.nextAttemptAt),
  lastAttempt: d.lastAttempt && attemptOut(d.lastAttempt),
})
const detailOut = (d: DeliveryDetail) => ({ ...deliveryOut(d), payload: d.payload, attempts: d.attempts.map(attemptOut) })

const DeliveryPath = Strict({
  id: Type.String({ minLength: 1, description: 'Webhook endpoint id' }),
  deliveryId: Type.String({ minLength: 1, description: 'Webhook delivery id' }),
})

/** The deliveries of one endpoint, listed as the area lists (Mail `{object, has_more, data}`, Realtime by member name). */
function deliveriesListOperation(area: WebhookArea) {
  const base = {
    id: `${area}_webhooks_deliveries_list`, method: 'GET', path: `/${area}/webhooks/{id}/deliveries`, area, auth: 'product',
    summary: `List the deliveries of one ${area} webhook endpoint, newest first, each with its last attempt (paginated)`,
    params: IdPath,
    query: Strict(pageQuery('webhook delivery')),
  } as const
  const list = (productId: string, id: string) => (page: Parameters<typeof listDeliveries>[3]) => listDeliveries(productId, area, id, page)
  if (area === 'mail') {
    return defineOperation({
      ...base,
      response: Strict({ object: Type.Literal('list'), has_more: HasMore(), data: Type.Array(DeliverySchema()) }),
      handler: ({ params, query }, ctx) => listObject(query, list(productOf(ctx), params.id), deliveryOut),
    })
  }
  return defineOperation({
    ...base,
    response: Strict({ deliveries: Type.Array(DeliverySchema()), has_more: HasMore() }),
    handler: ({ params, query }, ctx) => listed('deliveries', query, list(productOf(ctx), params.id), deliveryOut),
  })
}

/** Listing, reading, replaying deliveries and sending a test event: the four delivery operations of one area. */
function deliveryOperations(area: WebhookArea) {
  const common = { area, auth: 'product' } as const
  return [
    deliveriesListOperation(area),
    defineOperation({
      ...common, id: `${area}_webhooks_deliveries_get`, method: 'GET', path: `/${area}/webhooks/{id}/deliveries/{deliveryId}`,
      summary: `Get one delivery of a ${area} webhook endpoint: its payload and every attempt`,
      params: DeliveryPath,
      response: DeliveryDetailSchema(),
      handler: async ({ params }, ctx) => detailOut(await getDelivery(productOf(ctx), area, params.id, params.deliveryId)),
    }),
    defineOperation({
      ...common, id: `${area}_webhooks_deliveries_replay`, method: 'POST', path: `/${area}/webhooks/{id}/deliveries/{deliveryId}/replay`,
      summary: `Deliver a ${area} webhook message again to its endpoint: a new delivery, retried on the full schedule, same webhook-id`,
      description: 'The endpoint must be enabled (409 otherwise). Answers the new delivery, due at once.',
      params: DeliveryPath,
      response: DeliveryDetailSchema(),
      rateClass: 'expensive', // an outbound request to the tenant's URL, and a delivery more to keep
      handler: async ({ params }, ctx) => detailOut(await replayDelivery(productOf(ctx), area, params.id, params.deliveryId)),
    }),
    defineOperation({
      ...common, id: `${area}_webhooks_send_test`, method: 'POST', path: `/${area}/webhooks/{id}/test`,
      summary: `Send a ${TEST_EVENT_KIND} event to one ${area} webhook endpoint, signed and retried as any event`,
      description: 'The endpoint must be enabled (409 otherwise). Answers the delivery, due at once; list or get it to see its attempts.',
      params: IdPath,
      response: DeliveryDetailSchema(),
      rateClass: 'expensive', // an outbound request to the tenant's URL, and a message more to keep
      handler: async ({ params }, ctx) => detailOut(await sendTestEvent(productOf(ctx), area, params.id)),
    }),
  ]
}

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

/** The operations of one area's webhooks: six on endpoints, four on their deliveries. */
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
      description: 'Events are signed per Standard Webhooks with the whsec_ secret and delivered by the webhooks process (docs/webhooks.md).',
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
    ...deliveryOperations(area),
  ]
}

/** Every area's webhook operations, for the catalog. */
export const webhookEndpointOperations = WEBHOOK_AREAS.flatMap(webhookOperations)
