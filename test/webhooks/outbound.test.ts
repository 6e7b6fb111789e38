// One outbound webhook request against a real HTTP receiver on loopback: the answer's status and first bytes recorded,
// no redirect followed, the exchange bounded in time and in bytes read (an answer that stalls after its status is cut
// short, and says so), and an address that is not allowed refused before any connection, as an IP literal or behind
// a name: loopback and http unless the deployment allows private URLs, the metadata address always. A failed connection
// is told in fixed words, never the runtime's message naming the address and port; a refused port is never connected to.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Server } from 'bun'
import net from 'node:net'
import { CONNECTION_FAILURES } from '../../shared/webhooks/attempt-errors'
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
      if (path === '/stalls') {
        // The status and a first chunk at once, then nothing for longer than the request may take.
        return new Response(new ReadableStream({ async start(controller) {
          controller.enqueue(new TextEncoder().encode('begun'))
          await Bun.sleep(3000)
          controller.close()
        } }))
      }
      return new Response('broken', { status: 500 })
    },
  })
})
afterAll(() => receiver.stop(true))

const request = (path: string, overrides: Partial<OutboundRequest> = {}): OutboundRequest => ({
  url: `http://127.0.0.1:${receiver.port}${path}`,
  headers: { 'content-type': 'application/json', 'webhook-id': 'msg_1' },
  body: '{"type":"webhook.test"}',
  timeoutMs: 1000,
  maxResponseBytes: 1024,
  allowPrivate: true,
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

test('an answer that stalls after its status is cut short by the timeout: its status and first bytes, and why', async () => {
  const result = await sendOutbound(request('/stalls', { timeoutMs: 400 }))
  expect([result.status, result.excerpt, result.error]).toEqual([200, 'begun', 'answer cut short: not complete within 400 ms'])
  expect(result.durationMs).toBeLessThan(1500)
})

test('an address that is not allowed is refused before any connection, as a literal or behind a name, without naming the address', async () => {
  const before = seen.length
  const https = (host: string) => `https://${host}:${receiver.port}/ok`
  const literal = await sendOutbound(request('/ok', { allowPrivate: false, url: https('127.0.0.1') }))
  expect([literal.status, literal.error, literal.address]).toEqual([null, '127.0.0.1 is not an allowed address', '127.0.0.1'])
  const named = await sendOutbound(request('/ok', { allowPrivate: false, url: https('localhost') }))
  expect([named.status, named.error]).toEqual([null, 'localhost does not resolve to allowed addresses only'])
  expect(named.address).toMatch(/^(127\.0\.0\.1|::1)$/)
  // Plain http only where private URLs are allowed; the metadata address not even then.
  const plain = await sendOutbound(request('/ok', { allowPrivate: false }))
  expect([plain.status, plain.error]).toEqual([null, 'http: is not allowed'])
  const metadata = await sendOutbound(request('/ok', { url: 'http://169.254.169.254/latest/meta-data/' }))
  expect([metadata.status, metadata.error]).toEqual([null, '169.254.169.254 is not an allowed address'])
  expect(seen.length).toBe(before)
})

test('a name that does not resolve: no status, and the same reason as a refused one (the difference only in detail, for logs)', async () => {
  const result = await sendOutbound(request('/ok', { url: 'http://no-such-host.invalid/hook' }))
  expect([result.status, result.error, result.detail]).toEqual([null, 'no-such-host.invalid does not resolve to allowed addresses only', 'does not resolve'])
  const none = await sendOutbound(request('/ok', { url: 'http://empty.test/hook', resolve: async () => [] }))
  expect([none.status, none.error, none.detail]).toEqual([null, 'empty.test does not resolve to allowed addresses only', 'resolves to no address'])
  const refused = await sendOutbound(request('/ok', { url: 'http://internal.test/hook', allowPrivate: false, resolve: async () => ['10.0.0.1'] }))
  expect([refused.error, refused.detail]).toEqual(['http: is not allowed', undefined])
  const internal = await sendOutbound(request('/ok', { url: 'https://internal.test/hook', allowPrivate: false, resolve: async () => ['10.0.0.1'] }))
  expect([internal.status, internal.error, internal.detail]).toEqual([null, 'internal.test does not resolve to allowed addresses only', 'resolves to a refused address'])
})

test('each checked address is tried in turn: a name whose first address refuses connections is reached on the next', async () => {
  const before = seen.length
  // Nothing listens on 127.0.0.2 (the receiver is bound to 127.0.0.1 only): that connection is refused.
  const url = `http://two.test:${receiver.port}/ok`
  const result = await sendOutbound(request('/ok', { url, resolve: async () => ['127.0.0.2', '127.0.0.1'] }))
  expect([result.status, result.excerpt, result.address]).toEqual([200, 'received', '127.0.0.1'])
  expect(seen.slice(before).map((r) => r.host)).toEqual([`two.test:${receiver.port}`])
})

/** A raw TCP server on loopback doing `onConnection` with each socket; its port. */
async function tcpServer(onConnection: (socket: net.Socket) => void): Promise<{ port: number; close: () => void }> {
  const server = net.createServer(onConnection)
  await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening))
  return { port: (server.address() as net.AddressInfo).port, close: () => server.close() }
}

