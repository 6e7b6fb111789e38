// Address parsing as a hostile sender drives it: every pathological 512-character mailbox of the benchmark
// (scripts/bench/addresses.ts, which times them) gets the right answer from the one-pass scanner, the scanner accepts
// exactly what the regular-expression parser it replaced accepted (but display names holding control or bidirectional
// formatting characters, which it now refuses), and a send with such a `from` is refused 400 naming the field. Timing is
// the benchmark's business, not this file's.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { legacyParseMailbox, ORDINARY, PATHOLOGICAL } from '../../scripts/bench/addresses'
import { MAX_MAILBOX_CHARS, parseMailbox } from '../../shared/mail/addresses'
import { sql } from '../../shared/db/client'
import { newProduct } from '../helpers'
import { manage, type Pair, pub, startPublicPair } from '../realtime/public-helpers'

test('every pathological 512-character mailbox is parsed or refused with the right answer', () => {
  for (const { label, input, expect: wanted } of PATHOLOGICAL) {
    expect(input.length, label).toBe(MAX_MAILBOX_CHARS)
    expect(parseMailbox(input), label).toEqual(wanted)
  }
  expect(parseMailbox(' '.repeat(MAX_MAILBOX_CHARS + 1 - 'a@b.co'.length) + 'a@b.co')).toBeNull() // one over the bound
})

test('the scanner answers exactly as the parser it replaced: ordinary mailboxes, edge cases, and 20 000 random short inputs', () => {
  const cases = [
    ...ORDINARY, 'a@b', 'a@b.c', 'a@-b.co', 'a@b-.co', 'a@b..co', '.a.@b.co', 'a@b.co.', '@b.co', 'a@', 'a b@c.co',
    '<a@b.co>', ' <a@b.co> ', '"" <a@b.co>', '"  " <a@b.co>', '"x"<a@b.co>', 'x<a@b.co>', 'Acme Inc. <a@b.co>',
    'ceo@bank.com, Acme <a@b.co>', '"ceo@bank.com, Acme" <a@b.co>', 'A "B" <a@b.co>', '"A\\"B" <a@b.co>', 'A <a@b.co> x',
    'A <a@b.co', 'A a@b.co>', '<>', 'A <>', 'A << a@b.co>', 'A <a b@c.co>', 'A\t<a@b.co>', '\u00a0A\u00a0<a@b.co>\u2028',
    'A\r\n<a@b.co>', 'a@b.co\n', 'Ann (work) <a@b.co>', 'Ann [x] <a@b.co>', 'Ann; <a@b.co>', 'Ann: <a@b.co>', 'Ann\\ <a@b.co>',
    `${'x'.repeat(64)}@b.co`, `${'x'.repeat(65)}@b.co`, `a@${'b'.repeat(63)}.co`, `a@${'b'.repeat(64)}.co`,
    `a@${'b.'.repeat(125)}co`, `a@${'b.'.repeat(126)}co`, 'A@B.CO', 'a@1.2', "o'neil+tag@x-y.example",
  ]
  for (const input of cases) expect(parseMailbox(input), JSON.stringify(input)).toEqual(legacyParseMailbox(input))
  // Random strings over the characters the grammar turns on, short enough for the old regex to answer quickly.
  const alphabet = [' ', '\t', '"', '<', '>', '@', '.', '-', ',', '\\', 'a', 'b', 'A', '1', '(', '\u00a0', 'é', 'c', 'o']
  let seed = 19
  const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31)
  for (let i = 0; i < 20_000; i++) {
    const length = 1 + Math.floor(random() * 24)
    let input = ''
    for (let j = 0; j < length; j++) input += alphabet[Math.floor(random() * alphabet.length)]
    // Half of them wrapped around a valid address, so accepted mailboxes are exercised as much as refused ones.
    if (i % 2) input = `${input} <a@b.co>`
    expect(parseMailbox(input), JSON.stringify(input)).toEqual(legacyParseMailbox(input))
  }
})

/** Characters a display name may not hold: C0 controls but the tab, DEL, C1, and bidirectional formatting characters. */
const FORBIDDEN_IN_NAMES = [
  ...Array.from({ length: 32 }, (_, c) => c).filter((c) => c !== 9 && c !== 10 && c !== 13), 0x7f, 0x85, 0x9f,
  0x061c, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069,
].map((c) => String.fromCharCode(c))

