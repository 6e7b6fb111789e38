// Mail on the platform API: sending domains (DKIM pair, DNS records, verification, delete) and sending API keys
// (lmk_): the spec's fields and rules, 404 for anything not the product's, and MCP tools of the same names.
import { describe, expect, test } from 'bun:test'
import { createPublicKey } from 'node:crypto'
import { sql } from '../../shared/db/client'
import { aadOf } from '../../shared/db/seal-secrets'
import { createDomain, deleteDomain } from '../../shared/mail/domains'
import { open } from '../../shared/secrets'
import { createMailKey, listMailKeys } from '../../services/api/mail/key-management'
import { call, newProduct, ok } from '../helpers'

type Owner = Awaited<ReturnType<typeof newProduct>>
const as = (owner: Owner, method: string, path: string, body?: unknown) => call(method, path, { token: owner.token, productId: owner.productId, body })
const domainName = () => `m${crypto.randomUUID().slice(0, 8)}.example.com`

describe('sending domains', () => {
  test('registering a domain makes an RSA 2048 DKIM pair: the public half in the DKIM record, the private half sealed and never returned', async () => {
    const owner = await newProduct()
    const name = domainName()
    const created = await as(owner, 'POST', '/mail/domains', { name: name.toUpperCase() })
    expect(created.status).toBe(200)
    expect(created.body).toMatchObject({ name, status: 'verified' }) // MAIL_DEV_VERIFY is on in tests
    const records = created.body.records as { record: string; type: string; name: string; value: string; status: string }[]
    expect(records.map((r) => [r.record, r.type, r.name])).toEqual([
      ['DKIM', 'TXT', `platform._domainkey.${name}`],
      ['SPF', 'TXT', name],
      ['Ownership', 'TXT', `_platform-verification.${name}`],
    ])
    const dkim = records[0]!.value
    expect(dkim).toStartWith('v=DKIM1; k=rsa; p=')
    const publicKey = createPublicKey({ key: Buffer.from(dkim.split('p=')[1]!, 'base64'), format: 'der', type: 'spki' })
    expect(publicKey.asymmetricKeyDetails?.modulusLength).toBe(2048)
    expect(JSON.stringify(created.body)).not.toContain('PRIVATE')
    const [row] = await sql`select secret_sealed from mail_domains where id = ${created.body.id}`
    expect(Buffer.from(row!.secret_sealed).toString()).not.toContain('PRIVATE KEY') // sealed at rest
    expect(open(Buffer.from(row!.secret_sealed), aadOf('mail_domains', created.body.id)).toString()).toContain('BEGIN PRIVATE KEY')
  })

  test('a name is validated and unique per product; get, list, verify and delete see only the product\'s domains', async () => {
    const owner = await newProduct()
    const other = await newProduct()
    const bad = await as(owner, 'POST', '/mail/domains', { name: 'not a domain' })
    expect(bad.status).toBe(400)
    expect(bad.body.fields[0].path).toBe('/body/name')
    const name = domainName()
    const { body: domain } = ok(await as(owner, 'POST', '/mail/domains', { name }), 'create domain')
    const again = await as(owner, 'POST', '/mail/domains', { name })
    expect(again.status).toBe(409)
    expect((await as(other, 'POST', '/mail/domains', { name })).status).toBe(200) // another product may register it too
    expect((await as(owner, 'GET', `/mail/domains/${domain.id}`)).body.name).toBe(name)
    expect((await as(owner, 'GET', '/mail/domains')).body).toMatchObject({ object: 'list', data: [{ id: domain.id }] })
    for (const path of [`/mail/domains/${domain.id}`, `/mail/domains/${domain.id}/verify`]) {
      expect((await as(other, path.endsWith('verify') ? 'POST' : 'GET', path)).status).toBe(404)
    }
    expect((await as(owner, 'GET', '/mail/domains/not-an-id')).status).toBe(404)
    expect((await as(owner, 'GET', `/mail/domains/${'x'.repeat(400)}`)).status).toBe(404) // however long, an id that names nothing
    expect((await as(owner, 'POST', `/mail/domains/${domain.id}/verify`)).body.status).toBe('verified')
    expect((await as(other, 'DELETE', `/mail/domains/${domain.id}`)).status).toBe(404)
    expect((await as(owner, 'DELETE', `/mail/domains/${domain.id}`)).body).toEqual({ id: domain.id, deleted: true })
    expect((await as(owner, 'GET', `/mail/domains/${domain.id}`)).status).toBe(404)
  })

  test('deleting a domain revokes the keys locked to it, in the same step', async () => {
    const owner = await newProduct()
    const { body: domain } = ok(await as(owner, 'POST', '/mail/domains', { name: domainName() }), 'create domain')
    const { body: locked } = ok(await as(owner, 'POST', '/mail/api-keys', { name: 'locked', scope: 'sending_access', domainId: domain.id }), 'create locked key')
    const { body: free } = ok(await as(owner, 'POST', '/mail/api-keys', { name: 'free', scope: 'sending_access' }), 'create free key')
    ok(await as(owner, 'DELETE', `/mail/domains/${domain.id}`), 'delete domain')
    expect((await as(owner, 'GET', '/mail/api-keys')).body.data.map((k: { id: string }) => k.id)).toEqual([free.id])
    expect(locked.id).toBeString()
  })

  test('a key created while its domain is being deleted is either refused (422) or revoked with it: never left active and unlocked', async () => {
    const owner = await newProduct()
    let refused = 0
    for (let round = 0; round < 8; round++) {
      const domain = await createDomain(owner.productId, domainName())
      const creates = Array.from({ length: 6 }, (_, i) => Bun.sleep(i).then(() => createMailKey(owner.productId, { name: `k${i}`, scope: 'sending_access', domainId: domain.id })))
      const results = await Promise.allSettled([...creates, Bun.sleep(2).then(() => deleteDomain(owner.productId, domain.id))])
      for (const result of results.slice(0, -1)) {
        if (result.status === 'rejected') {
          expect((result.reason as { status: number; details: unknown }).status).toBe(422)
          refused++
        }
      }
      expect(results.at(-1)!.status).toBe('fulfilled')
    }
    const unlocked = await sql`select id from mail_api_keys where product_id = ${owner.productId} and revoked_at is null and domain_id is null`
    expect(unlocked.length).toBe(0)
    expect(await listMailKeys(owner.productId)).toEqual([])
    expect(refused).toBeGreaterThan(0) // the race was really run: some creates came after the delete
  }, 30_000)
})

