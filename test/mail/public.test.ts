// The Mail public routes against two real `public` workers: every rule of the spec's Mail authentication section and
// error table, the domain lock, what each scope may read, Resend-style listing, rotation, and malformed bodies.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { sql } from '../../shared/db/client'
import { newProduct, ok } from '../helpers'
import { manage, type Pair, pub, startPublicPair } from '../realtime/public-helpers'

type Owner = Awaited<ReturnType<typeof newProduct>>
const domainName = () => `m${crypto.randomUUID().slice(0, 8)}.example.com`

let pair: Pair
let owner: Owner
let domainA: { id: string; name: string }
let domainB: { id: string; name: string }
let full: { id: string; key: string }
beforeAll(async () => {
  pair = await startPublicPair({ MAIL_SEND_RATE_PER_SECOND: '1000' })
  owner = await newProduct('Mail test')
  domainA = await manage(owner, 'POST', '/mail/domains', { name: domainName() })
  domainB = await manage(owner, 'POST', '/mail/domains', { name: domainName() })
  full = await manage(owner, 'POST', '/mail/api-keys', { name: 'full', scope: 'full_access' })
}, 30_000)
afterAll(() => pair?.stop())

const emails = (productId = owner.productId) => `/${productId}/mail/emails`
const message = (from: string, extra: Record<string, unknown> = {}) => ({ from, to: 'someone@example.org', subject: 'Hi', html: '<p>Hi</p>', ...extra })
const queuedCount = async () => Number((await sql`select count(*) from emails where product_id = ${owner.productId}`)[0]!.count)

describe('the key', () => {
  test('missing, not lmk_ (refused before any lookup), unknown, or in the query string or as a bearer: 401 restricted_api_key', async () => {
    const attempts: [string, Record<string, unknown>][] = [
      [emails(), {}],
      [emails(), { key: 'rtk_' + 'a'.repeat(43) }],
      [emails(), { key: 'lmk_short' }],
      [emails(), { key: 'lmk_' + 'a'.repeat(43) }],
      [`${emails()}?api_key=${full.key}`, { key: full.key }],
      [emails(), { headers: { authorization: `Bearer ${full.key}` } }],
      [emails(), { key: full.key, headers: { authorization: `Bearer ${full.key}` } }], // even next to a good header
    ]
    for (const [path, options] of attempts) {
      for (const worker of [pair.a, pair.b]) {
        const result = await pub(worker, 'POST', path, { ...options, body: message(`a@${domainA.name}`) })
        expect([path, result.status, result.body.error]).toEqual([path, 401, 'restricted_api_key'])
      }
    }
  })

  test('a key on another product\'s path: 404', async () => {
    const other = await newProduct()
    const result = await pub(pair.a, 'POST', emails(other.productId), { key: full.key, body: message(`a@${domainA.name}`) })
    expect(result.status).toBe(404)
  })

  test('a deleted key fails at once on both workers (401); emails it sent stay; the rotation keeps both keys valid in between', async () => {
    const old = await manage(owner, 'POST', '/mail/api-keys', { name: 'old', scope: 'full_access' })
    const sent = await pub(pair.a, 'POST', emails(), { key: old.key, body: message(`a@${domainA.name}`) })
    expect(sent.status).toBe(200)
    for (const worker of [pair.a, pair.b]) expect((await pub(worker, 'GET', `${emails()}/${sent.body.id}`, { key: old.key })).status).toBe(200) // cached on both
    const fresh = await manage(owner, 'POST', '/mail/api-keys', { name: 'new', scope: 'full_access' })
    for (const key of [old.key, fresh.key]) {
      for (const worker of [pair.a, pair.b]) expect((await pub(worker, 'GET', `${emails()}/${sent.body.id}`, { key })).status).toBe(200)
    }
    await manage(owner, 'DELETE', `/mail/api-keys/${old.id}`)
    for (const worker of [pair.a, pair.b]) {
      const refused = await pub(worker, 'GET', `${emails()}/${sent.body.id}`, { key: old.key })
      expect([refused.status, refused.body.error]).toEqual([401, 'restricted_api_key'])
      expect((await pub(worker, 'GET', `${emails()}/${sent.body.id}`, { key: fresh.key })).body.id).toBe(sent.body.id)
    }
  })
})

