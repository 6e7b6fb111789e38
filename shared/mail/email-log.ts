// The email log, read: one email with its event timeline, and the list newest first (Resend's shape). Shared by the
// public routes (scoped to what a sending key may see) and the platform API (the whole product's log).
import Type from 'typebox'
import { sql } from '../db/client'
import { badRequest, notFound } from '../errors'
import { isUuid } from '../ids'
import { Timestamp } from '../catalog/schemas'
import { DomainName } from './schemas'

/**
 * Whose emails a reader sees: the product's, narrowed to those one API key sent (`apiKeyId`) and to one domain
 * (`domainId`) when set. Anything outside it is 404, indistinguishable from an unknown id.
 */
export interface EmailReader {
  productId: string
  apiKeyId: string | null
  domainId: string | null
}

/** Every email of the product: the platform API's reader (a session or platform key of the product). */
export const wholeProduct = (productId: string): EmailReader => ({ productId, apiKeyId: null, domainId: null })

export const EMAIL_PAGE_DEFAULT = 20
export const EMAIL_PAGE_MAX = 100

/** A page of the log: `limit` (1..100, default 20), and at most one of `after` (older than that id) or `before` (newer). */
export interface EmailPage extends EmailFilter {
  limit?: number
  after?: string
  before?: string
}

/** The states an email's last_event can be in (emails.last_event), the values `status` filters on. */
export const EMAIL_STATES = ['queued', 'sent', 'delivered', 'delivery_delayed', 'bounced', 'failed', 'suppressed'] as const

/** Narrows the log; every member given must hold (they combine with and). */
export interface EmailFilter {
  status?: (typeof EMAIL_STATES)[number]
  /** An address among To, Cc and Bcc, compared lower-cased. */
  recipient?: string
  /** A sending domain's name: the emails sent from it. */
  domain?: string
  /** Created at or after this instant (ISO 8601). */
  since?: string
  /** Created before this instant (ISO 8601). */
  until?: string
}

/**
 * The filter's query members, one schema for both surfaces (all strings, so the public route's string-only query reads
 * them too). Each is served by an index within the product (migration 0022).
 */
export const emailFilterQuery = () => ({
  status: Type.Optional(Type.Unsafe<NonNullable<EmailFilter['status']>>({
    type: 'string', enum: [...EMAIL_STATES], description: `Only emails whose last event is this one: ${EMAIL_STATES.join(', ')}`,
  })),
  recipient: Type.Optional(Type.String({
    minLength: 3, maxLength: 254, pattern: '^[^\\s@]+@[^\\s@]+$',
    description: 'Only emails with this address in To, Cc or Bcc (the address alone, no display name; case does not matter)',
  })),
  domain: Type.Optional(DomainName()),
  since: Type.Optional(Timestamp('Only emails created at or after this instant (ISO 8601)')),
  until: Type.Optional(Timestamp('Only emails created before this instant (ISO 8601)')),
})

/** The list's query members as the platform API declares them (the public route keeps its own string schema). */
export const emailPageQuery = () => ({
  ...emailFilterQuery(),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: EMAIL_PAGE_MAX, description: `1 to ${EMAIL_PAGE_MAX}, default ${EMAIL_PAGE_DEFAULT}` })),
  after: Type.Optional(Type.String({ maxLength: 200, description: 'An email id: the page of older emails after it' })),
  before: Type.Optional(Type.String({ maxLength: 200, description: 'An email id: the page of newer emails before it' })),
})

const field = (path: string, message: string) => badRequest(`Invalid request: ${path} ${message}`, [{ path, message }])

const visibleTo = (reader: EmailReader) => sql`
  product_id = ${reader.productId}
  ${reader.apiKeyId !== null ? sql`and api_key_id = ${reader.apiKeyId}` : sql``}
  ${reader.domainId !== null ? sql`and domain_id = ${reader.domainId}` : sql``}`

const EARLIEST = new Date('0001-01-01T00:00:00Z').getTime()
const LATEST = new Date('9999-12-31T23:59:59.999Z').getTime()

/**
 * An instant of the filter as PostgreSQL will read it: the date-time format lets through forms Date cannot read
 * (an RFC 9557 suffix such as `Z[UTC]`) and years PostgreSQL refuses (0000), which would reach the database as a 500.
 */
function instant(path: string, value: string): string {
  const ms = Date.parse(value)
  if (!Number.isFinite(ms) || ms < EARLIEST || ms > LATEST) throw field(path, 'must be an ISO 8601 time between the years 1 and 9999')
  return new Date(ms).toISOString()
}

