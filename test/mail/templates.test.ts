// Templates (platform REST and MCP, and the public surface for full_access keys), sends that fill a template in,
// and domain management on the public surface: what each key scope may do there.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { call, newProduct, ok } from '../helpers'
import { manage, type Pair, pub, startPublicPair } from '../realtime/public-helpers'

type Owner = Awaited<ReturnType<typeof newProduct>>
const as = (owner: Owner, method: string, path: string, body?: unknown) => call(method, path, { token: owner.token, productId: owner.productId, body })
const domainName = () => `t${crypto.randomUUID().slice(0, 8)}.example.com`

let pair: Pair
let owner: Owner
let domain: { id: string; name: string }
let full: string
let sending: string
beforeAll(async () => {
  pair = await startPublicPair({ MAIL_SEND_RATE_PER_SECOND: '1000' })
  owner = await newProduct('Templates')
  domain = await manage(owner, 'POST', '/mail/domains', { name: domainName() })
  full = (await manage(owner, 'POST', '/mail/api-keys', { name: 'full', scope: 'full_access' })).key
  sending = (await manage(owner, 'POST', '/mail/api-keys', { name: 'sending', scope: 'sending_access' })).key
}, 30_000)
afterAll(() => pair?.stop())

const base = () => `/${owner.productId}/mail`

describe('templates on the platform API', () => {
  test('create lists the variables it uses; names are unique; get, list, update and delete see only the product\'s', async () => {
    const other = await newProduct()
    const created = await manage(owner, 'POST', '/mail/templates', { name: 'welcome', subject: 'Hi {{ name }}', html: '<p>{{name}}, your code is {{code}}</p>' })
    expect(created).toMatchObject({ name: 'welcome', text: null, variables: ['name', 'code'] })
    expect((await as(owner, 'POST', '/mail/templates', { name: 'welcome', subject: 's', html: 'h' })).status).toBe(409)
    const bad = await as(owner, 'POST', '/mail/templates', { name: '', subject: 's', html: 'h' })
    expect([bad.status, bad.body.fields[0].path]).toEqual([400, '/body/name'])
    expect((await as(other, 'GET', `/mail/templates/${created.id}`)).status).toBe(404)
    expect((await as(owner, 'GET', '/mail/templates/nope')).status).toBe(404)
    const updated = await manage(owner, 'PATCH', `/mail/templates/${created.id}`, { text: 'Hi {{name}} ({{plan}})' })
    expect([updated.subject, updated.text, updated.variables]).toEqual(['Hi {{ name }}', 'Hi {{name}} ({{plan}})', ['name', 'code', 'plan']])
    expect((await manage(owner, 'GET', '/mail/templates')).data.map((t: { id: string }) => t.id)).toContain(created.id)
    expect((await as(other, 'DELETE', `/mail/templates/${created.id}`)).status).toBe(404)
    expect((await manage(owner, 'DELETE', `/mail/templates/${created.id}`))).toEqual({ id: created.id, deleted: true })
    expect((await as(owner, 'GET', `/mail/templates/${created.id}`)).status).toBe(404)
  })
})

