// Header injection as a hostile tenant tries it, against real `public` workers and a real `mailer` delivering to an SMTP
// server started here: every malformed, reserved or non-string header is refused 400 naming it (nothing queued); valid
// custom headers arrive, read back with mailparser, beside exactly one From (the real one) and the platform's own
// headers, and nothing else; and a row stored with a malicious headers object (as an email queued before these rules
// would be) is failed by the mailer, never sent with the injected header.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { simpleParser } from 'mailparser'
import { startSmtpSink, type CaughtMessage, type Sink } from '../../scripts/smtp-sink'
import { sql } from '../../shared/db/client'
import { newProduct, startProcess, type Worker } from '../helpers'
import { manage, type Pair, pub, startPublicPair } from '../realtime/public-helpers'
import { emailReader } from '../mail/email-reader'

const caught: CaughtMessage[] = []
let sink: Sink
let pair: Pair
let mailer: Worker
let owner: Awaited<ReturnType<typeof newProduct>>
let domain: { id: string; name: string }
let key: { id: string; key: string }

beforeAll(async () => {
  sink = await startSmtpSink({ port: 0, onMessage: (message) => caught.push(message) })
  pair = await startPublicPair({ MAIL_SEND_RATE_PER_SECOND: '1000' })
  owner = await newProduct('Mail headers')
  domain = await manage(owner, 'POST', '/mail/domains', { name: `h${crypto.randomUUID().slice(0, 8)}.example.com` })
  key = await manage(owner, 'POST', '/mail/api-keys', { name: 'sender', scope: 'full_access' })
  mailer = await startProcess('mailer', {
    SMTP_URL: `smtp://127.0.0.1:${sink.port}`, MAILER_POLL_MS: '50', MAIL_LEASE_MS: '3000',
    MAILER_SMTP_TIMEOUT_MS: '5000', MAIL_RETRY_BASE_MS: '200', MAIL_MAX_ATTEMPTS: '2',
  })
}, 30_000)
afterAll(async () => {
  await mailer?.stop()
  await pair?.stop()
  await sink?.close()
})

const from = () => `Acme <hello@${domain.name}>`
const send = (headers: unknown) =>
  pub(pair.a, 'POST', `/${owner.productId}/mail/emails`, { key: key.key, body: { from: from(), to: 'ann@example.org', subject: 'Hi', text: 'Hello', headers } })
const emailCount = async () => Number((await sql`select count(*) from emails where product_id = ${owner.productId}`)[0]!.count)
const { until } = emailReader(() => pair.b, () => owner.productId, () => key.key, 15_000)
const caughtFor = (messageId: string) => caught.filter((m) => m.raw.toString().includes(messageId))
/** The header block of a raw message, unfolded, as [lower-case name, value] in order. */
const headerBlock = (raw: Buffer) => {
  const text = raw.toString('latin1')
  const head = text.slice(0, text.indexOf('\r\n\r\n')).replace(/\r\n[ \t]+/g, ' ')
  return head.split('\r\n').map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()] as const)
}

const FORGED = 'PayPal <service@paypal.com>'
const PREPARED = { prepared: true, value: `x\r\nFrom: ${FORGED}` }

