// Domain verification against DNS: an API worker without MAIL_DEV_VERIFY looks the three TXT records up on a real (local)
// DNS server. A domain stays pending until checked, fails while a record is missing, and is verified once all three
// are published, however the server splits a long record.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { freePort, newProduct, ok, okResponse, startProcess, type Worker } from '../helpers'
import { startDnsServer, type DnsServer } from './dns-server'

let dns: DnsServer
let api: Worker
beforeAll(async () => {
  dns = await startDnsServer()
  api = await startProcess('api', {
    MAIL_DEV_VERIFY: '0', MAIL_DNS_SERVERS: `127.0.0.1:${dns.port}`, MAIL_DNS_TIMEOUT_MS: '1000',
  })
}, 30_000)
afterAll(async () => {
  await api?.stop()
  dns?.close()
})

test('pending until checked; failed while a record is missing; verified once all three are found; a removed record fails it again', async () => {
  const owner = await newProduct()
  const request = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(api.url + path, {
      method, headers: { authorization: `Bearer ${owner.token}`, 'x-product-id': owner.productId, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    return { status: response.status, body: (await response.json()) as any }
  }
  const name = `v${crypto.randomUUID().slice(0, 8)}.example.com`
  const created = ok(await request('POST', '/mail/domains', { name }), 'create domain')
  expect(created.body.status).toBe('pending')
  const [dkim, spf, ownership] = created.body.records as { name: string; value: string }[]
  expect(dkim!.value.length).toBeGreaterThan(255) // published as several strings: the check joins them

  dns.records.set(dkim!.name, [dkim!.value])
  dns.records.set(name, ['google-site-verification=abc', 'v=spf1 include:_spf.example.net include:spf.mail.localhost ~all'])
  const partial = await request('POST', `/mail/domains/${created.body.id}/verify`)
  expect(partial.body.status).toBe('failed')
  expect(partial.body.records.map((r: { status: string }) => r.status)).toEqual(['verified', 'verified', 'failed'])

  dns.records.set(ownership!.name, [ownership!.value])
  const verified = await request('POST', `/mail/domains/${created.body.id}/verify`)
  expect(verified.body.status).toBe('verified')
  expect(verified.body.verifiedAt).toBeString()
  expect(spf!.name).toBe(name)

  dns.records.delete(dkim!.name)
  const lost = await request('POST', `/mail/domains/${created.body.id}/verify`)
  expect([lost.body.status, lost.body.verifiedAt, lost.body.records[0].status]).toEqual(['failed', null, 'failed'])
})

test('a DNS server that never answers: the check ends within its timeout and the records count as not found', async () => {
  const owner = await newProduct()
  const silent = await freePort() // nothing listens there
  const worker = await startProcess('api', {
    MAIL_DEV_VERIFY: '0', MAIL_DNS_SERVERS: `127.0.0.1:${silent}`, MAIL_DNS_TIMEOUT_MS: '500',
  })
  try {
    const headers = { authorization: `Bearer ${owner.token}`, 'x-product-id': owner.productId, 'content-type': 'application/json' }
    const created = (await (await okResponse(await fetch(`${worker.url}/mail/domains`, { method: 'POST', headers, body: JSON.stringify({ name: 'silent.example.com' }) }), 'create domain')).json()) as any
    const started = Date.now()
    const checked = (await (await fetch(`${worker.url}/mail/domains/${created.id}/verify`, { method: 'POST', headers })).json()) as any
    expect(Date.now() - started).toBeLessThan(1900) // DB_TIMEOUT_MS bounds nothing here: the DNS timeout does
    expect(checked.status).toBe('failed')
  } finally {
    await worker.stop()
  }
})
