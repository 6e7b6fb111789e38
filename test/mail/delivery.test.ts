// Delivery by real `mailer` processes to a real SMTP server started here, read back with mailparser: headers, body,
// Message-ID and a DKIM signature that verifies against the domain's published record; retries with backoff, bounces
// and suppression, and a mailer killed mid-batch with nothing lost.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { dkimVerify } from 'mailauth/lib/dkim/verify'
import { simpleParser } from 'mailparser'
import { startSmtpSink, type CaughtMessage, type Sink } from '../../scripts/smtp-sink'
import { sql } from '../../shared/db/client'
import { newProduct, startProcess, type Worker } from '../helpers'
import { manage, pub, startPublicPair, type Pair } from '../realtime/public-helpers'
import { emailReader } from './email-reader'

type Owner = Awaited<ReturnType<typeof newProduct>>

const caught: CaughtMessage[] = []
/** Per-recipient answers for this file's tests: address → replies to give, one per attempt (then accept). */
const scripted = new Map<string, { code: number; message: string }[]>()
let sink: Sink
let pair: Pair
let owner: Owner
let domain: { id: string; name: string; records: { name: string; value: string }[] }
let key: string

const MAILER_ENV = () => ({
  SMTP_URL: `smtp://127.0.0.1:${sink.port}`, MAILER_POLL_MS: '50', MAIL_RETRY_BASE_MS: '200', MAIL_MAX_ATTEMPTS: '3',
  MAIL_LEASE_MS: '3000', MAILER_SMTP_TIMEOUT_MS: '5000',
})
async function startMailer(env: Record<string, string> = {}): Promise<Worker> {
  return startProcess('mailer', { ...MAILER_ENV(), ...env })
}

let mailer: Worker
beforeAll(async () => {
  sink = await startSmtpSink({
    port: 0,
    onMessage: (message) => caught.push(message),
    answerRecipient: (address) => scripted.get(address)?.shift(),
  })
  pair = await startPublicPair({ MAIL_SEND_RATE_PER_SECOND: '1000' })
  owner = await newProduct('Mail delivery')
  domain = await manage(owner, 'POST', '/mail/domains', { name: `d${crypto.randomUUID().slice(0, 8)}.example.com` })
  key = (await manage(owner, 'POST', '/mail/api-keys', { name: 'sender', scope: 'full_access' })).key
  mailer = await startMailer()
}, 30_000)
afterAll(async () => {
  await mailer?.stop()
  await pair?.stop()
  await sink?.close()
})

const send = async (body: Record<string, unknown>) => {
  const result = await pub(pair.a, 'POST', `/${owner.productId}/mail/emails`, { key, body: { from: `Acme <hello@${domain.name}>`, subject: 'Hi', text: 'Hello', ...body } })
  if (result.status !== 200) throw new Error(`send: ${result.status} ${JSON.stringify(result.body)}`)
  return result.body.id as string
}
const { read, until } = emailReader(() => pair.b, () => owner.productId, () => key, 15_000)
const caughtFor = (messageId: string) => caught.filter((m) => m.raw.toString().includes(messageId))