describe('refused: 400 naming the header, nothing queued', () => {
  const cases: [label: string, headers: unknown, path: string][] = [
    // Names that are not RFC 5322 field names: typebox's record pattern never looked at these keys.
    ['a trailing space, with a prepared-value object (the reported attack)', { 'From ': PREPARED }, '/body/headers/From '],
    ['a trailing space, with a string value', { 'From ': FORGED }, '/body/headers/From '],
    ['a leading space', { ' From': FORGED }, '/body/headers/ From'],
    ['a space inside', { 'X Campaign': 'a' }, '/body/headers/X Campaign'],
    ['a colon at the end', { 'From:': FORGED }, '/body/headers/From:'],
    ['a colon inside', { 'X-A:b': 'c' }, '/body/headers/X-A:b'],
    ['a tab', { 'X-A\tb': 'c' }, '/body/headers/X-A\tb'],
    ['a CR LF in the name', { 'X-A\r\nFrom': FORGED }, '/body/headers/X-A\r\nFrom'],
    ['an empty name', { '': 'x' }, '/body/headers/'],
    ['a Cyrillic o in From', { 'Frоm': FORGED }, '/body/headers/Frоm'],
    ['a non-ASCII name', { 'X-Ünïcode': 'x' }, '/body/headers/X-Ünïcode'],
    ['a name of 77 characters', { [`X-${'a'.repeat(75)}`]: 'x' }, `/body/headers/X-${'a'.repeat(75)}`],
    ['a slash and a space (pointer escaped)', { 'a/b c': 'x' }, '/body/headers/a~1b c'],
    ['a tilde and a colon (pointer escaped)', { 'x~y:': 'x' }, '/body/headers/x~0y:'],
    // Values that are not strings, under names that would otherwise be fine.
    ['a prepared-value object', { 'X-Campaign': PREPARED }, '/body/headers/X-Campaign'],
    ['an object', { 'X-Campaign': { value: 'a' } }, '/body/headers/X-Campaign'],
    ['a number', { 'X-Campaign': 42 }, '/body/headers/X-Campaign'],
    ['an array', { 'X-Campaign': ['a', 'b'] }, '/body/headers/X-Campaign'],
    ['null', { 'X-Campaign': null }, '/body/headers/X-Campaign'],
    ['a boolean', { 'X-Campaign': true }, '/body/headers/X-Campaign'],
    // Values that are more than one line, or too long.
    ['CR LF in a value', { 'X-Evil': `a\r\nFrom: ${FORGED}` }, '/body/headers/X-Evil'],
    ['a bare LF in a value', { 'X-Evil': 'a\nBcc: victim@example.org' }, '/body/headers/X-Evil'],
    ['a bare CR in a value', { 'X-Evil': 'a\rBcc: victim@example.org' }, '/body/headers/X-Evil'],
    ['another control character in a value', { 'X-Evil': 'a\u000bb' }, '/body/headers/X-Evil'],
    ['a value of 999 characters', { 'X-Long': 'v'.repeat(999) }, '/body/headers/X-Long'],
    // The platform's own headers, in any case.
    ...['fRoM', 'FROM', 'to', 'Cc', 'bCC', 'reply-to', 'Sender', 'subject', 'Date', 'message-id', 'Message-Id', 'MIME-Version',
      'content-TYPE', 'Content-Transfer-Encoding', 'content-disposition', 'dkim-signature', 'DKIM-Signature', 'DomainKey-Signature',
      'Received', 'received-spf', 'Return-Path', 'Authentication-Results', 'ARC-Seal', 'arc-message-signature', 'Resent-From',
      'Delivered-To', 'X-Original-To', 'X-Mailer', 'BIMI-Indicator', 'Errors-To', 'X-Received', 'x-envelope-from',
      'X-Envelope-To', 'X-Authenticated-Sender', 'X-Authenticated-User', 'X-Spam-Status', 'x-spam-flag', 'X-Spam-Score',
      'X-Original-From', 'X-Original-Sender', 'TLS-Required', 'X-Priority', 'Importance', 'X-MSMail-Priority']
      .map((name): [string, unknown, string] => [`reserved ${name}`, { [name]: 'x' }, `/body/headers/${name}`]),
    ['the same name twice in other cases', { 'X-Tag': 'a', 'x-TAG': 'b' }, '/body/headers/x-TAG'],
    ['51 headers (one over MAIL_MAX_HEADERS)', Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`X-H${i}`, 'v'])), '/body/headers'],
    ['a string instead of an object', 'From: x', '/body/headers'],
    ['an array instead of an object', [['From', FORGED]], '/body/headers'],
  ]
  test.each(cases)('%s', async (_label, headers, path) => {
    const before = await emailCount()
    const result = await send(headers)
    expect(result.status).toBe(400)
    expect(result.body.error).toBe('validation_failed')
    expect(result.body.fields.map((f: { path: string }) => f.path)).toContain(path)
    // Every error names a header (or the headers object), never something vaguer.
    for (const f of result.body.fields) expect(f.path.startsWith('/body/headers')).toBe(true)
    expect(await emailCount()).toBe(before)
  })

  test('header errors join the body\'s other failing fields in one 400', async () => {
    const result = await pub(pair.a, 'POST', `/${owner.productId}/mail/emails`, {
      key: key.key, body: { from: from(), to: 'ann@example.org', text: 'x', subject: 'a\r\nb', headers: { 'From ': PREPARED } },
    })
    expect(result.status).toBe(400)
    expect(result.body.fields.map((f: { path: string }) => f.path).sort()).toEqual(['/body/headers/From ', '/body/subject'])
  })

  test('at the bounds: 50 headers, a 76-character name and a 998-character value are accepted', async () => {
    const fifty = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`X-H${i}`, 'v']))
    expect((await send(fifty)).status).toBe(200)
    expect((await send({ [`X-${'a'.repeat(74)}`]: 'v'.repeat(998) })).status).toBe(200)
  })
})

