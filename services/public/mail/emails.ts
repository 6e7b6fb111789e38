// Emails on the public surface: queue one (the mailer process delivers it), read one with its event timeline, list
// them. Every read is scoped to what the key may see: a sending_access key reads the emails it sent, a key locked to a
// domain reads that domain's emails only, and anything else is 404 (indistinguishable from an unknown id).
import { randomUUID } from 'node:crypto'
import Type, { type Static } from 'typebox'
import { Strict } from '../../../shared/catalog/schemas'
import { validateInput } from '../../../shared/catalog/validate'
import { config } from '../../../shared/config'
import { sql } from '../../../shared/db/client'
import { ApiError, badRequest, type FieldError, unprocessable } from '../../../shared/errors'
import { asList, type Mailbox, mailboxProblem, parseMailbox, type StoredMailboxes, storedMailbox } from '../../../shared/mail/addresses'
import { emailFilterQuery, type EmailReader, listEmailLog, readEmail } from '../../../shared/mail/email-log'
import { headerErrors, HEADER_NAME, MAX_HEADER_VALUE_CHARS, pointerToken } from '../../../shared/mail/headers'
import { MAX_PART_CHARS } from '../../../shared/mail/schemas'
import { sendingDomainNamed } from '../../../shared/mail/sending-domain'
import { findTemplate, renderTemplate } from '../../../shared/mail/templates'
import { type MailKeyIdentity, restrictedKey } from './key-auth'
import { payloadHash } from '../../../shared/http/idempotency-key'
import { bindClaim, type Claim, claimKey, releaseClaim } from './idempotency'
import { checkSendRate } from './send-rate'

export const MAX_RECIPIENTS = 50

const Address = Type.String({ minLength: 3, maxLength: 512, description: '"addr" or "Name <addr>"' })
const Recipients = (what: string) => Type.Union([Address, Type.Array(Address, { minItems: 1, maxItems: MAX_RECIPIENTS })], {
  description: `${what}: one address or an array of at most ${MAX_RECIPIENTS}`,
})
export const SendBody = Strict({
  from: Address,
  to: Recipients('Recipients'),
  cc: Type.Optional(Recipients('Carbon copy')),
  bcc: Type.Optional(Recipients('Blind carbon copy')),
  reply_to: Type.Optional(Recipients('Reply-To addresses')),
  subject: Type.Optional(Type.String({ minLength: 1, maxLength: 998, pattern: '^[^\\r\\n]*$', description: 'One line; required unless a template gives it' })),
  html: Type.Optional(Type.String({ maxLength: MAX_PART_CHARS })),
  template: Type.Optional(Strict({
    id: Type.String({ maxLength: 200, description: 'A template of this product' }),
    variables: Type.Optional(Type.Record(Type.String(), Type.Union([Type.String({ maxLength: 100_000 }), Type.Number(), Type.Boolean()]))),
  }, 'Instead of html: a template, filled in with the variables (HTML-escaped in its html)')),
  text: Type.Optional(Type.String({ maxLength: MAX_PART_CHARS })),
  // Documents the shape; the rules are checked by hand for every key (headerErrors): typebox's record pattern alone
  // would leave a key that does not match it (`From `, `X-A:b`) unchecked, name and value.
  headers: Type.Optional(Type.Record(
    Type.String({ pattern: HEADER_NAME.source }),
    Type.String({ maxLength: MAX_HEADER_VALUE_CHARS, pattern: '^[^\\r\\n]*$' }),
    {
      additionalProperties: false, maxProperties: config.mail.maxHeaders,
      description: `Extra headers, at most ${config.mail.maxHeaders}: string names (printable ASCII, no space or colon) to one-line string values; addressing, MIME, signature and trace headers are the platform's`,
    },
  )),
  tags: Type.Optional(Type.Array(Strict({
    name: Type.String({ minLength: 1, maxLength: 256, pattern: '^[A-Za-z0-9_-]+$' }),
    value: Type.String({ minLength: 1, maxLength: 256, pattern: '^[A-Za-z0-9_-]+$' }),
  }), { maxItems: 50 })),
})
export type SendBody = Static<typeof SendBody>

const field = (path: string, message: string) => badRequest(`Invalid request: ${path} ${message}`, [{ path, message }])

/**
 * The `from` domain, resolved before anything else is looked at: a key locked to another domain is refused (401, nothing
 * queued) whatever the rest of the body says; an unregistered or unverified domain is 403 `domain_not_verified`.
 */