describe('delivery', () => {
  test('queued → sent → delivered: the right headers, body and Message-ID, bcc only in the envelope, and a DKIM signature that verifies against the published record', async () => {
    const id = await send({
      to: ['Ann <ann@example.org>'], cc: 'cid@example.org', bcc: 'hidden@example.org', reply_to: 'replies@example.org',
      html: '<p>Hello <b>there</b></p>', text: 'Hello there', headers: { 'X-Campaign': 'spring' },
    })
    const email = await until(id, ['delivered'])
    expect(email.events.map((e: { type: string }) => e.type)).toEqual(['queued', 'sent', 'delivered'])
    const [message] = caughtFor(email.message_id)
    expect(message!.to.sort()).toEqual(['ann@example.org', 'cid@example.org', 'hidden@example.org'])
    expect(message!.from).toBe(`hello@${domain.name}`)
    const parsed = await simpleParser(message!.raw)
    expect(parsed.messageId).toBe(email.message_id)
    expect(parsed.subject).toBe('Hi')
    expect(parsed.from?.text).toBe(`"Acme" <hello@${domain.name}>`)
    expect((parsed.to as { text: string }).text).toBe('"Ann" <ann@example.org>')
    expect((parsed.cc as { text: string }).text).toBe('cid@example.org')
    expect(parsed.bcc).toBeUndefined()
    expect(message!.raw.toString()).not.toContain('hidden@example.org')
    expect(parsed.replyTo?.text).toBe('replies@example.org')
    expect(parsed.headers.get('x-campaign')).toBe('spring')
    expect(parsed.html).toBe('<p>Hello <b>there</b></p>')
    expect(parsed.text?.trim()).toBe('Hello there')

    const [dkimRecord] = domain.records
    const resolver = async (name: string, type: string) => {
      if (type === 'TXT' && name === dkimRecord!.name) return [[dkimRecord!.value]]
      throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' })
    }
    const verified = await dkimVerify(message!.raw, { resolver } as never)
    expect(verified.results.map((r: any) => [r.signingDomain, r.selector, r.status.result])).toEqual([[domain.name, 'platform', 'pass']])
    const tampered = Buffer.from(message!.raw.toString().replace('Hello there', 'Hello thief'))
    expect((await dkimVerify(tampered, { resolver } as never)).results[0]!.status.result).not.toBe('pass') // body hash mismatch
  }, 30_000)

  test('display names with specials, quoted by the sender, reach the recipient as one mailbox each with the name intact', async () => {
    const id = await send({ from: `"Acme, Inc. (billing)" <hello@${domain.name}>`, to: ['"Doe, Jane" <jane@example.org>', 'Émile Zola <emile@example.org>'] })
    const email = await until(id, ['delivered'])
    const parsed = await simpleParser(caughtFor(email.message_id)[0]!.raw)
    expect(parsed.from?.value).toEqual([{ name: 'Acme, Inc. (billing)', address: `hello@${domain.name}` }])
    expect((parsed.to as { value: unknown[] }).value).toEqual([{ name: 'Doe, Jane', address: 'jane@example.org' }, { name: 'Émile Zola', address: 'emile@example.org' }])
  }, 30_000)

  test('a temporary refusal (4xx) is retried with backoff, then delivered; one that lasts is failed after the attempt limit', async () => {
    const defer = { code: 451, message: '4.3.0 try again later' }
    scripted.set('flaky@example.org', [defer, defer])
    const recovers = await send({ to: 'flaky@example.org' })
    const delivered = await until(recovers, ['delivered', 'failed'])
    // `sent` only once the server accepted: after the temporary refusals, with `delivered`.
    expect(delivered.events.map((e: { type: string }) => e.type)).toEqual(['queued', 'delivery_delayed', 'delivery_delayed', 'sent', 'delivered'])
    const [first, second] = delivered.events.filter((e: { type: string }) => e.type === 'delivery_delayed').map((e: { at: string }) => Date.parse(e.at))
    const third = Date.parse(delivered.events.at(-1).at)
    expect(third - second!).toBeGreaterThanOrEqual(400) // 200 ms, then 400 ms: doubled
    expect(second! - first!).toBeGreaterThanOrEqual(200)
    expect(delivered.events[1].detail).toContain('451')

    scripted.set('down@example.org', [defer, defer, defer, defer])
    const gives = await send({ to: 'down@example.org' })
    const failed = await until(gives, ['failed', 'delivered'])
    expect(failed.events.map((e: { type: string }) => e.type)).toEqual(['queued', 'delivery_delayed', 'delivery_delayed', 'failed'])
    expect(failed.last_event).toBe('failed')
    expect(caughtFor(failed.message_id)).toEqual([])
  }, 30_000)

  test('a permanent refusal (5xx) bounces and suppresses the address: a later email to it is suppressed without SMTP', async () => {
    scripted.set('gone@example.org', [{ code: 550, message: '5.1.1 no such user' }])
    const first = await until(await send({ to: 'Gone <gone@example.org>' }), ['bounced', 'delivered'])
    expect(first.events.map((e: { type: string }) => e.type)).toEqual(['queued', 'bounced']) // never accepted: never `sent`
    expect(first.events[1].detail).toContain('550')
    const later = await until(await send({ to: 'GONE@example.org' }), ['suppressed', 'delivered'])
    expect(later.events.map((e: { type: string }) => e.type)).toEqual(['queued', 'suppressed'])
    expect(caughtFor(later.message_id)).toEqual([])
    // With another recipient that is not suppressed, the email goes to that one only.
    const mixed = await until(await send({ to: ['gone@example.org', 'ok@example.org'] }), ['delivered'])
    expect(caughtFor(mixed.message_id).map((m) => m.to)).toEqual([['ok@example.org']])
    expect(mixed.events[1].detail).toContain('gone@example.org')
  }, 30_000)
})

