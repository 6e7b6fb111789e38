// One email's webhook deliveries (mail_emails_deliveries_list): the deliveries of the mail events whose data.emailId is
// the email, to every endpoint of the product, replays included; never another email's, another product's.
import { beforeAll, describe, expect, test } from 'bun:test'
import { buildPublicApp } from '../../services/public/app'
import { sql } from '../../shared/db/client'
import { recordEvent } from '../../shared/webhooks/outbox'
import { call, callApp, failingFields, newProduct, ok } from '../helpers'

type Owner = Awaited<ReturnType<typeof newProduct>>
const publicApp = buildPublicApp()
const as = (owner: { token: string; productId: string }, method: string, path: string, body?: unknown) =>
  call(method, path, { token: owner.token, productId: owner.productId, body })

let owner: Owner
let key: string
let domain: { name: string }
const endpoints: string[] = []

async function send(subject: string): Promise<string> {
  const result = await callApp(publicApp, 'http://public.test', 'POST', `/${owner.productId}/mail/emails`, {
    headers: { 'x-api-key': key }, body: { from: `a@${domain.name}`, to: ['b@example.org'], subject, text: 'hello' },
  })
  return ok(result, 'send').body.id
}

/** An email event recorded as the mailer records it (services/mailer/queue.ts), with a subject that quotes the id's key. */
const happened = (emailId: string, kind: string) => sql.begin((tx) => recordEvent(tx, {
  productId: owner.productId, area: 'mail', kind,
  data: { emailId, from: `a@${domain.name}`, to: ['b@example.org'], subject: '"emailId":"00000000-0000-0000-0000-000000000000"', detail: null },
}))

beforeAll(async () => {
  owner = await newProduct('Mail email deliveries')
  domain = ok(await as(owner, 'POST', '/mail/domains', { name: `w${crypto.randomUUID().slice(0, 8)}.example.com` }), 'domain').body
  key = ok(await as(owner, 'POST', '/mail/api-keys', { name: 'full', scope: 'full_access' }), 'key').body.key
  for (const kinds of [['*'], ['email.delivered']]) {
    endpoints.push(ok(await as(owner, 'POST', '/mail/webhooks', { url: `http://127.0.0.1:65000/${kinds[0]}`, eventKinds: kinds, enabled: true }), 'endpoint').body.id)
  }
})

describe('mail_emails_deliveries_list', () => {
  test("lists the deliveries of the email's events to each endpoint that wanted them, newest first, with the endpoint", async () => {
    const email = await send('watched')
    const other = await send('other')
    await happened(email, 'email.sent')
    await happened(other, 'email.delivered')
    await happened(email, 'email.delivered')
    const list = ok(await as(owner, 'GET', `/mail/emails/${email}/webhook-deliveries`), 'list').body
    expect(list.object).toBe('list')
    expect(list.has_more).toBe(false)
    // delivered went to both endpoints, sent only to the one that takes every kind
    expect(list.data.map((d: any) => [d.eventKind, d.endpointId]).sort()).toEqual([
      ['email.delivered', endpoints[0]], ['email.delivered', endpoints[1]], ['email.sent', endpoints[0]],
    ].sort())
    expect(list.data[0]).toMatchObject({ state: 'pending', attemptCount: 0, lastAttempt: null, endpointUrl: expect.stringContaining('127.0.0.1:65000/') })
    const times = list.data.map((d: any) => d.createdAt)
    expect(times).toEqual([...times].sort().reverse())

    const replay = ok(await as(owner, 'POST', `/mail/webhooks/${endpoints[0]}/deliveries/${list.data.at(-1).id}/replay`), 'replay').body
    const after = ok(await as(owner, 'GET', `/mail/emails/${email}/webhook-deliveries?limit=1`), 'after replay').body
    expect([after.data[0].id, after.data[0].replayOf, after.has_more]).toEqual([replay.id, list.data.at(-1).id, true])
    const next = ok(await as(owner, 'GET', `/mail/emails/${email}/webhook-deliveries?limit=100&after=${replay.id}`), 'page 2').body
    expect(next.data.map((d: any) => d.id)).toEqual(list.data.map((d: any) => d.id))

    const others = ok(await as(owner, 'GET', `/mail/emails/${other}/webhook-deliveries`), 'other email').body.data
    expect(others.map((d: any) => d.eventKind)).toEqual(['email.delivered', 'email.delivered'])
  })

  test('an email with no events delivered has an empty list; bad paging is 400 naming the field', async () => {
    const email = await send('quiet')
    expect(ok(await as(owner, 'GET', `/mail/emails/${email}/webhook-deliveries`), 'empty').body).toEqual({ object: 'list', has_more: false, data: [] })
    for (const [query, path] of [['limit=0', '/query/limit'], ['limit=101', '/query/limit'], ['after=x', '/query/after'],
      [`after=${crypto.randomUUID()}`, '/query/after']] as [string, string][]) {
      const result = await as(owner, 'GET', `/mail/emails/${email}/webhook-deliveries?${query}`)
      expect([query, failingFields(result)]).toEqual([query, [path]])
    }
  })

  test("another product's email is 404, and its deliveries are no cursor here", async () => {
    const email = await send('private')
    await happened(email, 'email.sent')
    const [delivery] = ok(await as(owner, 'GET', `/mail/emails/${email}/webhook-deliveries`), 'own').body.data
    const other = await newProduct()
    const theirs = await as(other, 'GET', `/mail/emails/${email}/webhook-deliveries`)
    expect([theirs.status, theirs.body.error]).toEqual([404, 'not_found'])
    expect((await as(owner, 'GET', '/mail/emails/not-an-id/webhook-deliveries')).status).toBe(404)
    const otherEmail = await send('second')
    const cursor = await as(owner, 'GET', `/mail/emails/${otherEmail}/webhook-deliveries?after=${delivery.id}`)
    expect(failingFields(cursor)).toEqual(['/query/after'])
  })
})