describe('the domain lock and the scopes', () => {
  test('a locked key sending from another domain: 401 restricted_api_key and nothing queued, whatever else the body says', async () => {
    const locked = await manage(owner, 'POST', '/mail/api-keys', { name: 'locked', scope: 'sending_access', domainId: domainA.id })
    const before = await queuedCount()
    for (const body of [message(`a@${domainB.name}`), { from: `Someone <b@${domainB.name}>`, to: 42 }, message('c@unregistered.example.net')]) {
      const result = await pub(pair.b, 'POST', emails(), { key: locked.key, body })
      expect([result.status, result.body.error]).toEqual([401, 'restricted_api_key'])
    }
    expect(await queuedCount()).toBe(before)
    expect((await pub(pair.a, 'POST', emails(), { key: locked.key, body: message(`News <a@${domainA.name}>`) })).status).toBe(200)
  })

  test('a locked key reads its domain\'s emails only (another domain\'s is 404) and cannot list (403 restricted_api_key)', async () => {
    const locked = await manage(owner, 'POST', '/mail/api-keys', { name: 'locked full', scope: 'full_access', domainId: domainA.id })
    const inB = ok(await pub(pair.a, 'POST', emails(), { key: full.key, body: message(`a@${domainB.name}`) }), 'send from domain B').body.id
    const inA = ok(await pub(pair.a, 'POST', emails(), { key: full.key, body: message(`a@${domainA.name}`) }), 'send from domain A').body.id
    expect((await pub(pair.b, 'GET', `${emails()}/${inA}`, { key: locked.key })).status).toBe(200)
    expect((await pub(pair.b, 'GET', `${emails()}/${inB}`, { key: locked.key })).status).toBe(404)
    const list = await pub(pair.b, 'GET', emails(), { key: locked.key })
    expect([list.status, list.body.error]).toEqual([403, 'restricted_api_key'])
  })

  test('an unlocked key sends from any verified domain; an unregistered or unverified domain is 403 domain_not_verified naming from', async () => {
    const key = await manage(owner, 'POST', '/mail/api-keys', { name: 'free', scope: 'sending_access' })
    for (const domain of [domainA, domainB]) expect((await pub(pair.a, 'POST', emails(), { key: key.key, body: message(`x@${domain.name}`) })).status).toBe(200)
    const pending = await manage(owner, 'POST', '/mail/domains', { name: domainName() })
    await sql`update mail_domains set status = 'pending' where id = ${pending.id}` // as without MAIL_DEV_VERIFY
    for (const from of [`x@${pending.name}`, 'x@unregistered.example.net']) {
      const result = await pub(pair.a, 'POST', emails(), { key: key.key, body: message(from) })
      expect([result.status, result.body.error, result.body.fields[0].path]).toEqual([403, 'domain_not_verified', '/body/from'])
    }
  })

  test('sending_access reads the emails that key sent (another key\'s is 404); full_access reads every email of the product', async () => {
    const k1 = await manage(owner, 'POST', '/mail/api-keys', { name: 'k1', scope: 'sending_access' })
    const k2 = await manage(owner, 'POST', '/mail/api-keys', { name: 'k2', scope: 'sending_access' })
    const id = ok(await pub(pair.a, 'POST', emails(), { key: k1.key, body: message(`a@${domainA.name}`) }), 'send with k1').body.id
    expect((await pub(pair.a, 'GET', `${emails()}/${id}`, { key: k1.key })).status).toBe(200)
    expect((await pub(pair.a, 'GET', `${emails()}/${id}`, { key: k2.key })).status).toBe(404)
    expect((await pub(pair.a, 'GET', `${emails()}/${id}`, { key: full.key })).status).toBe(200)
    expect((await pub(pair.a, 'GET', `${emails()}/not-an-id`, { key: full.key })).status).toBe(404)
    expect((await pub(pair.a, 'GET', `${emails()}/${crypto.randomUUID()}`, { key: full.key })).status).toBe(404)
    const listed = (await pub(pair.a, 'GET', emails(), { key: k2.key })).body
    expect(listed.data.map((e: { id: string }) => e.id)).not.toContain(id)
  })
})

