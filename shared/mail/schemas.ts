// Schemas of Mail resources that both the platform API and the public surface accept or answer (one source, so the two
// surfaces validate alike).
import Type from 'typebox'
import { Strict, Timestamp, Uuid } from '../catalog/schemas'

export const DomainName = () => Type.String({
  minLength: 3, maxLength: 253,
  pattern: '^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\\.)+[A-Za-z][A-Za-z0-9-]{0,61}[A-Za-z0-9]$',
  description: 'A domain name you control, such as mail.example.com (stored in lower case)',
})

/**
 * Longest html or text part, in characters. Mail clients clip far earlier (Gmail at about 100 KB), so a larger part is a
 * mistake rather than an email.
 */
export const MAX_PART_CHARS = 500_000

export const TemplateFields = {
  name: () => Type.String({ minLength: 1, maxLength: 256, description: 'Unique in the product' }),
  subject: () => Type.String({ minLength: 1, maxLength: 998, description: 'May use {{variable}} placeholders' }),
  html: () => Type.String({ minLength: 1, maxLength: MAX_PART_CHARS, description: '{{variable}} placeholders are filled in HTML-escaped' }),
  text: () => Type.Union([Type.String({ maxLength: MAX_PART_CHARS }), Type.Null()], { description: 'Optional plain-text part; placeholders are filled in as they are' }),
}

// ---- the email log, as both surfaces answer it

const Addresses = (what: string) => Type.Array(Type.String(), { description: what })
const emailSummaryFields = () => ({
  object: Type.Literal('email'), id: Uuid(), from: Type.String(), to: Addresses('Recipients'), cc: Addresses('Carbon copy'),
  bcc: Addresses('Blind carbon copy'), reply_to: Addresses('Reply-To addresses'), subject: Type.String(),
  created_at: Timestamp(),
  last_event: Type.String({ description: 'The latest event: queued, sent, delivered, delivery_delayed, bounced, failed or suppressed' }),
  last_event_at: Timestamp(),
})
/** An email as the email log lists it (GET /emails on both surfaces). */
export const EmailSummarySchema = Strict(emailSummaryFields())
/** One email with its content and every event (GET /emails/{id} on both surfaces). */
export const EmailSchema = Strict({
  ...emailSummaryFields(),
  html: Type.Union([Type.String(), Type.Null()]), text: Type.Union([Type.String(), Type.Null()]),
  headers: Type.Record(Type.String(), Type.String()),
  tags: Type.Array(Strict({ name: Type.String(), value: Type.String() })),
  message_id: Type.String(),
  events: Type.Array(Strict({
    type: Type.String(), at: Timestamp(),
    detail: Type.Optional(Type.Unknown({ description: 'What the event carries (an SMTP reply, a bounce reason)' })),
  }), { description: 'Every event of the email, oldest first' }),
})
