// The email log on the platform API (mail_emails_list, mail_emails_get): the public routes' answers for the whole
// product, behind a session or a platform key with the mail area, never another product's emails.
import { beforeAll, describe, expect, test } from 'bun:test'
import { buildPublicApp } from '../../services/public/app'
import { config } from '../../shared/config'
import { sql } from '../../shared/db/client'
import { call, callApp, failingFields, newPlatformKey, newProduct, ok, startProcess } from '../helpers'

type Owner = Awaited<ReturnType<typeof newProduct>>
const publicApp = buildPublicApp()
const as = (owner: { token: string; productId: string }, method: string, path: string, body?: unknown) =>
  call(method, path, { token: owner.token, productId: owner.productId, body })

let owner: Owner
let domain: { id: string; name: string }
/** Oldest first: two keys send, so the product's log holds more than either key's own. */
const sent: string[] = []
let sendingKey: { key: string }
let fullKey: string

const send = async (key: string, subject: string) => {
  const result = await callApp(publicApp, 'http://public.test', 'POST', `/${owner.productId}/mail/emails`, {
    headers: { 'x-api-key': key }, body: { from: `a@${domain.name}`, to: ['b@example.org'], subject, text: 'hello' },
  })
  return ok(result, 'send').body.id as string
}
const publicGet = (key: string, path: string) =>
  callApp(publicApp, 'http://public.test', 'GET', `/${owner.productId}/mail${path}`, { headers: { 'x-api-key': key } })

beforeAll(async () => {
  owner = await newProduct('Mail console')
  domain = ok(await as(owner, 'POST', '/mail/domains', { name: `c${crypto.randomUUID().slice(0, 8)}.example.com` }), 'domain').body
  const full = ok(await as(owner, 'POST', '/mail/api-keys', { name: 'full', scope: 'full_access' }), 'key').body
  sendingKey = ok(await as(owner, 'POST', '/mail/api-keys', { name: 'send', scope: 'sending_access' }), 'key').body
  for (let i = 0; i < 3; i++) sent.push(await send(i === 1 ? sendingKey.key : full.key, `s${i}`))
  // The full key reads everything the product sent: the public answer the operations must match.
  fullKey = full.key
}, 30_000)

describe('mail_emails_list', () => {
  test('answers the product\'s emails newest first, whichever key sent them, as the public route does', async () => {
    const list = ok(await as(owner, 'GET', '/mail/emails'), 'list').body
    expect(list.object).toBe('list')
    expect(list.has_more).toBe(false)
    expect(list.data.map((e: any) => e.id)).toEqual([...sent].reverse())
    const publicList = (await publicGet(fullKey, '/emails')).body
    expect(list).toEqual(publicList)
    // The sending key alone sees only its own: the operation is not scoped to one key.
    expect((await publicGet(sendingKey.key, '/emails')).body.data.map((e: any) => e.id)).toEqual([sent[1]])
  })

  test('pages with limit and after (older) or before (newer)', async () => {
    const first = ok(await as(owner, 'GET', '/mail/emails?limit=2'), 'page 1').body
    expect([first.data.map((e: any) => e.id), first.has_more]).toEqual([[sent[2], sent[1]], true])
    const second = ok(await as(owner, 'GET', `/mail/emails?limit=2&after=${sent[1]}`), 'page 2').body
    expect([second.data.map((e: any) => e.id), second.has_more]).toEqual([[sent[0]], false])
    const newer = ok(await as(owner, 'GET', `/mail/emails?limit=1&before=${sent[0]}`), 'newer').body
    expect([newer.data.map((e: any) => e.id), newer.has_more]).toEqual([[sent[1]], true])
  })

  test('a list reads only the summary columns, never the bodies: an api worker whose database role may not read html or text still lists (and cannot get)', async () => {
    const role = `email_list_${crypto.randomUUID().slice(0, 8)}`
    const summaryColumns = 'id, product_id, domain_id, api_key_id, from_address, to_addresses, cc_addresses, bcc_addresses, reply_to, subject, created_at, last_event, last_event_at'
    await sql.unsafe(`create role ${role} login`)
    await sql.unsafe(`grant select, insert, update, delete on all tables in schema public to ${role}; grant usage on all sequences in schema public to ${role}`)
    await sql.unsafe(`revoke select on emails from ${role}; grant select (${summaryColumns}) on emails to ${role}`)
    const url = new URL(config.databaseUrl)
    url.username = role
    const api = await startProcess('api', { DATABASE_URL: url.toString() })
    try {
      const get = (path: string) => fetch(`${api.url}${path}`, { headers: { authorization: `Bearer ${owner.token}`, 'x-product-id': owner.productId } })
      const listed = await get('/mail/emails?limit=2')
      expect([listed.status, (await listed.json()).data?.map((e: any) => e.id)]).toEqual([200, [sent[2], sent[1]]])
      expect((await get(`/mail/emails/${sent[0]}`)).status).toBe(500) // the role is truly kept from the bodies
    } finally {
      await api.stop()
      await sql.unsafe(`drop owned by ${role}; drop role ${role}`)
    }
  }, 30_000)

  test('bad paging is a 400 naming the field', async () => {
    for (const [query, path] of [
      ['limit=0', '/query/limit'], ['limit=101', '/query/limit'], ['limit=2.5', '/query/limit'],
      [`after=${sent[0]}&before=${sent[1]}`, '/query/before'], [`after=${crypto.randomUUID()}`, '/query/after'],
      ['after=not-an-id', '/query/after'], [`after=${'x'.repeat(201)}`, '/query/after'], ['colour=red', '/query/colour'],
    ] as [string, string][]) {
      const result = await as(owner, 'GET', `/mail/emails?${query}`)
      expect([query, result.status]).toEqual([query, 400])
      expect(failingFields(result)).toContain(path)
    }
  })
})

