// What a product sees of its endpoints' deliveries: the list (newest first, each with its last attempt), one delivery
// with all its attempts and its payload, a replay (a new delivery of the same message, same webhook-id) and a test
// event. Every function finds the endpoint first through its product and area: another product's ids are 404.
import type { PageRequest } from '../catalog/pagination'
import { sql } from '../db/client'
import { keysetPage } from '../db/keyset'
import { conflict, notFound } from '../errors'
import { isUuid } from '../ids'
import { getEndpoint } from './endpoints'
import type { WebhookArea } from './events'
import { recordTestEvent } from './outbox'
import { isPgError } from '../db/error-codes'

export type DeliveryState = 'pending' | 'succeeded' | 'failed'

export interface Attempt {
  attemptedAt: Date
  durationMs: number
  /** The HTTP status, or null when no answer came (see `error`). */
  statusCode: number | null
  error: string | null
  /** The first 1 KiB of the answer. */
  responseExcerpt: string
}

export interface Delivery {
  id: string
  /** The `webhook-id` header: the same for a replay of this message. */
  messageId: string
  eventKind: string
  state: DeliveryState
  /** Attempts made so far. */
  attemptCount: number
  /** When the next attempt is due; null once the delivery succeeded or failed. */
  nextAttemptAt: Date | null
  /** The delivery this one replays, or null. */
  replayOf: string | null
  createdAt: Date
  updatedAt: Date
  lastAttempt: Attempt | null
}

export interface DeliveryDetail extends Delivery {
  /** The body sent, parsed: `{type, timestamp, data}`. */
  payload: unknown
  /** Every attempt, oldest first. */
  attempts: Attempt[]
}

const COLUMNS = sql`d.id, d.message_id, m.kind, d.state, d.attempts, d.next_attempt_at, d.replay_of, d.created_at, d.updated_at,
  a.attempted_at, a.duration_ms, a.status_code, a.error, a.response_excerpt`

const FROM = sql`from webhook_deliveries d join webhook_messages m on m.id = d.message_id
  left join lateral (select * from webhook_attempts where delivery_id = d.id order by id desc limit 1) a on true`

const attemptOut = (row: Record<string, any>): Attempt => ({
  attemptedAt: row.attempted_at, durationMs: row.duration_ms, statusCode: row.status_code, error: row.error,
  responseExcerpt: row.response_excerpt,
})

const deliveryOut = (row: Record<string, any>): Delivery => ({
  id: row.id, messageId: row.message_id, eventKind: row.kind, state: row.state, attemptCount: row.attempts,
  nextAttemptAt: row.state === 'pending' ? row.next_attempt_at : null, replayOf: row.replay_of, createdAt: row.created_at,
  updatedAt: row.updated_at, lastAttempt: row.attempted_at ? attemptOut(row) : null,
})

const deliveryNotFound = () => notFound('Webhook delivery')

/**
 * An endpoint deleted while a delivery to it is added: its delete holds the row, so the foreign key check fails (23503)
 * once the delete commits. The endpoint is gone: 404, as if it had gone a moment before.
 */
async function endpointStillThere<T>(adding: Promise<T>): Promise<T> {
  try {
    return await adding
  } catch (error) {
    throw isPgError(error, 'foreignKeyViolation') ? notFound('Webhook endpoint') : error
  }
}

/** The endpoint's deliveries, newest first; 404 when the endpoint is not the product's in this area. */
export async function listDeliveries(productId: string, area: WebhookArea, endpointId: string, page: PageRequest): Promise<Delivery[]> {
  await getEndpoint(productId, area, endpointId)
  const rows = await keysetPage({
    what: 'webhook delivery', order: { key: ['d.created_at', 'd.id'], descending: true },
    cursor: (after) => sql`from webhook_deliveries d where d.id = ${after} and d.endpoint_id = ${endpointId}`,
    rows: sql`select ${COLUMNS} ${FROM} where d.endpoint_id = ${endpointId}`,
  }, page)
  return rows.map(deliveryOut)
}