describe('a body of many bad keys gets a small 400 (no amplification)', () => {
  const size = (result: { body: unknown }) => JSON.stringify(result.body).length

  test('50 000 bad header keys: 400 with the count error alone, named at /body/headers, in a reply of under 2 KB', async () => {
    // Each key breaks the name rule and each value the string rule: checked one by one, this was 100 000 errors.
    const headers = Object.fromEntries(Array.from({ length: 50_000 }, (_, i) => [`a b${i}`, i]))
    const before = await emailCount()
    const result = await send(headers)
    expect(result.status).toBe(400)
    expect(result.body.fields).toEqual([{ path: '/body/headers', message: 'must have at most 50 headers' }])
    expect(size(result)).toBeLessThan(2048)
    expect(await emailCount()).toBe(before)
  }, 30_000)

  test('50 bad headers (at the count limit): the first 20 errors are listed, and the message says how many more', async () => {
    const headers = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`X-H${i}:`, 'v']))
    const result = await send(headers)
    expect(result.status).toBe(400)
    expect(result.body.fields).toHaveLength(20)
    expect(result.body.fields[0]).toEqual({ path: '/body/headers/X-H0:', message: expect.stringContaining('is not a header name') })
    expect(result.body.message).toContain('and 30 more not listed')
  })

  test('a template variable name holding / or ~ is named by an escaped JSON pointer', async () => {
    for (const [name, path] of [['a/b', '/body/template/variables/a~1b'], ['x~y', '/body/template/variables/x~0y'], ['~/', '/body/template/variables/~0~1']] as const) {
      const result = await pub(pair.a, 'POST', `/${owner.productId}/mail/emails`, {
        key: key.key, body: { from: from(), to: 'ann@example.org', subject: 'Hi', template: { id: 'none', variables: { [name]: 'v' } } },
      })
      expect([result.status, result.body.fields], name).toEqual([400, [{ path, message: expect.stringContaining('is not a variable name') }]])
    }
  })

  test('thousands of failing fields elsewhere in the body (template variables holding NUL) are capped the same way', async () => {
    const variables = Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`v${i}`, '\u0000']))
    const result = await pub(pair.a, 'POST', `/${owner.productId}/mail/emails`, {
      key: key.key, body: { from: from(), to: 'ann@example.org', subject: 'Hi', template: { id: 'none', variables } },
    })
    expect(result.status).toBe(400)
    expect(result.body.fields).toHaveLength(20)
    expect(result.body.fields[0].path).toBe('/body/template/variables/v0')
    expect(result.body.message).toContain('and 19980 more not listed')
    expect(size(result)).toBeLessThan(8192)
  }, 30_000)
})

test('valid custom headers arrive through the real mailer: exactly one From (the real one), the platform\'s headers, the custom ones, nothing else', async () => {
  const custom = {
    'X-Campaign': 'spring sale',
    'List-Unsubscribe': '<mailto:unsubscribe@example.org>, <https://example.org/u?id=1>',
    'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
    'In-Reply-To': '<thread-1@example.org>',
    References: '<thread-0@example.org> <thread-1@example.org>',
    'X-Tabbed': 'a\tb',
  }
  const result = await send(custom)
  expect(result.status).toBe(200)
  const email = await until(result.body.id, ['delivered', 'failed'])
  expect(email.events.map((e: { type: string }) => e.type)).toEqual(['queued', 'sent', 'delivered'])
  const [message] = caughtFor(email.message_id)
  const block = headerBlock(message!.raw)
  expect(block.filter(([name]) => name === 'from').map(([, value]) => value)).toEqual([`Acme <hello@${domain.name}>`])
  expect(block.map(([name]) => name).sort()).toEqual([
    'content-transfer-encoding', 'content-type', 'date', 'dkim-signature', 'from', 'in-reply-to', 'list-unsubscribe',
    'list-unsubscribe-post', 'message-id', 'mime-version', 'references', 'subject', 'to', 'x-campaign', 'x-tabbed',
  ])
  const parsed = await simpleParser(message!.raw)
  expect(parsed.from?.value).toEqual([{ address: `hello@${domain.name}`, name: 'Acme' }])
  expect(parsed.messageId).toBe(email.message_id)
  expect(parsed.inReplyTo).toBe('<thread-1@example.org>')
  expect(parsed.references).toEqual(['<thread-0@example.org>', '<thread-1@example.org>'])
  expect(parsed.headers.get('x-campaign')).toBe('spring sale')
  expect(parsed.headers.get('x-tabbed')).toBe('a\tb')
  // mailparser folds List-* into its own `list` summary: these are read from the header block as sent.
  const value = (name: string) => block.filter(([n]) => n === name).map(([, v]) => v)
  expect(value('list-unsubscribe')).toEqual([custom['List-Unsubscribe']])
  expect(value('list-unsubscribe-post')).toEqual([custom['List-Unsubscribe-Post']])
  expect(message!.raw.toString()).not.toContain('paypal')
})

