// Body schemas of Mail resources that both the platform API and the public surface accept (one source, so the two
// surfaces validate alike).
import Type from 'typebox'

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
