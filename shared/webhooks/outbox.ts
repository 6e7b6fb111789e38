// The webhook outbox: an event is recorded in the transaction of the change that causes it (a message, and one
// delivery per enabled endpoint of the product and area that wants its kind), so an event exists if and only if the
// change committed. The webhooks process (services/webhooks/) delivers from these rows.
import { randomBytes } from 'node:crypto'
import type postgres from 'postgres'
import type { Sql } from '../db/client'

/** Where an event is recorded: the caller's transaction, or the pool for an event that stands alone. */
export type Queryable = Sql | postgres.TransactionSql
import { ALL_KINDS, EVENT_KINDS, type WebhookArea } from './events'

/** The kind of the event `sendTestEvent` sends to one endpoint (not subscribable: it goes where it is asked to). */
export const TEST_EVENT_KIND = 'webhook.test'

export interface RecordedEvent {
  productId: string
  area: WebhookArea
  /** One of EVENT_KINDS[area]. */
  kind: string
  /** The payload's `data`: any JSON value the kind documents (docs/webhooks.md). */
  data: unknown
  /**
   * The producer's own key for this event (at most 256 bytes), unique per product and area: recording it again records
   * nothing new and answers the first message's id. For producers that may see one event twice (a stream re-read).
   */
  dedupeKey?: string
}

/** A message id, the `webhook-id` of every attempt: `msg_` and 24 base64url characters (144 random bits). */
export const newMessageId = () => `msg_${randomBytes(18).toString('base64url')}`

/** The body POSTed, in the Standard Webhooks / Svix / Resend shape; stored as is, so every attempt sends these bytes. */
export const payloadText = (kind: string, createdAt: Date, data: unknown) =>
  JSON.stringify({ type: kind, timestamp: createdAt.toISOString(), data })

/**
 * Records one event inside the caller's transaction `tx` (or `sql` for an event that stands alone): the message, and a
 * pending delivery to every enabled endpoint of the product and area whose kinds include `kind` or `*`, in one
 * statement. Answers the message id (the first one's when `dedupeKey` was recorded before), or undefined when no
 * endpoint wants the event: then nothing is stored (most changes of most products have no webhook). Throws on a kind
 * the area does not have.
 * @example await sql.begin(async (tx) => { ...the change...; await recordEvent(tx, { productId, area: 'mail', kind: 'email.bounced', data }) })
 */
export async function recordEvent(tx: Queryable, event: RecordedEvent): Promise<string | undefined> {
  const kinds: readonly string[] = EVENT_KINDS[event.area]
  if (!kinds.includes(event.kind)) throw new Error(`${event.kind} is not a ${event.area} webhook event kind`)
  // `for key share`: an endpoint deleted after this read cannot fail the insert's foreign key check (and with it the
  // caller's transaction, say the mailer's, which would then do its change again): its delete waits for the caller's
  // commit, or, committed first, leaves the endpoint out.
  return insertMessage(tx, event, tx`
    select e.id from webhook_endpoints e
    where e.product_id = ${event.productId} and e.area = ${event.area} and e.enabled
      and (${event.kind} = any(e.event_kinds) or ${ALL_KINDS} = any(e.event_kinds))
    for key share of e`)
}

/** A `webhook.test` message delivered to one endpoint only (the API's send-test operation). */
export async function recordTestEvent(tx: Queryable, productId: string, area: WebhookArea, endpointId: string, data: unknown): Promise<{ messageId: string; deliveryId: string }> {
  const messageId = await insertMessage(tx, { productId, area, kind: TEST_EVENT_KIND, data }, tx`select ${endpointId}::uuid as id`)
  const [delivery] = await tx`select id from webhook_deliveries where message_id = ${messageId!}`
  return { messageId: messageId!, deliveryId: delivery!.id }
}

/**
 * Inserts the message and a delivery to each endpoint `endpoints` selects (a fragment of `tx` answering `id`), or
 * nothing when it selects none. One statement: the common case (no endpoint) costs one index lookup.
 */
async function insertMessage(tx: Queryable, event: RecordedEvent, endpoints: postgres.PendingQuery<postgres.Row[]>): Promise<string | undefined> {
  const createdAt = new Date()
  const [row] = await tx`
    with targets as (${endpoints}),
    message as (
      insert into webhook_messages (id, product_id, area, kind, payload, dedupe_key, created_at)
      select ${newMessageId()}, ${event.productId}, ${event.area}, ${event.kind},
        ${payloadText(event.kind, createdAt, event.data ?? null)}, ${event.dedupeKey ?? null}, ${createdAt}
      where exists (select 1 from targets)
      on conflict (product_id, area, dedupe_key) where dedupe_key is not null do nothing
      returning id
    ),
    deliveries as (
      insert into webhook_deliveries (message_id, endpoint_id) select message.id, targets.id from message, targets returning 1
    )
    select (select id from message) as id, (select count(*) from deliveries)::int as deliveries, exists (select 1 from targets) as wanted`
  if (row!.id) return row!.id
  if (!row!.wanted || event.dedupeKey === undefined) return undefined
  // Recorded before under this key: its id, and nothing new.
  const [first] = await tx`
    select id from webhook_messages where product_id = ${event.productId} and area = ${event.area} and dedupe_key = ${event.dedupeKey}`
  return first?.id
}
