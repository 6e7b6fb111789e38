// Tracking area: event capture (behaviour the spec leaves open; docs/analytics.md).
import Type from 'typebox'
import { defineOperation, productOf } from '../../../shared/catalog/operation'
import { Strict } from '../../../shared/catalog/schemas'
import { captureEvents, MAX_BATCH, MAX_PROPERTIES_BYTES } from './capture'

const IdentityValue = () => Type.Optional(Type.String({ minLength: 1, maxLength: 200 }))

export const eventsCapture = defineOperation({
  id: 'tracking_events_capture', method: 'POST', path: '/tracking/events', area: 'tracking', auth: 'product',
  summary: `Capture a batch of up to ${MAX_BATCH} events; the batch is validated whole and stored all or nothing`,
  description: 'Each event names at least one identity. Properties are at most 8 KiB serialized; the whole request is '
    + 'bounded by the API body limit. A timestamp defaults to the time of capture.',
  body: Strict({
    events: Type.Array(Strict({
      event: Type.String({ minLength: 1, maxLength: 200 }),
      timestamp: Type.Optional(Type.String({ maxLength: 40, description: 'ISO-8601 with a zone; default: now' })),
      identity: Strict({ anonymous_id: IdentityValue(), users_id: IdentityValue(), email: IdentityValue(), phone: IdentityValue() }, 'At least one'),
      properties: Type.Optional(Type.Record(Type.String({ maxLength: 200 }), Type.Unknown(), { description: `At most ${MAX_PROPERTIES_BYTES} bytes serialized` })),
    }), { minItems: 1, maxItems: MAX_BATCH }),
  }),
  response: Strict({ accepted: Type.Integer() }),
  handler: async ({ body }, ctx) => captureEvents(productOf(ctx), body.events),
})

export const trackingOperations = [eventsCapture]