test('a display name holding a control or bidirectional formatting character is refused, quoted or not; a tab and ordinary Unicode are kept', () => {
  for (const ch of FORBIDDEN_IN_NAMES) {
    const code = `U+${ch.charCodeAt(0).toString(16).padStart(4, '0')}`
    expect(parseMailbox(`Acme${ch}Pay <a@b.co>`), code).toBeNull()
    expect(parseMailbox(`"Acme${ch}Pay" <a@b.co>`), code).toBeNull()
  }
  expect(parseMailbox('Acme\u202emoc.lapyap <a@b.co>')).toBeNull() // shows as "Acme paypal.com"
  expect(parseMailbox('Acme\tPay <a@b.co>')).toEqual({ name: 'Acme\tPay', address: 'a@b.co', domain: 'b.co' })
  expect(parseMailbox('"Zoë Ünal — 東京" <a@b.co>')).toEqual({ name: 'Zoë Ünal — 東京', address: 'a@b.co', domain: 'b.co' })
  expect(parseMailbox('\u000b Ann <a@b.co> \u000c')).toEqual({ name: 'Ann', address: 'a@b.co', domain: 'b.co' }) // around the name: whitespace, trimmed
})

let pair: Pair
let owner: Awaited<ReturnType<typeof newProduct>>
let key: string
let domain: string
beforeAll(async () => {
  pair = await startPublicPair({ MAIL_SEND_RATE_PER_SECOND: '1000' })
  owner = await newProduct('Mail addresses')
  domain = (await manage(owner, 'POST', '/mail/domains', { name: `a${crypto.randomUUID().slice(0, 8)}.example.com` })).name
  key = (await manage(owner, 'POST', '/mail/api-keys', { name: 'k', scope: 'full_access' })).key
}, 30_000)
afterAll(() => pair?.stop())

const send = (body: Record<string, unknown>) =>
  pub(pair.a, 'POST', `/${owner.productId}/mail/emails`, { key, body: { from: `Acme <hi@${domain}>`, to: 'x@example.org', subject: 's', text: 't', ...body } })

test('a send whose from, to, cc, bcc or reply_to is a pathological mailbox is refused 400 naming the field', async () => {
  for (const { input } of PATHOLOGICAL.filter((p) => p.expect === null)) {
    const asFrom = await send({ from: input })
    expect([asFrom.status, asFrom.body.fields?.[0]?.path]).toEqual([400, '/body/from'])
  }
  const bad = PATHOLOGICAL[0]!.input
  for (const [name, value, path] of [['to', [bad], '/body/to/0'], ['cc', bad, '/body/cc'], ['bcc', ['ok@example.org', bad], '/body/bcc/1'], ['reply_to', bad, '/body/reply_to']] as const) {
    const result = await send({ [name]: value })
    expect([result.status, result.body.fields?.map((f: { path: string }) => f.path)], name).toEqual([400, [path]])
  }
})

test('each mailbox is parsed once at queue time and stored as {name, address}: what the mailer reads', async () => {
  const result = await send({
    from: `"Acme, Inc." <hi@${domain}>`, to: ['Ann <ann@example.org>', 'bob@example.org'], cc: ' Cid  Jones <cid@example.org> ',
    bcc: 'hidden@example.org', reply_to: '"Help desk" <help@example.org>',
  })
  expect(result.status).toBe(200)
  const [row] = await sql`select mailboxes from emails where id = ${result.body.id}`
  expect(row!.mailboxes).toEqual({
    from: { name: 'Acme, Inc.', address: `hi@${domain}` },
    to: [{ name: 'Ann', address: 'ann@example.org' }, { name: '', address: 'bob@example.org' }],
    cc: [{ name: 'Cid  Jones', address: 'cid@example.org' }],
    bcc: [{ name: '', address: 'hidden@example.org' }],
    reply_to: [{ name: 'Help desk', address: 'help@example.org' }],
  })
})

test('a send whose from, to, cc, bcc or reply_to carries a control or bidi character in its display name is refused 400 naming the field and the rule', async () => {
  for (const [name, value, path] of [
    ['from', `"Acme\u202e" <hi@${domain}>`, '/body/from'],
    ['from', `Acme\u0007 <hi@${domain}>`, '/body/from'],
    ['to', ['ok@example.org', 'Ann\u200f <ann@example.org>'], '/body/to/1'],
    ['cc', '"x\u0001y" <c@example.org>', '/body/cc'],
    ['bcc', ['Bob\u007f <b@example.org>'], '/body/bcc/0'],
    ['reply_to', 'Help\u2066desk <h@example.org>', '/body/reply_to'],
  ] as const) {
    const result = await send({ [name]: value })
    expect([result.status, result.body.fields], name).toEqual([400, [{ path, message: expect.stringContaining('control or bidirectional formatting character') }]])
  }
})