describe('mail_emails_get', () => {
  test('answers the email with last_event and its events, as the public route does', async () => {
    const email = ok(await as(owner, 'GET', `/mail/emails/${sent[0]}`), 'get').body
    expect(email).toMatchObject({ object: 'email', id: sent[0], subject: 's0', to: ['b@example.org'], text: 'hello' })
    expect(email.events[0].type).toBe('queued')
    expect(email.last_event).toBe(email.events.at(-1).type)
    expect(email).toEqual((await publicGet(fullKey, `/emails/${sent[0]}`)).body)
  })

  test('an unknown id, a malformed id: 404', async () => {
    expect((await as(owner, 'GET', `/mail/emails/${crypto.randomUUID()}`)).status).toBe(404)
    expect((await as(owner, 'GET', '/mail/emails/12')).status).toBe(404)
  })
})

describe('who may read the log', () => {
  test('another product: its list is empty, and this product\'s email is 404', async () => {
    const other = await newProduct()
    expect(ok(await as(other, 'GET', '/mail/emails'), 'other list').body.data).toEqual([])
    const theirs = await as(other, 'GET', `/mail/emails/${sent[0]}`)
    expect([theirs.status, theirs.body.error]).toEqual([404, 'not_found'])
    // A session naming a product it is not a member of: the product itself is invisible.
    expect((await call('GET', '/mail/emails', { token: other.token, productId: owner.productId })).status).toBe(404)
    const cursor = await as(other, 'GET', `/mail/emails?after=${sent[0]}`)
    expect([cursor.status, failingFields(cursor)]).toEqual([400, ['/query/after']])
  })

  test('a platform key with the mail area reads it; one without the area is refused (403)', async () => {
    const mailKey = await newPlatformKey(owner, ['mail'])
    expect(ok(await call('GET', `/mail/emails/${sent[2]}`, { token: mailKey.key }), 'platform key').body.id).toBe(sent[2])
    const realtimeKey = await newPlatformKey(owner, ['realtime'])
    for (const path of ['/mail/emails', `/mail/emails/${sent[2]}`]) {
      const refused = await call('GET', path, { token: realtimeKey.key })
      expect([path, refused.status]).toEqual([path, 403])
    }
    expect((await call('GET', '/mail/emails')).status).toBe(401)
  })

  test('the operations are MCP tools of the same name', async () => {
    const mcp = (id: number, method: string, params?: unknown) => call('POST', '/mcp', {
      token: owner.token, productId: owner.productId, headers: { accept: 'application/json, text/event-stream' },
      body: { jsonrpc: '2.0', id, method, ...(params ? { params } : {}) },
    })
    const names = (ok(await mcp(1, 'tools/list'), 'tools/list').body.result.tools as { name: string }[]).map((t) => t.name)
    expect(names).toEqual(expect.arrayContaining(['mail_emails_list', 'mail_emails_get']))
    const listed = ok(await mcp(2, 'tools/call', { name: 'mail_emails_list', arguments: { query: { limit: 1 } } }), 'MCP list')
    expect(JSON.parse(listed.body.result.content[0].text).data.map((e: any) => e.id)).toEqual([sent[2]])
    const got = ok(await mcp(3, 'tools/call', { name: 'mail_emails_get', arguments: { path: { id: sent[1] } } }), 'MCP get')
    expect(JSON.parse(got.body.result.content[0].text).id).toBe(sent[1])
    expect(Number((await sql`select count(*) from emails where product_id = ${owner.productId}`)[0]!.count)).toBe(3)
  })
})