describe('a failed connection is told in fixed words, never with an address, a port or the runtime\'s message', () => {
  const leaks = (result: { error?: string }, port: number) => [result.error?.includes('127.0.0.1'), result.error?.includes(String(port))]

  test('a closed port: connection refused (the raw error only in cause, for the logs)', async () => {
    const closed = await tcpServer(() => {})
    closed.close()
    const result = await sendOutbound(request('/ok', { url: `http://127.0.0.1:${closed.port}/ok` }))
    expect([result.status, result.error, ...leaks(result, closed.port)]).toEqual([null, CONNECTION_FAILURES.refused, false, false])
    expect(result.cause).toContain('ECONNREFUSED')
  })

  test('https to a port that does not speak TLS: TLS failed', async () => {
    const port = receiver.port!
    const result = await sendOutbound(request('/ok', { url: `https://127.0.0.1:${port}/ok` }))
    expect([result.status, result.error, ...leaks(result, port)]).toEqual([null, CONNECTION_FAILURES.tls, false, false])
    expect(result.cause).toMatch(/SSL|TLS|VERSION/)
  })

  test('a service that is not HTTP, or closes at once: not an HTTP answer, connection closed', async () => {
    const ssh = await tcpServer((socket) => socket.end('SSH-2.0-OpenSSH_9.6\r\n'))
    const closing = await tcpServer((socket) => socket.end())
    try {
      const banner = await sendOutbound(request('/ok', { url: `http://127.0.0.1:${ssh.port}/ok` }))
      expect([banner.status, banner.error, ...leaks(banner, ssh.port)]).toEqual([null, CONNECTION_FAILURES.notHttp, false, false])
      const closed = await sendOutbound(request('/ok', { url: `http://127.0.0.1:${closing.port}/ok` }))
      expect([closed.status, closed.error, ...leaks(closed, closing.port)]).toEqual([null, CONNECTION_FAILURES.closed, false, false])
    } finally {
      ssh.close()
      closing.close()
    }
  })

  test('a port outside the rule (an endpoint stored before it) is refused before any lookup or connection', async () => {
    let looked = 0
    const resolve = async () => (looked++, ['127.0.0.1'])
    for (const port of [22, 25, 5432, 6379]) {
      const result = await sendOutbound(request('/ok', { url: `http://hooks.test:${port}/ok`, resolve }))
      expect([result.status, result.error, result.cause]).toEqual([null, `port ${port} is not allowed`, undefined])
    }
    expect(looked).toBe(0)
  })
})