describe('sending with a template', () => {
  test('variables fill the template: HTML-escaped in its html, as they are in its subject and text; the body\'s subject wins', async () => {
    const template = await manage(owner, 'POST', '/mail/templates', {
      name: `receipt-${crypto.randomUUID()}`, subject: 'Receipt for {{name}}', html: '<p>Thanks {{name}}: {{amount}}</p>', text: 'Thanks {{name}}: {{amount}}',
    })
    const sent = await pub(pair.a, 'POST', `${base()}/emails`, {
      key: sending, body: { from: `a@${domain.name}`, to: 'x@example.org', template: { id: template.id, variables: { name: '<b>Ann</b> & co', amount: 12.5 } } },
    })
    expect(sent.status).toBe(200)
    const email = (await pub(pair.b, 'GET', `${base()}/emails/${sent.body.id}`, { key: sending })).body
    expect([email.subject, email.html, email.text]).toEqual([
      'Receipt for <b>Ann</b> & co', '<p>Thanks &lt;b&gt;Ann&lt;/b&gt; &amp; co: 12.5</p>', 'Thanks <b>Ann</b> & co: 12.5',
    ])
    const overridden = ok(await pub(pair.a, 'POST', `${base()}/emails`, {
      key: sending, body: { from: `a@${domain.name}`, to: 'x@example.org', subject: 'Your receipt', template: { id: template.id, variables: { name: 'A', amount: 1 } } },
    }), 'send with a subject of its own')
    expect((await pub(pair.b, 'GET', `${base()}/emails/${overridden.body.id}`, { key: sending })).body.subject).toBe('Your receipt')
  })

  test('a missing variable is 422 naming it; an unknown template is 422 naming template.id; html with a template is 400', async () => {
    const template = await manage(owner, 'POST', '/mail/templates', { name: `t-${crypto.randomUUID()}`, subject: 'Hi {{name}}', html: '{{greeting}} {{name}}' })
    const send = (body: Record<string, unknown>) => pub(pair.a, 'POST', `${base()}/emails`, { key: sending, body: { from: `a@${domain.name}`, to: 'x@example.org', ...body } })
    const missing = await send({ template: { id: template.id, variables: { name: 'Ann' } } })
    expect([missing.status, missing.body.fields.map((f: { path: string }) => f.path)]).toEqual([422, ['/body/template/variables/greeting']])
    for (const id of [crypto.randomUUID(), 'nope']) {
      const unknown = await send({ template: { id, variables: {} } })
      expect([unknown.status, unknown.body.fields[0].path]).toEqual([422, '/body/template/id'])
    }
    const both = await send({ html: '<p>x</p>', template: { id: template.id, variables: { name: 'A', greeting: 'Hi' } } })
    expect([both.status, both.body.fields[0].path]).toEqual([400, '/body/html'])
    const badName = await send({ template: { id: template.id, variables: { 'not-a-name': 'x' } } })
    expect([badName.status, badName.body.fields[0].path]).toEqual([400, '/body/template/variables/not-a-name'])
  })

  test('a subject the variables make longer than 998 characters is 422 naming the variables; their line breaks become spaces', async () => {
    const template = await manage(owner, 'POST', '/mail/templates', { name: `t-${crypto.randomUUID()}`, subject: 'Hi {{name}}', html: '<p>{{name}}</p>' })
    const send = (name: string) => pub(pair.a, 'POST', `${base()}/emails`, { key: sending, body: { from: `a@${domain.name}`, to: 'x@example.org', template: { id: template.id, variables: { name } } } })
    const refused = await send('A'.repeat(996))
    expect([refused.status, refused.body.fields[0].path]).toEqual([422, '/body/template/variables'])
    expect(refused.body.fields[0].message).toContain('998')
    expect((await send('A'.repeat(995))).status).toBe(200) // exactly 998 characters
    const folded = ok(await send('Ann\r\nBcc: victim@example.org'), 'send with a line break in the variable')
    const email = await pub(pair.a, 'GET', `${base()}/emails/${folded.body.id}`, { key: sending })
    expect(email.body.subject).toBe('Hi Ann Bcc: victim@example.org')
  })
})