test('a mailer killed with SIGKILL mid-batch and another started: every email is delivered, none lost, at most one repeat each with the same Message-ID', async () => {
  const slow = await startSmtpSink({
    port: 0,
    onMessage: (message) => received.push(message),
    answerData: () => {
      Bun.sleepSync(40) // a slow server, so the kill lands while a batch is in flight
      return undefined
    },
  })
  const received: CaughtMessage[] = []
  await mailer.stop() // this file's mailer would take the emails; the ones under test deliver to `slow`
  const doomed = await startMailer({ SMTP_URL: `smtp://127.0.0.1:${slow.port}`, MAILER_BATCH: '5' })
  const ids: string[] = []
  for (let i = 0; i < 30; i++) ids.push(await send({ to: `r${i}@example.org`, subject: `#${i}` }))
  for (const deadline = Date.now() + 10_000; received.length < 3 && Date.now() < deadline; ) await Bun.sleep(10)
  await doomed.stop('SIGKILL')
  const deliveredBeforeKill = received.length
  expect(deliveredBeforeKill).toBeLessThan(30)
  const survivor = await startMailer({ SMTP_URL: `smtp://127.0.0.1:${slow.port}` })
  try {
    for (const id of ids) await until(id, ['delivered'], 20_000)
    const emails = await Promise.all(ids.map(read))
    for (const email of emails) {
      const copies = received.filter((m) => m.raw.toString().includes(email.message_id))
      expect(copies.length).toBeGreaterThanOrEqual(1)
      expect(copies.length).toBeLessThanOrEqual(2)
    }
  } finally {
    await survivor.stop()
    await slow.close()
    mailer = await startMailer()
  }
}, 60_000)

test('an attempt that outlasts the lease keeps it (renewed while the SMTP server thinks): a second mailer never sends the email again', async () => {
  const received: CaughtMessage[] = []
  const slow = await startSmtpSink({ port: 0, onMessage: (message) => received.push(message), answerData: () => Bun.sleep(2500).then(() => undefined) })
  await mailer.stop()
  const env = { SMTP_URL: `smtp://127.0.0.1:${slow.port}`, MAIL_LEASE_MS: '1000' }
  const both = await Promise.all([startMailer(env), startMailer(env)])
  try {
    const id = await send({ to: 'patient@example.org' })
    const email = await until(id, ['delivered'], 20_000)
    await Bun.sleep(1500) // long enough for a second copy to arrive, had another mailer taken the email over
    expect(received.filter((m) => m.raw.toString().includes(email.message_id))).toHaveLength(1)
    expect(email.events.map((e: { type: string }) => e.type)).toEqual(['queued', 'sent', 'delivered'])
  } finally {
    await Promise.all(both.map((m) => m.stop()))
    await slow.close()
    mailer = await startMailer()
  }
}, 60_000)

test('an email whose domain is no longer verified when its turn comes is failed, not sent', async () => {
  await mailer.stop()
  try {
    const other = await manage(owner, 'POST', '/mail/domains', { name: `f${crypto.randomUUID().slice(0, 8)}.example.com` })
    const id = await send({ from: `hi@${other.name}`, to: 'late@example.org' })
    await sql`update mail_domains set status = 'failed' where id = ${other.id}` // what its next DNS check finds
    mailer = await startMailer()
    const email = await until(id, ['failed', 'delivered'])
    expect(email.events.map((e: { type: string }) => e.type)).toEqual(['queued', 'failed'])
    expect(email.events[1].detail).toContain('no longer verified')
    expect(caughtFor(email.message_id)).toEqual([])
  } finally {
    if (mailer.proc.exitCode !== null || mailer.proc.signalCode !== null) mailer = await startMailer()
  }
}, 30_000)

test('the per-product send rate: beyond MAIL_SEND_RATE_PER_SECOND a second, 429 rate_limit_exceeded with Retry-After', async () => {
  const worker = await startProcess('public', { TRUST_PROXY: '1', MAIL_SEND_RATE_PER_SECOND: '3' })
  try {
    const product = await newProduct()
    const own = await manage(product, 'POST', '/mail/domains', { name: `r${crypto.randomUUID().slice(0, 8)}.example.com` })
    const sender = (await manage(product, 'POST', '/mail/api-keys', { name: 's', scope: 'sending_access' })).key
    const body = { from: `a@${own.name}`, to: 'x@example.org', subject: 's', text: 't' }
    const now = Date.now() % 1000
    if (now > 700) await Bun.sleep(1000 - now + 10) // not across a window edge
    const send = (headers: Record<string, string> = {}) => pub(worker, 'POST', `/${product.productId}/mail/emails`, { key: sender, body, headers })
    const first = await send({ 'idempotency-key': 'order-1' })
    const results = [first, ...(await Promise.all(Array.from({ length: 4 }, () => send())))]
    const statuses = results.map((r) => r.status).sort()
    expect(statuses).toEqual([200, 200, 200, 429, 429])
    const refused = results.find((r) => r.status === 429)!
    expect(refused.body.error).toBe('rate_limit_exceeded')
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    // A retry of a request that was queued answers its id, even while the rate is spent: it sends nothing new.
    const retried = await send({ 'idempotency-key': 'order-1' })
    expect([retried.status, retried.body.id]).toEqual([200, first.body.id])
  } finally {
    await worker.stop()
  }
})