describe('emails', () => {
  test('POST answers {id}; GET answers the email with last_event, its time, and the event timeline', async () => {
    const body = {
      from: `Acme <news@${domainA.name}>`, to: ['a@example.org', 'B <b@example.org>'], cc: 'c@example.org', bcc: ['d@example.org'],
      reply_to: 'r@example.org', subject: 'Hello', html: '<b>Hi</b>', text: 'Hi', headers: { 'X-Campaign': 'spring' },
      tags: [{ name: 'kind', value: 'welcome' }],
    }
    const sent = await pub(pair.a, 'POST', emails(), { key: full.key, body })
    expect(Object.keys(sent.body)).toEqual(['id'])
    const email = (await pub(pair.b, 'GET', `${emails()}/${sent.body.id}`, { key: full.key })).body
    expect(email).toMatchObject({
      object: 'email', id: sent.body.id, from: body.from, to: body.to, cc: ['c@example.org'], bcc: ['d@example.org'],
      reply_to: ['r@example.org'], subject: 'Hello', html: '<b>Hi</b>', text: 'Hi', headers: { 'X-Campaign': 'spring' },
      tags: body.tags, last_event: 'queued', message_id: `<${sent.body.id}@${domainA.name}>`,
    })
    expect(email.events).toEqual([{ type: 'queued', at: email.last_event_at }])
  })

  test('list: newest first, limit 1..100 (default 20), after / before cursors, {object: "list", has_more, data}', async () => {
    const product = await newProduct()
    const domain = await manage(product, 'POST', '/mail/domains', { name: domainName() })
    const key = await manage(product, 'POST', '/mail/api-keys', { name: 'k', scope: 'full_access' })
    const ids: string[] = []
    for (let i = 0; i < 5; i++) ids.push(ok(await pub(pair.a, 'POST', emails(product.productId), { key: key.key, body: message(`a@${domain.name}`, { subject: `#${i}` }) }), `send #${i}`).body.id)
    const newest = [...ids].reverse()
    const page = async (query: string) => (await pub(pair.b, 'GET', `${emails(product.productId)}${query}`, { key: key.key })).body
    expect(await page('')).toMatchObject({ object: 'list', has_more: false })
    expect((await page('')).data.map((e: { id: string }) => e.id)).toEqual(newest)
    const first = await page('?limit=2')
    expect([first.has_more, first.data.map((e: { id: string }) => e.id)]).toEqual([true, newest.slice(0, 2)])
    const second = await page(`?limit=2&after=${newest[1]}`)
    expect([second.has_more, second.data.map((e: { id: string }) => e.id)]).toEqual([true, newest.slice(2, 4)])
    const last = await page(`?limit=2&after=${newest[3]}`)
    expect([last.has_more, last.data.map((e: { id: string }) => e.id)]).toEqual([false, newest.slice(4)])
    const back = await page(`?limit=2&before=${newest[2]}`)
    expect([back.has_more, back.data.map((e: { id: string }) => e.id)]).toEqual([false, newest.slice(0, 2)])
    for (const query of ['?limit=0', '?limit=101', '?limit=x', `?after=${ids[0]}&before=${ids[1]}`, '?after=nope', '?other=1']) {
      const result = await pub(pair.b, 'GET', `${emails(product.productId)}${query}`, { key: key.key })
      expect([query, result.status, result.body.fields?.[0]?.path?.startsWith('/query/')]).toEqual([query, 400, true])
    }
  })

  test('malformed bodies answer 400 naming the field; nothing is queued', async () => {
    const from = `a@${domainA.name}`
    const before = await queuedCount()
    const cases: [unknown, string][] = [
      [{ to: 'a@example.org', subject: 's', html: 'h' }, '/body/from'],
      [message('not an address'), '/body/from'],
      [message(from, { to: Array.from({ length: 51 }, (_, i) => `r${i}@example.org`) }), '/body/to'],
      [message(from, { to: ['a@example.org', 'nope'] }), '/body/to/1'],
      [message(from, { cc: 'bad' }), '/body/cc'],
      [message(from, { subject: '' }), '/body/subject'],
      [message(from, { subject: 'Hi\r\nBcc: victim@example.org' }), '/body/subject'],
      [{ from, to: 'a@example.org', subject: 's' }, '/body'],
      [message(from, { headers: { 'Message-ID': '<x@y>' } }), '/body/headers/Message-ID'],
      [message(from, { headers: { 'X-Evil': 'a\r\nBcc: victim@example.org' } }), '/body/headers/X-Evil'],
      ...['Authentication-Results', 'ARC-Seal', 'Received-SPF', 'Resent-From', 'Content-Disposition', 'DKIM-Signature', 'dkim-anything']
        .map((name): [unknown, string] => [message(from, { headers: { [name]: 'pass' } }), `/body/headers/${name}`]),
      [message(from, { headers: { 'X-Tag': 'a', 'x-tag': 'b' } }), '/body/headers/x-tag'],
      // A display name that would read as a second mailbox (a spoofed sender in mail clients) must be quoted.
      [message(`ceo@bank.example, Acme <news@${domainA.name}>`), '/body/from'],
      [message(`Acme; <news@${domainA.name}>`), '/body/from'],
      [message(from, { to: 'x@y.example, Z <z@example.org>' }), '/body/to'],
      [message(from, { reply_to: ['ok@example.org', 'a@b.example <c@example.org>'] }), '/body/reply_to/1'],
      [message(from, { tags: [{ name: 'has space', value: 'v' }] }), '/body/tags/0/name'],
      [message(from, { attachments: [] }), '/body/attachments'],
      [message(from, { scheduled_at: 'in 1 hour' }), '/body/scheduled_at'], // not supported: refused, never sent early
    ]
    for (const [body, path] of cases) {
      const result = await pub(pair.a, 'POST', emails(), { key: full.key, body })
      expect([path, result.status, result.body.fields?.map((f: { path: string }) => f.path)]).toEqual([path, 400, expect.arrayContaining([path])])
    }
    const notJson = await pub(pair.a, 'POST', emails(), { key: full.key, raw: '{"from":', headers: { 'content-type': 'application/json' } })
    expect(notJson.status).toBe(400)
    expect(await queuedCount()).toBe(before)
  })
})