test('a row stored with a malicious headers object (queued before the rules) is failed by the mailer, never sent; an old row with good headers still delivers', async () => {
  const insert = async (headers: unknown) => {
    const id = crypto.randomUUID()
    const messageId = `<${id}@${domain.name}>`
    // As an email queued before mailboxes were stored and before the header rules: text mailboxes only, headers as given.
    // One transaction, as the public route queues: the polling mailer must not claim the row before its queued event.
    await sql.begin(async (tx) => {
      await tx`
        insert into emails (id, product_id, domain_id, api_key_id, from_address, to_addresses, subject, text, headers, message_id)
        values (${id}, ${owner.productId}, ${domain.id}, ${key.id}, ${from()}, ${['Ann <ann@example.org>']}, 'Old', 'Old body',
                ${headers as never}::jsonb, ${messageId})`
      await tx`insert into email_events (email_id, kind, at) values (${id}, 'queued', now())`
    })
    return id
  }
  const malicious = [
    await insert({ 'From ': PREPARED }),
    await insert({ 'X-Campaign': PREPARED }),
    await insert({ 'X-Evil': `a\r\nFrom: ${FORGED}` }),
    await insert({ 'fRoM': FORGED }),
    await insert({ 'X-Count': 7 }),
    await insert({ 'X-Authenticated-Sender': 'ceo@paypal.com' }),
    await insert({ 'X-Spam-Status': 'No, score=-100' }),
    await insert({ 'X-Priority': 7 }), // a style-only name, but not a string: failed like any other
  ]
  const good = await insert({ 'X-Campaign': 'old' })
  for (const id of malicious) {
    const email = await until(id, ['failed', 'delivered', 'sent'])
    expect(email.events.map((e: { type: string }) => e.type)).toEqual(['queued', 'failed'])
    expect(email.events[1].detail).toContain('header')
    expect(caughtFor(email.message_id)).toEqual([])
  }
  const delivered = await until(good, ['delivered', 'failed'])
  expect(delivered.last_event).toBe('delivered')
  const parsed = await simpleParser(caughtFor(delivered.message_id)[0]!.raw)
  expect(parsed.from?.value).toEqual([{ address: `hello@${domain.name}`, name: 'Acme' }])
  expect((parsed.to as { value: unknown[] }).value).toEqual([{ address: 'ann@example.org', name: 'Ann' }])
  expect(parsed.headers.get('x-campaign')).toBe('old')
  for (const message of caught) expect(message.raw.toString().toLowerCase()).not.toContain('paypal')
}, 30_000)

test('an old row with headers reserved for style only (X-Priority, Importance, X-Mailer), a name twice, or more than MAIL_MAX_HEADERS is sent without them, and the `sent` event says which were dropped', async () => {
  const id = crypto.randomUUID()
  // jsonb keeps keys ordered by length, then bytes: X-H00..X-H49 (5 characters) come first and fill the 50.
  const headers: Record<string, string> = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`X-H${String(i).padStart(2, '0')}`, `v${i}`]))
  Object.assign(headers, { 'X-Keep': 'over the count', 'X-Priority': '1', Importance: 'high', 'X-Mailer': 'Old Mailer 1.0', 'x-h00': 'twice' })
  await sql`
    insert into emails (id, product_id, domain_id, api_key_id, from_address, to_addresses, subject, text, headers, message_id)
    values (${id}, ${owner.productId}, ${domain.id}, ${key.id}, ${from()}, ${['ann@example.org']}, 'Old', 'Old body',
            ${headers as never}::jsonb, ${`<${id}@${domain.name}>`})`
  await sql`insert into email_events (email_id, kind, at) values (${id}, 'queued', now())`
  const email = await until(id, ['delivered', 'failed'])
  expect(email.events.map((e: { type: string }) => e.type)).toEqual(['queued', 'sent', 'delivered'])
  const note = email.events[1].detail as string
  expect(note).toStartWith('custom headers dropped: ')
  for (const part of ['x-h00 (given twice)', 'X-Keep (over MAIL_MAX_HEADERS=50)', 'X-Mailer (reserved)', 'Importance (reserved)', 'X-Priority (reserved)']) {
    expect(note).toContain(part)
  }
  const block = headerBlock(caughtFor(email.message_id)[0]!.raw)
  const names = block.map(([name]) => name)
  for (let i = 0; i < 50; i++) expect(block).toContainEqual([`x-h${String(i).padStart(2, '0')}`, `v${i}`])
  expect(names.filter((name) => name === 'x-h00')).toHaveLength(1)
  for (const name of ['x-keep', 'x-priority', 'importance', 'x-mailer']) expect(names).not.toContain(name)
}, 30_000)