/** A delivery with the endpoint it went to: how one email's deliveries are listed, across endpoints. */
export interface EndpointDelivery extends Delivery {
  endpointId: string
  endpointUrl: string
}

/**
 * The deliveries of the mail events about one email (its `data.emailId`), to every endpoint of the product, newest
 * first. The id is read from the payload by the expression of the index webhook_messages_email (migration 0023),
 * written here exactly as there so the planner uses it. The caller has checked that the email is the product's.
 */
export async function listEmailDeliveries(productId: string, emailId: string, page: PageRequest): Promise<EndpointDelivery[]> {
  const aboutEmail = sql`m.product_id = ${productId} and m.area = 'mail'
    and substring(m.payload from '^\\{"type":"[^"]*","timestamp":"[^"]*","data":\\{"emailId":"([0-9a-f-]{36})"') = ${emailId}`
  const rows = await keysetPage({
    what: 'webhook delivery', order: { key: ['d.created_at', 'd.id'], descending: true },
    cursor: (after) => sql`from webhook_deliveries d join webhook_messages m on m.id = d.message_id where d.id = ${after} and ${aboutEmail}`,
    rows: sql`select ${COLUMNS}, d.endpoint_id, e.url ${FROM} join webhook_endpoints e on e.id = d.endpoint_id where ${aboutEmail}`,
  }, page)
  return rows.map((row) => ({ ...deliveryOut(row), endpointId: row.endpoint_id, endpointUrl: row.url }))
}

/** One delivery of the endpoint, with its payload and every attempt. */
export async function getDelivery(productId: string, area: WebhookArea, endpointId: string, deliveryId: string): Promise<DeliveryDetail> {
  await getEndpoint(productId, area, endpointId)
  if (!isUuid(deliveryId)) throw deliveryNotFound()
  const [row] = await sql`select ${COLUMNS}, m.payload ${FROM} where d.id = ${deliveryId} and d.endpoint_id = ${endpointId}`
  if (!row) throw deliveryNotFound()
  const attempts = await sql`select * from webhook_attempts where delivery_id = ${deliveryId} order by id`
  return { ...deliveryOut(row), payload: JSON.parse(row.payload), attempts: attempts.map(attemptOut) }
}

/** Deliveries wait while their endpoint is disabled; asking for a new one then would only add to what waits. */
async function enabledEndpoint(productId: string, area: WebhookArea, endpointId: string) {
  const endpoint = await getEndpoint(productId, area, endpointId)
  if (!endpoint.enabled) throw conflict('The webhook endpoint is disabled: enable it first (PATCH enabled: true)')
  return endpoint
}

/**
 * A new delivery of the same message to the same endpoint, due now: a new attempt chain on the full schedule, with
 * the same webhook-id and body (receivers that dedupe on webhook-id see it as the event they may have had already).
 */
export async function replayDelivery(productId: string, area: WebhookArea, endpointId: string, deliveryId: string): Promise<DeliveryDetail> {
  await enabledEndpoint(productId, area, endpointId)
  if (!isUuid(deliveryId)) throw deliveryNotFound()
  const [row] = await endpointStillThere(sql`
    insert into webhook_deliveries (message_id, endpoint_id, replay_of)
    select message_id, endpoint_id, id from webhook_deliveries where id = ${deliveryId} and endpoint_id = ${endpointId}
    returning id`.execute())
  if (!row) throw deliveryNotFound()
  return getDelivery(productId, area, endpointId, row.id)
}

/** A `webhook.test` event to this endpoint only, delivered as any other (signed, retried, recorded). */
export async function sendTestEvent(productId: string, area: WebhookArea, endpointId: string): Promise<DeliveryDetail> {
  await enabledEndpoint(productId, area, endpointId)
  const { deliveryId } = await endpointStillThere(sql.begin((tx) => recordTestEvent(tx, productId, area, endpointId, {
    endpointId, message: 'A test event, sent on request: nothing happened.',
  })))
  return getDelivery(productId, area, endpointId, deliveryId)
}
