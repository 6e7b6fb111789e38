// The message one delivery attempt hands its transport, written to MIME by nodemailer as for SMTP (no server) and parsed
// back: the stored mailboxes and headers, nothing injected, Bcc only in the envelope, signed with the domain's key.
import { beforeAll, expect, test } from 'bun:test'
import { generateKeyPair } from 'node:crypto'
import { promisify } from 'node:util'
import { simpleParser } from 'mailparser'
import { createTransport, type Transport } from 'nodemailer'
import { headerLines } from '../../shared/mail/headers'
import { assembleMessage, type DomainKey, mailboxesOf } from '../../services/mailer/message'
import type { ClaimedEmail } from '../../services/mailer/queue'
import type { Accepted, MailTransport } from '../../services/mailer/transport'

let key: DomainKey

beforeAll(async () => {
  // 1024 bits: the signature's presence and parameters are what is checked here, quickly (test/mail verifies a real one).
  const { privateKey } = await promisify(generateKeyPair)('rsa', {
    modulusLength: 1024, publicKeyEncoding: { type: 'spki', format: 'pem' }, privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  })
  key = { name: 'send.example.com', selector: 'platform', privateKey }
})

/**
 * A MailTransport kept in memory: each message as the raw MIME and envelope an SMTP server would receive. A nodemailer
 * transport of its own, as its SMTP one reads the message (signed, Bcc left out), where its stream transport keeps Bcc.
 */
function memoryTransport() {
  const sent: { raw: Buffer; envelope: { from: string; to: string[] } }[] = []
  const memory: Transport<Accepted> = {
    name: 'memory', version: '1',
    send(mail, done) {
      const chunks: Buffer[] = []
      const stream = mail.message.createReadStream()
      stream.on('data', (chunk: Buffer) => chunks.push(chunk))
      stream.on('error', done)
      stream.on('end', () => {
        sent.push({ raw: Buffer.concat(chunks), envelope: mail.message.getEnvelope() as { from: string; to: string[] } })
        done(null, {})
      })
    },
  }
  const capture = createTransport(memory)
  const transport: MailTransport = { send: (message) => capture.sendMail(message), close: () => capture.close() }
  return { transport, sent }
}

const email = (over: Partial<ClaimedEmail> = {}): ClaimedEmail => ({
  id: crypto.randomUUID(), productId: crypto.randomUUID(), domainId: crypto.randomUUID(),
  fromAddress: 'Acme <hello@send.example.com>', to: ['Ann <ann@example.org>'], cc: ['cid@example.org'], bcc: ['hidden@example.org'],
  replyTo: ['replies@example.org'], subject: 'Hi', html: '<p>Hello <b>there</b></p>', text: 'Hello there',
  headers: { 'X-Campaign': 'spring', 'List-Unsubscribe': '<https://example.com/u>' },
  mailboxes: {
    from: { name: 'Acme', address: 'hello@send.example.com' }, to: [{ name: 'Ann', address: 'ann@example.org' }],
    cc: [{ name: '', address: 'cid@example.org' }], bcc: [{ name: '', address: 'hidden@example.org' }], reply_to: [{ name: '', address: 'replies@example.org' }],
  },
  messageId: '<m1@send.example.com>', createdAt: new Date('2026-06-15T12:00:00Z'), attempts: 1, leaseToken: 'token',
  ...over,
})

/** Assembles the email as deliver() does, sends it over the memory transport, and answers the raw MIME and its parse. */
async function delivered(stored: ClaimedEmail, recipients = ['ann@example.org', 'cid@example.org', 'hidden@example.org']) {
  const { transport, sent } = memoryTransport()
  const { lines } = headerLines(stored.headers, 50)
  await transport.send(assembleMessage(stored, mailboxesOf(stored), lines, key, recipients))
  const [{ raw, envelope }] = sent as [(typeof sent)[number]]
  const head = raw.toString().split(/\r?\n\r?\n/)[0]!
  /** The header fields named `name`, unfolded lines counted once. */
  const fields = (name: string) => head.split(/\r?\n/).filter((line) => line.toLowerCase().startsWith(`${name.toLowerCase()}:`))
  return { raw: raw.toString(), envelope, fields, parsed: await simpleParser(raw) }
}

