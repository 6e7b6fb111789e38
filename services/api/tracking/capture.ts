// Event capture: a batch validated whole, then stored in one statement (one transaction: all or nothing).
import { sql } from '../../../shared/db/client'
import { badRequest, type FieldError } from '../../../shared/errors'
import { parseIsoTime } from '../iso-time'

export const MAX_BATCH = 1000
export const MAX_PROPERTIES_BYTES = 8192

export interface CapturedEvent {
  event: string
  timestamp?: string
  identity: { anonymous_id?: string; users_id?: string; email?: string; phone?: string }
  properties?: Record<string, unknown>
}


/** The rules the schema cannot say: an identity, a parseable timestamp, bounded properties. Every failure is named. */
function check(events: CapturedEvent[]): FieldError[] {
  const errors: FieldError[] = []
  events.forEach((e, i) => {
    const at = `/body/events/${i}`
    // Values are stored trimmed, so one that is only spaces names nobody.
    if (!Object.values(e.identity).some((v) => v?.trim())) errors.push({ path: `${at}/identity`, message: 'needs at least one of anonymous_id, users_id, email, phone that is not blank' })
    if (e.timestamp !== undefined && !parseIsoTime(e.timestamp, { zoneRequired: true })) {
      errors.push({ path: `${at}/timestamp`, message: 'must be an ISO-8601 time with a zone, a real date within the years 0001-9999 and an offset within ±14:00, such as 2026-03-01T12:00:00Z' })
    }
    const size = e.properties === undefined ? 0 : Buffer.byteLength(JSON.stringify(e.properties))
    if (size > MAX_PROPERTIES_BYTES) errors.push({ path: `${at}/properties`, message: `is ${size} bytes serialized; at most ${MAX_PROPERTIES_BYTES}` })
  })
  return errors
}

export async function captureEvents(productId: string, events: CapturedEvent[], now = new Date()): Promise<{ accepted: number }> {
  const errors = check(events)
  if (errors.length) throw badRequest(`Invalid request: ${errors.map((f) => `${f.path} ${f.message}`).join('; ')}`, errors)
  const column = <K extends keyof CapturedEvent['identity']>(k: K) => events.map((e) => e.identity[k]?.trim() || null)
  await sql`
    insert into tracked_events (product_id, event, ts, anonymous_id, users_id, email, phone, properties)
    select ${productId}, event, ts::timestamptz, anonymous_id, users_id, lower(email), phone, properties::jsonb
    from unnest(${events.map((e) => e.event)}::text[], ${events.map((e) => e.timestamp ?? now.toISOString())}::text[],
                ${column('anonymous_id')}::text[], ${column('users_id')}::text[], ${column('email')}::text[], ${column('phone')}::text[],
                ${events.map((e) => JSON.stringify(e.properties ?? {}))}::text[])
      as t(event, ts, anonymous_id, users_id, email, phone, properties)`
  return { accepted: events.length }
}