async function fromDomain(key: MailKeyIdentity, body: unknown): Promise<{ id: string; name: string; from: Mailbox }> {
  const from = (body as { from?: unknown } | null)?.from
  if (typeof from !== 'string') throw field('/body/from', 'is required: "addr" or "Name <addr>"')
  const mailbox = parseMailbox(from)
  if (!mailbox) throw field('/body/from', mailboxProblem(from))
  const domain = await sendingDomainNamed(key.productId, mailbox.domain)
  if (key.domainId !== null && domain?.id !== key.domainId) {
    throw restrictedKey(`This API key is restricted to one domain and cannot send from ${mailbox.domain}`)
  }
  if (domain?.status !== 'verified') {
    throw new ApiError('domain_not_verified', domain
      ? `The domain ${mailbox.domain} is not verified (status ${domain.status}): publish its DNS records and verify it`
      : `The domain ${mailbox.domain} is not registered for this product: register and verify it first`,
    { fields: [{ path: '/body/from', message: `uses domain ${mailbox.domain}, which cannot send` }] })
  }
  return { id: domain.id, name: domain.name, from: mailbox }
}

/** What is sent: the body's subject, html and text, or a template filled in (the body's subject and text win). */
async function contentOf(productId: string, body: SendBody): Promise<{ subject: string; html: string | null; text: string | null }> {
  if (body.template) {
    if (body.html !== undefined) throw field('/body/html', 'cannot be given with template (the template is the html)')
    for (const name of Object.keys(body.template.variables ?? {})) {
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw field(`/body/template/variables/${pointerToken(name)}`, 'is not a variable name: a letter or _, then letters, digits or _')
    }
    const template = await findTemplate(productId, body.template.id)
    if (!template) throw unprocessable(`Template ${body.template.id} is not a template of this product`, [{ path: '/body/template/id', message: 'names no template of this product' }])
    const rendered = renderTemplate(template, body.template.variables)
    const filled = { subject: body.subject ?? rendered.subject, html: rendered.html, text: body.text ?? rendered.text }
    checkFilled(filled)
    return filled
  }
  if (body.subject === undefined) throw field('/body/subject', 'is required (unless a template gives it)')
  if (body.html === undefined && body.text === undefined) throw field('/body', 'needs html or text (or both), or a template')
  return { subject: body.subject, html: body.html ?? null, text: body.text ?? null }
}

/** A template filled in must still make a valid message: the variables are what break it, so they are named. */
function checkFilled(filled: { subject: string; html: string | null; text: string | null }): void {
  const refuse = (message: string) => unprocessable(`The filled-in template ${message}`, [{ path: '/body/template/variables', message }])
  if (filled.subject.length > 998) throw refuse('makes a subject longer than 998 characters')
  for (const part of ['html', 'text'] as const) {
    if ((filled[part]?.length ?? 0) > MAX_PART_CHARS) throw refuse(`makes the ${part} part longer than ${MAX_PART_CHARS} characters`)
  }
}

/** Every address of every list parses (400 naming the first that does not); answers them parsed, once, for the mailer. */
function parseRecipients(body: SendBody, from: Mailbox): StoredMailboxes {
  const lists = {} as Omit<StoredMailboxes, 'from'>
  for (const name of ['to', 'cc', 'bcc', 'reply_to'] as const) {
    lists[name] = asList(body[name]).map((value, i) => {
      const mailbox = parseMailbox(value)
      if (!mailbox) throw field(`/body/${name}${Array.isArray(body[name]) ? `/${i}` : ''}`, mailboxProblem(value))
      return storedMailbox(mailbox)
    })
  }
  return { from: storedMailbox(from), ...lists }
}

/**
 * Validates the body whole, with the header rules checked by hand for every key: their errors replace whatever the
 * schema said about `headers` (they are a superset), and join the body's other failing fields in one 400.
 */
function validateBody(raw: unknown): SendBody {
  const headers = raw !== null && typeof raw === 'object' ? (raw as { headers?: unknown }).headers : undefined
  const headerFields = headerErrors(headers, config.mail.maxHeaders)
  let body: SendBody
  try {
    body = validateInput({ body: SendBody }, { body: raw }).body as SendBody
  } catch (error) {
    const fields = (error instanceof ApiError && (error.extra.fields as FieldError[] | undefined)) || undefined
    if (!fields) throw error
    const merged = headerFields.length
      ? [...fields.filter((f) => f.path !== '/body/headers' && !f.path.startsWith('/body/headers/')), ...headerFields]
      : fields
    throw invalid(merged)
  }
  if (headerFields.length) throw invalid(headerFields)
  return body
}

