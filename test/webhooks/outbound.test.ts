// One outbound webhook request against a real HTTP receiver on loopback: the answer's status and first bytes recorded,
// no redirect followed, the exchange bounded in time and in bytes read, and an address that is not public refused
// before any connection (an IP literal, or a name that resolves to one) unless the deployment allows it.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { Server } from 'bun'
import { sendOutbound, type OutboundRequest } from '../../shared/webhooks/outbound'

let receiver: Server<undefined>
const seen: { path: string; host: string | null; body: string }[] = []

beforeAll(() => {
  receiver = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(request) {
      const path = new URL(request.url).pathname
      seen.push({ path, host: request.headers.get('host'), body: await request.text() })
      if (path === '/ok') return new Response('received')
      if (path === '/huge') return new Response('x'.repeat(4 << 20))
      if (path === '/moved') return new Response(null, { status: 302, headers: { location: 'http://169.254.169.254/latest/meta-data/' } })
      if (path === '/slow') return Bun.sleep(3000).then(() => new Response('late'))
      return new Response('broken', { status: 500 })
    },
  })
})
afterAll(() => receiver.stop(true))

// Loopback stands in for "not public" here; the real classification is the URL policy's.
const request = (path: string, overrides: Partial<OutboundRequest> = {}): OutboundRequest => ({
  url: `http://127.0.0.1:${receiver.port}${path}`,
  headers: { 'content-type': 'application/json', 'webhook-id': 'msg_1' },
  body: '{"type":"webhook.test"}',
  timeoutMs: 1000,
  maxResponseBytes: 1024,
  allowPrivate: true,
  isPublic: (ip) => !ip.startsWith('127.') && ip !== '::1',
  ...overrides,
})

test('a delivery is posted with its headers and body, and the status and the answer are recorded', async () => {
  const result = await sendOutbound(request('/ok'))
  expect([result.status, result.excerpt, result.address, result.error]).toEqual([200, 'received', '127.0.0.1', undefined])
  expect(seen.at(-1)).toEqual({ path: '/ok', host: `127.0.0.1:${receiver.port}`, body: '{"type":"webhook.test"}' })
  const failed = await sendOutbound(request('/other'))
  expect([failed.status, failed.excerpt]).toEqual([500, 'broken'])
})

test('only the first maxResponseBytes of an answer are read and kept', async () => {
  const started = performance.now()
  const result = await sendOutbound(request('/huge'))
  expect(result.status).toBe(200)
  expect(result.excerpt).toBe('x'.repeat(1024))
  expect(performance.now() - started).toBeLessThan(1000)
})

test('a redirect is not followed: it is a failure that records where it pointed', async () => {
  const before = seen.length
  const result = await sendOutbound(request('/moved'))
  expect(result.status).toBe(302)
  expect(result.error).toBe('redirect not followed (Location: http://169.254.169.254/latest/meta-data/)')
  expect(seen.length).toBe(before + 1)
})

test('a receiver that does not answer in time: no status, and the reason', async () => {
  const result = await sendOutbound(request('/slow', { timeoutMs: 300 }))
  expect([result.status, result.error]).toEqual([null, 'no answer within 300 ms'])
  expect(result.durationMs).toBeLessThan(1500)
})

test('an address that is not public is refused before any connection, as a literal or behind a name', async () => {
  const before = seen.length
  const literal = await sendOutbound(request('/ok', { allowPrivate: false }))
  expect([literal.status, literal.error, literal.address]).toEqual([null, '127.0.0.1 resolves to 127.0.0.1, which is not a public address', '127.0.0.1'])
  const named = await sendOutbound(request('/ok', { allowPrivate: false, url: `http://localhost:${receiver.port}/ok` }))
  expect(named.status).toBeNull()
  expect(named.error).toMatch(/^localhost resolves to (127\.0\.0\.1|::1), which is not a public address$/)
  expect(seen.length).toBe(before)
})

test('a name that does not resolve: no status, and the reason', async () => {
  const result = await sendOutbound(request('/ok', { url: 'http://no-such-host.invalid/hook' }))
  expect([result.status, result.error]).toEqual([null, 'no-such-host.invalid does not resolve'])
})