/** The filter as a WHERE fragment (empty when nothing is asked); `since` after `until` is 400 on /query/until. */
function filtered(reader: EmailReader, filter: EmailFilter) {
  const since = filter.since === undefined ? undefined : instant('/query/since', filter.since)
  const until = filter.until === undefined ? undefined : instant('/query/until', filter.until)
  if (since !== undefined && until !== undefined && since > until) throw field('/query/until', 'must not be before since')
  return sql`
    ${filter.status !== undefined ? sql`and last_event = ${filter.status}` : sql``}
    ${filter.recipient !== undefined ? sql`and email_recipients(mailboxes) @> array[${filter.recipient.toLowerCase()}]::text[]` : sql``}
    ${filter.domain !== undefined
      ? sql`and domain_id = (select id from mail_domains where product_id = ${reader.productId} and name = ${filter.domain.toLowerCase()})`
      : sql``}
    ${since !== undefined ? sql`and created_at >= ${since}::timestamptz` : sql``}
    ${until !== undefined ? sql`and created_at < ${until}::timestamptz` : sql``}`
}

const iso = (value: Date) => value.toISOString()
/** What a list row needs: never the bodies (html and text may be 500 000 characters each), headers or tags. */
const SUMMARY_COLUMNS = sql`
  id, from_address, to_addresses, cc_addresses, bcc_addresses, reply_to, subject, created_at, last_event, last_event_at`
const summary = (row: Record<string, any>) => ({
  object: 'email' as const, id: row.id as string, from: row.from_address as string, to: row.to_addresses as string[],
  cc: row.cc_addresses as string[], bcc: row.bcc_addresses as string[], reply_to: row.reply_to as string[],
  subject: row.subject as string, created_at: iso(row.created_at), last_event: row.last_event as string,
  last_event_at: iso(row.last_event_at),
})

/** One email the reader may see, as the list shows it (no content, no events); 404 for anything else. */
export async function readEmailSummary(reader: EmailReader, id: string) {
  if (!isUuid(id)) throw notFound('Email')
  const [row] = await sql`select ${SUMMARY_COLUMNS} from emails where id = ${id} and ${visibleTo(reader)}`
  if (!row) throw notFound('Email')
  return summary(row)
}

/** One email the reader may see, with its content and its events in order; 404 for anything else. */
export async function readEmail(reader: EmailReader, id: string) {
  if (!isUuid(id)) throw notFound('Email')
  const [row] = await sql`select * from emails where id = ${id} and ${visibleTo(reader)}`
  if (!row) throw notFound('Email')
  const events = await sql`select kind, at, detail from email_events where email_id = ${id} order by id`
  return {
    ...summary(row), html: row.html as string | null, text: row.text as string | null,
    headers: row.headers as Record<string, string>, tags: row.tags as { name: string; value: string }[],
    message_id: row.message_id as string,
    events: events.map((e) => ({ type: e.kind as string, at: iso(e.at), ...(e.detail ? { detail: e.detail } : {}) })),
  }
}

/**
 * The emails the reader may see, newest first, Resend's way: `{object: "list", has_more, data}`, narrowed by the
 * filter. A cursor that names no email the reader can see is 400 on its field, as is giving both; a cursor outside the
 * filter still marks a position in the log. A domain the product does not have matches nothing.
 */
export async function listEmailLog(reader: EmailReader, query: EmailPage) {
  if (query.after !== undefined && query.before !== undefined) throw field('/query/before', 'cannot be given with after')
  const narrowed = filtered(reader, query)
  const limit = query.limit ?? EMAIL_PAGE_DEFAULT
  const cursorId = query.after ?? query.before
  if (cursorId !== undefined) {
    const name = query.after !== undefined ? 'after' : 'before'
    const [found] = isUuid(cursorId) ? await sql`select 1 from emails where id = ${cursorId} and ${visibleTo(reader)}` : []
    if (!found) throw field(`/query/${name}`, 'names no email this reader can see')
  }
  const newerPage = query.before !== undefined
  // The cursor's position is read in SQL: a JavaScript Date would drop its microseconds.
  const position = sql`(select created_at, id from emails where id = ${cursorId ?? null})`
  const rows = await sql`
    select ${SUMMARY_COLUMNS} from emails where ${visibleTo(reader)} ${narrowed}
    ${cursorId !== undefined ? (newerPage ? sql`and (created_at, id) > ${position}` : sql`and (created_at, id) < ${position}`) : sql``}
    order by created_at ${newerPage ? sql`asc` : sql`desc`}, id ${newerPage ? sql`asc` : sql`desc`}
    limit ${limit + 1}`
  const page = rows.slice(0, limit)
  if (newerPage) page.reverse()
  return { object: 'list' as const, has_more: rows.length > limit, data: page.map(summary) }
}