describe('sending API keys', () => {
  test('create answers the spec\'s fields with the secret once; only a digest is stored; list never shows secrets', async () => {
    const owner = await newProduct()
    const created = await as(owner, 'POST', '/mail/api-keys', { name: 'backend', scope: 'full_access' })
    expect(created.status).toBe(200)
    expect(Object.keys(created.body).sort()).toEqual(['createdAt', 'domainId', 'id', 'key', 'name', 'prefix', 'scope'])
    expect(created.body).toMatchObject({ name: 'backend', scope: 'full_access', domainId: null })
    expect(created.body.key).toMatch(/^lmk_[A-Za-z0-9_-]{43}$/) // 256 random bits
    expect(created.body.prefix).toBe(created.body.key.slice(0, 10))
    const [row] = await sql`select * from mail_api_keys where id = ${created.body.id}`
    expect(JSON.stringify(row)).not.toContain(created.body.key.slice(4))
    const list = await as(owner, 'GET', '/mail/api-keys')
    expect(list.body.data).toEqual([{ id: created.body.id, name: 'backend', scope: 'full_access', domainId: null, prefix: created.body.prefix, createdAt: created.body.createdAt }])
  })

  test('name 1..256 and a known scope are required (400 naming the field); a domainId must be one of the product\'s domains (422)', async () => {
    const owner = await newProduct()
    const other = await newProduct()
    const { body: foreign } = ok(await as(other, 'POST', '/mail/domains', { name: domainName() }), 'create the other product\'s domain')
    const cases: [unknown, number, string][] = [
      [{ name: '', scope: 'sending_access' }, 400, '/body/name'],
      [{ name: 'x'.repeat(257), scope: 'sending_access' }, 400, '/body/name'],
      [{ name: 'k', scope: 'everything' }, 400, '/body/scope'],
      [{ scope: 'sending_access' }, 400, '/body/name'],
      [{ name: 'k', scope: 'sending_access', domainId: foreign.id }, 422, '/body/domainId'],
      [{ name: 'k', scope: 'sending_access', domainId: 'nope' }, 422, '/body/domainId'],
    ]
    for (const [body, status, path] of cases) {
      const result = await as(owner, 'POST', '/mail/api-keys', body)
      expect([JSON.stringify(body), result.status, result.body.fields?.[0]?.path]).toEqual([JSON.stringify(body), status, path])
    }
    expect((await as(owner, 'GET', '/mail/api-keys')).body.data).toEqual([])
  })

  test('delete answers {id, revoked: true}; an unknown, foreign or malformed id is 404; a revoked key is no longer listed', async () => {
    const owner = await newProduct()
    const other = await newProduct()
    const { body: key } = ok(await as(owner, 'POST', '/mail/api-keys', { name: 'k', scope: 'sending_access' }), 'create key')
    expect((await as(other, 'DELETE', `/mail/api-keys/${key.id}`)).status).toBe(404)
    expect((await as(owner, 'DELETE', '/mail/api-keys/12')).status).toBe(404)
    expect((await as(owner, 'DELETE', `/mail/api-keys/${crypto.randomUUID()}`)).status).toBe(404)
    expect((await as(owner, 'DELETE', `/mail/api-keys/${key.id}`)).body).toEqual({ id: key.id, revoked: true })
    expect((await as(owner, 'DELETE', `/mail/api-keys/${key.id}`)).status).toBe(404)
    expect((await as(owner, 'GET', '/mail/api-keys')).body.data).toEqual([])
  })

  test('every Mail operation is an MCP tool of the same name, and works as one', async () => {
    const owner = await newProduct()
    const mcp = (id: number, method: string, params?: unknown) => call('POST', '/mcp', {
      token: owner.token, productId: owner.productId, headers: { accept: 'application/json, text/event-stream' },
      body: { jsonrpc: '2.0', id, method, ...(params ? { params } : {}) },
    })
    const names = (ok(await mcp(1, 'tools/list'), 'MCP tools/list').body.result.tools as { name: string }[]).map((t) => t.name)
    for (const name of ['mail_domain_create', 'mail_domain_list', 'mail_domain_get', 'mail_domain_verify', 'mail_domain_delete', 'mail_apikey_create', 'mail_apikey_list', 'mail_apikey_delete', 'mail_template_create', 'mail_template_list', 'mail_template_get', 'mail_template_update', 'mail_template_delete']) {
      expect(names).toContain(name)
    }
    const created = ok(await mcp(2, 'tools/call', { name: 'mail_apikey_create', arguments: { body: { name: 'agent', scope: 'sending_access' } } }), 'MCP mail_apikey_create')
    const key = JSON.parse(created.body.result.content[0].text)
    expect(key.key).toStartWith('lmk_')
    expect((await as(owner, 'GET', '/mail/api-keys')).body.data[0].id).toBe(key.id)
  })
})
