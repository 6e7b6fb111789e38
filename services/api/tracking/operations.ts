// Tracking area: event capture (behaviour the spec leaves open; docs/analytics.md).
import { defineOperation, productOf } from '../../../shared/catalog/operation'
import { Strict } from '../../../shared/catalog/schemas'
import Type from 'typebox'
import { CaptureBatchSchema, captureEvents, MAX_BATCH } from '../../../shared/analytics/capture'

export const eventsCapture = defineOperation({
  id: 'tracking_events_capture', method: 'POST', path: '/tracking/events', area: 'tracking', auth: 'product',
  summary: `Capture a batch of up to ${MAX_BATCH} events; the batch is validated whole and stored all or nothing`,
  description: 'Each event names at least one identity. Properties are at most 8 KiB serialized; the whole request is '
    + 'bounded by the API body limit. A timestamp defaults to the time of capture.',
  body: CaptureBatchSchema,
  response: Strict({ accepted: Type.Integer() }),
  handler: async ({ body }, ctx) => captureEvents(productOf(ctx), body.events),
})

export const trackingOperations = [eventsCapture]
