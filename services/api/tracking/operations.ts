// Tracking area: event capture, and the publishable keys (ptk_) web pages and apps capture with (docs/analytics.md).
import Type from 'typebox'
import { defineOperation, productOf, userOf } from '../../../shared/catalog/operation'
import { iso, Strict, Timestamp, Uuid } from '../../../shared/catalog/schemas'
import { HasMore, listed, pageQuery } from '../../../shared/catalog/pagination'
import { CaptureBatchSchema, captureEvents, MAX_BATCH } from '../../../shared/analytics/capture'
import { AllowedOrigins } from '../../../shared/analytics/capture-keys'
import { createCaptureKey, listCaptureKeys, revokeCaptureKey, updateCaptureKeyOrigins, type CaptureKey } from './capture-keys'

export const eventsCapture = defineOperation({
  id: 'tracking_events_capture', method: 'POST', path: '/tracking/events', area: 'tracking', auth: 'product',
  summary: `Capture a batch of up to ${MAX_BATCH} events; the batch is validated whole and stored all or nothing`,
  description: 'Each event names at least one identity. Properties are at most 8 KiB serialized; the whole request is '
    + 'bounded by the API body limit. A timestamp defaults to the time of capture.',
  body: CaptureBatchSchema,
  response: Strict({ accepted: Type.Integer() }),
  handler: async ({ body }, ctx) => captureEvents(productOf(ctx), body.events),
})

const CaptureKeySchema = Strict({
  id: Uuid(), name: Type.String(),
  key: Type.String({ description: 'The publishable key (ptk_...): public by design, embed it in pages and apps' }),
  allowedOrigins: AllowedOrigins,
  environment: Type.String({ description: 'The environment the key works in; it is unknown in every other one' }),
  createdAt: Timestamp(), updatedAt: Timestamp(),
})
const KeyPath = Strict({ keyId: Uuid('Capture key id') })
const keyOut = (k: CaptureKey) => ({ ...k, createdAt: iso(k.createdAt), updatedAt: iso(k.updatedAt) })

// Members and platform keys with the Tracking area manage these too (unlike rtk_ keys, owner only): a capture key can do
// nothing but append events to its product, which any of them can already do with tracking_events_capture.
export const captureKeysCreate = defineOperation({
  id: 'tracking_capture-keys_create', method: 'POST', path: '/tracking/capture-keys', area: 'tracking', auth: 'product',
  summary: 'Create a publishable capture key (ptk_) for this environment, to embed in web pages and apps',
  description: 'The key can only capture events into this product, on the public route POST {public_url}/{productId}/capture. '
    + 'allowedOrigins lists the browser origins it works from (exact, lower case); empty or left out: any origin. '
    + 'Requests without an Origin header (apps, servers) are always accepted.',
  body: Strict({
    name: Type.String({ minLength: 1, maxLength: 256, description: 'A label only' }),
    allowedOrigins: Type.Optional(AllowedOrigins),
  }),
  response: CaptureKeySchema,
  handler: async ({ body }, ctx) => keyOut(await createCaptureKey(productOf(ctx), body, userOf(ctx))),
})

export const captureKeysList = defineOperation({
  id: 'tracking_capture-keys_list', method: 'GET', path: '/tracking/capture-keys', area: 'tracking', auth: 'product',
  summary: "List the product's active capture keys of this environment, newest first (paginated)",
  query: Strict(pageQuery('key')),
  response: Strict({ keys: Type.Array(CaptureKeySchema), has_more: HasMore() }),
  handler: ({ query }, ctx) => listed('keys', query, (page) => listCaptureKeys(productOf(ctx), page), keyOut),
})

export const captureKeysRevoke = defineOperation({
  id: 'tracking_capture-keys_revoke', method: 'DELETE', path: '/tracking/capture-keys/{keyId}', area: 'tracking', auth: 'product',
  summary: 'Revoke a capture key; it stops working at once on every public worker',
  params: KeyPath,
  response: Strict({ id: Uuid(), revoked: Type.Boolean() }),
  handler: async ({ params }, ctx) => {
    await revokeCaptureKey(productOf(ctx), params.keyId)
    return { id: params.keyId, revoked: true }
  },
})

export const captureKeysUpdateOrigins = defineOperation({
  id: 'tracking_capture-keys_update-origins', method: 'PUT', path: '/tracking/capture-keys/{keyId}/origins', area: 'tracking',
  auth: 'product',
  summary: 'Replace the allowed origins of an active capture key (empty: any origin); takes effect at once on every public worker',
  params: KeyPath,
  body: Strict({ allowedOrigins: AllowedOrigins }),
  response: CaptureKeySchema,
  handler: async ({ params, body }, ctx) => keyOut(await updateCaptureKeyOrigins(productOf(ctx), params.keyId, body.allowedOrigins)),
})

export const trackingOperations = [eventsCapture, captureKeysCreate, captureKeysList, captureKeysRevoke, captureKeysUpdateOrigins]
