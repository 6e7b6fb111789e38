// Mail's webhook events end to end, with real public, mailer and webhooks processes, a real SMTP server and a real
// receiver on loopback: each kind (email.sent, delivered, delivery_delayed, bounced, failed, suppressed and
// domain.verification_changed) arrives once per event, signed (standardwebhooks), with the documented payload.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { startSmtpSink, type Sink } from '../../scripts/smtp-sink'
import { sql } from '../../shared/db/client'
import { call, eventually, newProduct, ok, startProcess, type Worker } from '../helpers'
import { manage, pub } from '../realtime/public-helpers'
import { type Receiver, startReceiver, verified } from './receiver'

type Owner = Awaited<ReturnType<typeof newProduct>>

const scripted = new Map<string, { code: number; message: string }[]>()
let sink: Sink
let receiver: Receiver
let workers: Worker[] = []
let publicWorker: Worker
let owner: Owner
let domain: { id: string; name: string }
let key: string
let secret: string
const PATH = '/mail-events'

beforeAll(async () => {
  sink = await startSmtpSink({ port: 0, onMessage: () => {}, answerRecipient: (address) => scripted.get(address)?.shift() })
  receiver = startReceiver()
  owner = await newProduct('Mail webhooks')
  domain = await manage(owner, 'POST', '/mail/domains', { name: `d${crypto.randomUUID().slice(0, 8)}.example.com` })
  key = (await manage(owner, 'POST', '/mail/api-keys', { name: 'sender', scope: 'full_access' })).key
  secret = (await manage(owner, 'POST', '/mail/webhooks', { url: receiver.url(PATH), eventKinds: ['*'] })).secret
  workers = await Promise.all([
    startProcess('public', { MAIL_SEND_RATE_PER_SECOND: '1000' }),
    startProcess('mailer', {
      SMTP_URL: `smtp://127.0.0.1:${sink.port}`, MAILER_POLL_MS: '50', MAIL_RETRY_BASE_MS: '200', MAIL_MAX_ATTEMPTS: '2',
      MAIL_LEASE_MS: '3000', MAILER_SMTP_TIMEOUT_MS: '5000',
    }),
    startProcess('webhooks', { WEBHOOK_POLL_MS: '50' }),
  ])
  publicWorker = workers[0]!
}, 30_000)
afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()))
  await sink?.close()
  receiver?.stop()
})

async function send(to: string) {
  const result = await pub(publicWorker, 'POST', `/${owner.productId}/mail/emails`, { key, body: { from: `hello@${domain.name}`, to, subject: 'Hi', text: 'Hello' } })
  if (result.status !== 200) throw new Error(`send: ${result.status} ${JSON.stringify(result.body)}`)
  return result.body.id as string
}

/** Every event received so far, verified. */
const events = () => receiver.received(PATH).map((request) => ({ id: request.headers['webhook-id'], ...verified(secret, request) }))
const kindsFor = (emailId: string) => events().filter((e) => e.data.emailId === emailId).map((e) => e.type)

/** Waits for `kinds` of the email (in any order), then a moment more: none arrives twice, no other arrives. */
async function expectKinds(emailId: string, kinds: string[]) {
  await eventually(() => kinds.every((kind) => kindsFor(emailId).includes(kind)), 15_000, `${kinds.join(', ')} for ${emailId}`)
  await Bun.sleep(500)
  expect(kindsFor(emailId).sort()).toEqual([...kinds].sort())
}

test('a delivered email: email.sent and email.delivered, once each, with the documented data', async () => {
  const emailId = await send('ann@example.org')
  await expectKinds(emailId, ['email.sent', 'email.delivered'])
  const delivered = events().find((e) => e.data.emailId === emailId && e.type === 'email.delivered')!
  expect(delivered).toEqual({
    id: expect.stringMatching(/^msg_/), type: 'email.delivered', timestamp: expect.any(String),
    data: {
      emailId, from: `hello@${domain.name}`, to: ['ann@example.org'], subject: 'Hi', createdAt: expect.any(String), attempt: 1,
      detail: null,
    },
  })
})

test('a temporary failure then a permanent one: email.delivery_delayed, then email.bounced; the next email to it: email.suppressed', async () => {
  const address = `bounce-${crypto.randomUUID().slice(0, 8)}@example.org`
  scripted.set(address, [{ code: 451, message: 'try later' }, { code: 550, message: 'no such user' }])
  const emailId = await send(address)
  await expectKinds(emailId, ['email.delivery_delayed', 'email.bounced'])
  const bounced = events().find((e) => e.data.emailId === emailId && e.type === 'email.bounced')!
  expect(bounced.data).toMatchObject({ to: [address], attempt: 2, detail: expect.stringContaining('550') })
  const again = await send(address)
  await expectKinds(again, ['email.suppressed'])
})

test('retries spent: email.delivery_delayed, then email.failed', async () => {
  const address = `later-${crypto.randomUUID().slice(0, 8)}@example.org`
  scripted.set(address, [{ code: 451, message: 'try later' }, { code: 451, message: 'try later' }])
  const emailId = await send(address)
  await expectKinds(emailId, ['email.delivery_delayed', 'email.failed'])
})

test('a domain whose verification status changes: domain.verification_changed once; a check that changes nothing: none', async () => {
  await sql`update mail_domains set status = 'failed', verified_at = null where id = ${domain.id}`
  ok(await call('POST', `/mail/domains/${domain.id}/verify`, { token: owner.token, productId: owner.productId }), 'verify')
  ok(await call('POST', `/mail/domains/${domain.id}/verify`, { token: owner.token, productId: owner.productId }), 'verify again')
  const changes = () => events().filter((e) => e.type === 'domain.verification_changed')
  await eventually(() => changes().length > 0, 5000, 'the domain event')
  await Bun.sleep(500)
  expect(changes()).toEqual([{
    id: expect.stringMatching(/^msg_/), type: 'domain.verification_changed', timestamp: expect.any(String),
    data: {
      domainId: domain.id, name: domain.name, status: 'verified', previousStatus: 'failed',
      records: [{ record: 'DKIM', status: 'verified' }, { record: 'SPF', status: 'verified' }, { record: 'Ownership', status: 'verified' }],
    },
  }])
})