/**
 * One 400 naming the first MAIL_MAX_LISTED_ERRORS failing fields, and saying how many more there were: a body of
 * thousands of bad keys gets a reply of kilobytes, not megabytes.
 */
function invalid(fields: FieldError[]): ApiError {
  const listed = fields.slice(0, config.mail.maxListedErrors)
  const more = fields.length - listed.length
  // The message shortens long paths (a key may be most of the body); `fields` keeps each pointer whole.
  const names = listed.map((f) => `${f.path.length > 100 ? `${f.path.slice(0, 100)}…` : f.path} ${f.message}`).join('; ')
  return badRequest(`Invalid request: ${names}${more > 0 ? `; and ${more} more not listed` : ''}`, listed)
}

/**
 * Queues an email: the row and its `queued` event (and, with an Idempotency-Key, the key's binding to it) in one
 * transaction. Answers its id. A repeat of an idempotent request answers the first one's id and queues nothing.
 */
export async function queueEmail(key: MailKeyIdentity, raw: unknown, idempotencyKey: string | null = null): Promise<{ id: string }> {
  const domain = await fromDomain(key, raw)
  const body = validateBody(raw)
  const mailboxes = parseRecipients(body, domain.from)
  const content = await contentOf(key.productId, body)
  let claim: Claim | null = null
  if (idempotencyKey !== null) {
    const claimed = await claimKey({ productId: key.productId, apiKeyId: key.keyId }, idempotencyKey, payloadHash(raw))
    if ('emailId' in claimed) return { id: claimed.emailId }
    claim = claimed
  }
  const id = randomUUID()
  try {
    // After the idempotency check: a retried request whose email was already queued gets its id, never a 429.
    await checkSendRate(key.productId)
    await sql.begin(async (tx) => {
      await tx`
        insert into emails (id, product_id, domain_id, api_key_id, from_address, to_addresses, cc_addresses, bcc_addresses,
                            reply_to, subject, html, text, headers, tags, message_id, mailboxes)
        values (${id}, ${key.productId}, ${domain.id}, ${key.keyId}, ${body.from}, ${asList(body.to)}, ${asList(body.cc)},
                ${asList(body.bcc)}, ${asList(body.reply_to)}, ${content.subject}, ${content.html}, ${content.text},
                ${(body.headers ?? {}) as never}::jsonb, ${(body.tags ?? []) as never}::jsonb, ${`<${id}@${domain.name}>`},
                ${mailboxes as never}::jsonb)`
      await tx`insert into email_events (email_id, kind, at) values (${id}, 'queued', now())` // the email's own last_event_at
      if (claim) await bindClaim(tx, claim, id)
    })
  } catch (error) {
    if (claim) await releaseClaim(claim).catch(() => {}) // else it frees itself (claimAbandonedAfterMs)
    throw error
  }
  return { id }
}

/** What a key may read: its own emails with sending_access, its domain's when locked. */
const readerOf = (key: MailKeyIdentity): EmailReader =>
  ({ productId: key.productId, apiKeyId: key.scope === 'sending_access' ? key.keyId : null, domainId: key.domainId })

/** One email the key may read, with its content and its events in order; 404 for anything else. */
export const getEmail = (key: MailKeyIdentity, id: string) => readEmail(readerOf(key), id)

export const ListQuery = Strict({
  ...emailFilterQuery(),
  limit: Type.Optional(Type.String({ pattern: '^(?:[1-9]|[1-9][0-9]|100)$', description: '1 to 100, default 20' })),
  after: Type.Optional(Type.String({ maxLength: 200, description: 'An email id: the page of older emails after it' })),
  before: Type.Optional(Type.String({ maxLength: 200, description: 'An email id: the page of newer emails before it' })),
})

/**
 * The emails the key may read, newest first, Resend's way: `{object: "list", has_more, data}`, `limit` 1..100
 * (default 20), `after` (older than that id) or `before` (newer than it), and the filters of `emailFilterQuery`
 * (status, recipient, domain, since, until). A key locked to a domain cannot list (403).
 */
export async function listEmails(key: MailKeyIdentity, rawQuery: Record<string, string>) {
  if (key.domainId !== null) throw restrictedKey('This API key is restricted to one domain and cannot list emails', 403)
  const query = validateInput({ query: ListQuery }, { query: rawQuery }).query as Static<typeof ListQuery>
  return listEmailLog(readerOf(key), { ...query, limit: query.limit === undefined ? undefined : Number(query.limit) })
}