test('exactly one From, To, Cc and Reply-To from the stored mailboxes; Bcc only in the envelope; Message-ID and Date as stored', async () => {
  const { raw, envelope, fields, parsed } = await delivered(email())
  for (const name of ['From', 'To', 'Cc', 'Reply-To', 'Subject', 'Message-ID', 'Date']) expect(fields(name)).toHaveLength(1)
  expect(parsed.from?.value).toEqual([{ name: 'Acme', address: 'hello@send.example.com' }])
  expect((parsed.to as { text: string }).text).toBe('"Ann" <ann@example.org>')
  expect((parsed.cc as { text: string }).text).toBe('cid@example.org')
  expect(parsed.replyTo?.text).toBe('replies@example.org')
  expect(fields('Bcc')).toHaveLength(0)
  expect(raw).not.toContain('hidden@example.org')
  expect(envelope).toEqual({ from: 'hello@send.example.com', to: ['ann@example.org', 'cid@example.org', 'hidden@example.org'] })
  expect(parsed.messageId).toBe('<m1@send.example.com>')
  expect(parsed.date?.toISOString()).toBe('2026-06-15T12:00:00.000Z')
  expect(parsed.subject).toBe('Hi')
})

test('the envelope holds only the recipients given (suppressed ones left out), while the headers still show every mailbox', async () => {
  const { envelope, parsed } = await delivered(email(), ['ann@example.org'])
  expect(envelope.to).toEqual(['ann@example.org'])
  expect((parsed.cc as { text: string }).text).toBe('cid@example.org')
})

test('the stored headers are written as given, and the html and text parts both travel', async () => {
  const { fields, parsed } = await delivered(email())
  expect(parsed.headers.get('x-campaign')).toBe('spring')
  expect(fields('List-Unsubscribe')).toEqual(['List-Unsubscribe: <https://example.com/u>'])
  expect(parsed.html).toBe('<p>Hello <b>there</b></p>')
  expect(parsed.text?.trim()).toBe('Hello there')
  expect(parsed.headers.get('content-type')).toMatchObject({ value: 'multipart/alternative' })
})

test('a display name or subject carrying CR LF and a header injects nothing: still one From, no Bcc header', async () => {
  const injected = email({
    subject: 'Hi\r\nBcc: thief@evil.example',
    mailboxes: { ...email().mailboxes!, from: { name: 'Acme\r\nBcc: thief@evil.example', address: 'hello@send.example.com' }, to: [{ name: 'Ann\nX-Injected: 1', address: 'ann@example.org' }] },
  })
  const { raw, fields, envelope } = await delivered(injected)
  expect(fields('From')).toHaveLength(1)
  expect(fields('Bcc')).toHaveLength(0)
  expect(fields('X-Injected')).toHaveLength(0)
  expect(raw).not.toMatch(/^Bcc:/m)
  expect(envelope.to).not.toContain('thief@evil.example')
})

test('a stored header that would forge or inject is refused before any message is assembled', () => {
  expect(() => headerLines({ 'X-Note': 'a\r\nBcc: thief@evil.example' }, 50)).toThrow('holds CR, LF or another control character')
  expect(() => headerLines({ From: 'ceo@bank.example' }, 50)).toThrow('is set by the platform')
  expect(() => headerLines({ 'DKIM-Signature': 'v=1' }, 50)).toThrow('is set by the platform')
})

test("the message is signed with the domain's key: one DKIM-Signature for its domain and selector, covering From", async () => {
  const { raw, fields } = await delivered(email())
  expect(fields('DKIM-Signature')).toHaveLength(1)
  const signature = raw.replace(/\r?\n[ \t]+/g, ' ').match(/^DKIM-Signature: (.*)$/m)![1]! // unfolded
  expect(signature).toStartWith('v=1; a=rsa-sha256;')
  expect(signature).toContain('d=send.example.com;')
  expect(signature).toContain('s=platform;')
  expect(signature).toMatch(/h=[^;]*\bfrom\b/)
})

test('an email queued before mailboxes were stored has its mailboxes parsed from the stored text', async () => {
  const { parsed, envelope } = await delivered(email({ mailboxes: null, fromAddress: '"Acme, Inc." <hello@send.example.com>' }))
  expect(parsed.from?.value).toEqual([{ name: 'Acme, Inc.', address: 'hello@send.example.com' }])
  expect((parsed.to as { value: unknown[] }).value).toEqual([{ name: 'Ann', address: 'ann@example.org' }])
  expect(envelope.from).toBe('hello@send.example.com')
})
