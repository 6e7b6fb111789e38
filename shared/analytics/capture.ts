// Event capture: a batch validated whole, then stored in one statement (one transaction: all or nothing). Shared by the
// platform API (tracking_events_capture) and the public capture route (services/public/capture), so both keep one rule set.
import Type from 'typebox'
import { Strict } from '../catalog/schemas'
import { sql } from '../db/client'
import { badRequest, type FieldError } from '../errors'
import { parseIsoTime } from '../iso-time'
import { eventsCaptured, type CaptureSource } from './metrics'

/** Most events in one batch, on either route. */
export const MAX_BATCH = 1000
/** Most bytes one event's properties take, serialized as JSON. */
export const MAX_PROPERTIES_BYTES = 8192

export interface CapturedEvent {
  event: string
  timestamp?: string
  identity: { anonymous_id?: string; users_id?: string; email?: string; phone?: string }
  properties?: Record<string, unknown>
}

const IdentityValue = () => Type.Optional(Type.String({ minLength: 1, maxLength: 200 }))

/** One event as both routes take it (the schema feeds OpenAPI and MCP through tracking_events_capture). */
export const CapturedEventSchema = Strict({
  event: Type.String({ minLength: 1, maxLength: 200 }),
  timestamp: Type.Optional(Type.String({ maxLength: 40, description: 'ISO-8601 with a zone; default: now' })),
  identity: Strict({ anonymous_id: IdentityValue(), users_id: IdentityValue(), email: IdentityValue(), phone: IdentityValue() }, 'At least one'),
  properties: Type.Optional(Type.Record(Type.String({ maxLength: 200 }), Type.Unknown(), { description: `At most ${MAX_PROPERTIES_BYTES} bytes serialized` })),
})

/** `{events: [...]}`: 1 to MAX_BATCH events. */
export const CaptureBatchSchema = Strict({
  events: Type.Array(CapturedEventSchema, { minItems: 1, maxItems: MAX_BATCH }),
})

/**
 * The rules the schema cannot say: an identity, a parseable timestamp, bounded properties. Every failure is named.
 * Returns the properties serialized (the insert's column), so each is serialized once.
 */
function check(events: CapturedEvent[]): { errors: FieldError[]; properties: string[] } {
  const errors: FieldError[] = []
  const properties: string[] = new Array(events.length)
  for (let i = 0; i < events.length; i++) {
    const e = events[i]!
    const at = `/body/events/${i}`
    // Values are stored trimmed, so one that is only spaces names nobody.
    if (!Object.values(e.identity).some((v) => v?.trim())) errors.push({ path: `${at}/identity`, message: 'needs at least one of anonymous_id, users_id, email, phone that is not blank' })
    if (e.timestamp !== undefined && !parseIsoTime(e.timestamp, { zoneRequired: true })) {
      errors.push({ path: `${at}/timestamp`, message: 'must be an ISO-8601 time with a zone, a real date within the years 0001-9999 and an offset within ±14:00, such as 2026-03-01T12:00:00Z' })
    }
    const text = e.properties === undefined ? '{}' : JSON.stringify(e.properties)
    // Bytes only matter once the text could be over: a string of n UTF-16 units is at most 3n bytes.
    const size = text.length * 3 <= MAX_PROPERTIES_BYTES ? 0 : Buffer.byteLength(text)
    if (size > MAX_PROPERTIES_BYTES) errors.push({ path: `${at}/properties`, message: `is ${size} bytes serialized; at most ${MAX_PROPERTIES_BYTES}` })
    properties[i] = text
  }
  return { errors, properties }
}

/**
 * Stores a batch already shaped by CaptureBatchSchema; 400 naming every failing field, and then nothing is stored.
 * Counts the events stored (platform_tracking_events_captured_total, by source).
 */
export async function captureEvents(productId: string, events: CapturedEvent[], now = new Date(), source: CaptureSource = 'api'): Promise<{ accepted: number }> {
  const { errors, properties } = check(events)
  if (errors.length) throw badRequest(`Invalid request: ${errors.map((f) => `${f.path} ${f.message}`).join('; ')}`, errors)
  const column = <K extends keyof CapturedEvent['identity']>(k: K) => events.map((e) => e.identity[k]?.trim() || null)
  const at = now.toISOString()
  await sql`
    insert into tracked_events (product_id, event, ts, anonymous_id, users_id, email, phone, properties)
    select ${productId}, event, ts::timestamptz, anonymous_id, users_id, lower(email), phone, properties::jsonb
    from unnest(${events.map((e) => e.event)}::text[], ${events.map((e) => e.timestamp ?? at)}::text[],
                ${column('anonymous_id')}::text[], ${column('users_id')}::text[], ${column('email')}::text[], ${column('phone')}::text[],
                ${properties}::text[])
      as t(event, ts, anonymous_id, users_id, email, phone, properties)`
  eventsCaptured.inc({ source }, events.length)
  return { accepted: events.length }
}
