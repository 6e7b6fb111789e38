// A production deployment (PLATFORM_ENV=production, WEBHOOK_ALLOW_PRIVATE_URLS unset) refuses a webhook URL whose name
// resolves to 127.0.0.1, through the API's real routes in a subprocess; and a name that resolved to a public address
// at create but to 127.0.0.1 when the webhooks process connects (DNS rebinding) is refused at the attempt, never
// connected to. Names are answered by a local DNS server (WEBHOOK_DNS_SERVERS): this machine has no internet, and a
// hosts-file entry would test the machine rather than the platform.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { sql } from '../../shared/db/client'
import { recordEvent } from '../../shared/webhooks/outbox'
import { eventually, newProduct, startProcess, type Worker } from '../helpers'
import { type ADnsServer, startADnsServer } from './dns-a-server'

let dns: ADnsServer
let api: Worker
let webhooks: Worker
beforeAll(async () => {
  dns = await startADnsServer()
  const production = {
    PLATFORM_ENV: 'production', WEBHOOK_ALLOW_PRIVATE_URLS: '', MAIL_DEV_VERIFY: '', WEBHOOK_DNS_SERVERS: `127.0.0.1:${dns.port}`,
  }
  ;[api, webhooks] = await Promise.all([
    startProcess('api', production),
    startProcess('webhooks', { ...production, WEBHOOK_RETRY_SCHEDULE: '100ms', WEBHOOK_POLL_MS: '50' }),
  ])
})
afterAll(async () => {
  await Promise.all([api?.stop(), webhooks?.stop()])
  dns?.close()
})

async function create(owner: { token: string; productId: string }, url: string) {
  const response = await fetch(`${api.url}/mail/webhooks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${owner.token}`, 'x-product-id': owner.productId, 'content-type': 'application/json' },
    body: JSON.stringify({ url, eventKinds: ['*'] }),
  })
  return { status: response.status, body: (await response.json()) as any }
}

test('in production a URL whose name resolves to 127.0.0.1 is refused 422 naming /body/url, as loopback literals and http are', async () => {
  dns.records.set('loopback.test', ['127.0.0.1'])
  dns.records.set('mixed.test', ['93.184.216.34', '10.0.0.7'])
  const owner = await newProduct()
  const named = await create(owner, 'https://loopback.test/hook')
  expect(named).toEqual({
    status: 422,
    body: expect.objectContaining({
      error: 'unprocessable',
      fields: [{ path: '/body/url', message: 'its host loopback.test must resolve, within 3000 ms, to public addresses only' }],
    }),
  })
  expect((await create(owner, 'https://mixed.test/hook')).status).toBe(422) // one private address among public ones
  expect((await create(owner, 'https://127.0.0.1/hook')).status).toBe(422)
  expect((await create(owner, 'http://public.test/hook')).status).toBe(400)
})

test('a name rebound to 127.0.0.1 after create is refused when the webhooks process connects, and nothing is connected to', async () => {
  // A listener where the rebound name points: it must never see a connection.
  const connections: string[] = []
  const listener = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: {
    open(socket) {
      connections.push(socket.remoteAddress)
      socket.end()
    },
    data() {},
  } })
  dns.records.set('rebind.test', ['93.184.216.34'])
  const owner = await newProduct()
  const created = await create(owner, `https://rebind.test:${listener.port}/hook`)
  expect(created.status).toBe(200)
  dns.records.set('rebind.test', ['127.0.0.1'])
  await sql.begin((tx) => recordEvent(tx, { productId: owner.productId, area: 'mail', kind: 'email.sent', data: {} }))
  const attempts = await eventually(async () => {
    const rows = await sql`
      select a.status_code, a.error from webhook_attempts a join webhook_deliveries d on d.id = a.delivery_id
      where d.endpoint_id = ${created.body.id} order by a.id`
    return rows.length === 2 && rows
  }, 8000, 'two attempts')
  listener.stop(true)
  expect(connections).toEqual([])
  expect([...attempts]).toEqual(Array(2).fill({ status_code: null, error: 'rebind.test does not resolve to allowed addresses only' }))
})