describe('domains and templates on the public surface', () => {
  test('a sending_access key gets 401 restricted_api_key on every domain and template route', async () => {
    const routes: [string, string, unknown?][] = [
      ['POST', '/domains', { name: domainName() }], ['GET', '/domains'], ['GET', `/domains/${domain.id}`],
      ['POST', `/domains/${domain.id}/verify`], ['DELETE', `/domains/${domain.id}`],
      ['POST', '/templates', { name: 'x', subject: 's', html: 'h' }], ['GET', '/templates'],
    ]
    for (const [method, path, body] of routes) {
      const result = await pub(pair.a, method, `${base()}${path}`, { key: sending, body })
      expect([method, path, result.status, result.body.error]).toEqual([method, path, 401, 'restricted_api_key'])
    }
  })

  test('a full_access key registers, lists, verifies and deletes domains, and manages templates, in the public shape', async () => {
    const name = domainName()
    const created = await pub(pair.a, 'POST', `${base()}/domains`, { key: full, body: { name } })
    expect(created.body).toMatchObject({ object: 'domain', name, status: 'verified' })
    expect(created.body.records.map((r: { record: string }) => r.record)).toEqual(['DKIM', 'SPF', 'Ownership'])
    expect((await pub(pair.b, 'GET', `${base()}/domains`, { key: full })).body.data.map((d: { id: string }) => d.id)).toContain(created.body.id)
    expect((await pub(pair.b, 'POST', `${base()}/domains/${created.body.id}/verify`, { key: full })).body.status).toBe('verified')
    const bad = await pub(pair.a, 'POST', `${base()}/domains`, { key: full, body: { name: 'nope' } })
    expect([bad.status, bad.body.fields[0].path]).toEqual([400, '/body/name'])
    expect((await pub(pair.b, 'DELETE', `${base()}/domains/${created.body.id}`, { key: full })).body).toEqual({ object: 'domain', id: created.body.id, deleted: true })
    expect((await pub(pair.b, 'GET', `${base()}/domains/${created.body.id}`, { key: full })).status).toBe(404)

    const template = await pub(pair.a, 'POST', `${base()}/templates`, { key: full, body: { name: `pub-${crypto.randomUUID()}`, subject: 'Hi {{n}}', html: '<p>{{n}}</p>' } })
    expect(template.body).toMatchObject({ object: 'template', variables: ['n'] })
    const patched = await pub(pair.b, 'PATCH', `${base()}/templates/${template.body.id}`, { key: full, body: { subject: 'Hello {{n}}' } })
    expect(patched.body.subject).toBe('Hello {{n}}')
    expect((await pub(pair.a, 'DELETE', `${base()}/templates/${template.body.id}`, { key: full })).body.deleted).toBe(true)
    expect((await pub(pair.a, 'GET', `${base()}/templates/${template.body.id}`, { key: full })).status).toBe(404)
  })

  test("every Mail list, on the public surface and the platform API, is Resend's list object: object, has_more, data, in that order", async () => {
    const lists = [
      ...['/emails', '/domains', '/templates'].map(async (path) => (await pub(pair.a, 'GET', `${base()}${path}`, { key: full })).body),
      ...['/mail/domains', '/mail/api-keys', '/mail/templates'].map((path) => manage(owner, 'GET', path)),
    ]
    for (const body of await Promise.all(lists)) expect(Object.keys(body)).toEqual(['object', 'has_more', 'data'])
  })

  test('a full_access key locked to a domain sees and verifies that domain only, and cannot register or delete domains', async () => {
    const locked = (await manage(owner, 'POST', '/mail/api-keys', { name: 'locked', scope: 'full_access', domainId: domain.id })).key
    const other = await manage(owner, 'POST', '/mail/domains', { name: domainName() })
    expect((await pub(pair.a, 'GET', `${base()}/domains`, { key: locked })).body.data.map((d: { id: string }) => d.id)).toEqual([domain.id])
    expect((await pub(pair.a, 'GET', `${base()}/domains/${domain.id}`, { key: locked })).status).toBe(200)
    expect((await pub(pair.a, 'GET', `${base()}/domains/${other.id}`, { key: locked })).status).toBe(404)
    expect((await pub(pair.a, 'POST', `${base()}/domains/${other.id}/verify`, { key: locked })).status).toBe(404)
    for (const [method, path, body] of [['POST', '/domains', { name: domainName() }], ['DELETE', `/domains/${domain.id}`]] as const) {
      const result = await pub(pair.a, method, `${base()}${path}`, { key: locked, body })
      expect([result.status, result.body.error]).toEqual([401, 'restricted_api_key'])
    }
  })
})

test('malformed bodies on every public Mail route with a body: 400 naming the field, never a 500', async () => {
  const template = ok(await pub(pair.a, 'POST', `${base()}/templates`, { key: full, body: { name: `m-${crypto.randomUUID()}`, subject: 's', html: 'h' } }), 'create template').body
  const routes: [string, string][] = [['POST', '/emails'], ['POST', '/domains'], ['POST', '/templates'], ['PATCH', `/templates/${template.id}`]]
  for (const [method, path] of routes) {
    const label = `${method} ${path}`
    const broken = await pub(pair.a, method, `${base()}${path}`, { key: full, raw: '{"name": ', headers: { 'content-type': 'application/json' } })
    expect([label, broken.status, broken.body.error]).toEqual([label, 400, 'invalid_json'])
    for (const wrong of [[], 'text', 42, null]) {
      const result = await pub(pair.a, method, `${base()}${path}`, { key: full, body: wrong })
      expect([label, result.status, result.body.fields?.length > 0]).toEqual([label, 400, true])
    }
    const extra = await pub(pair.a, method, `${base()}${path}`, { key: full, body: { from: `a@${domain.name}`, definitely_not_a_field: 1 } })
    expect([label, extra.status, extra.body.fields.map((f: { path: string }) => f.path)]).toEqual([label, 400, expect.arrayContaining(['/body/definitely_not_a_field'])])
  }
})
