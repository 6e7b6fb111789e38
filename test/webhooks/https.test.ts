// An https webhook request connects to the checked address and verifies the certificate against the URL's name: a
// receiver on 127.0.0.1 with a self-signed certificate for `hooks.test` (made here with openssl), the name resolved by
// a resolver given to the request. Trusted, the right name passes; an untrusted certificate or another name fails.
// One connection per request: no keep-alive socket outlives the address check that allowed it.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Server } from 'bun'
import { CONNECTION_FAILURES } from '../../shared/webhooks/attempt-errors'
import { sendOutbound, type OutboundRequest } from '../../shared/webhooks/outbound'

let dir: string
let cert: string
let server: Server<undefined>
const seen: { host: string | null; connection: string | null }[] = []

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'webhook-tls-'))
  const made = Bun.spawnSync(['openssl', 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=hooks.test',
    '-addext', 'subjectAltName=DNS:hooks.test', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { stderr: 'pipe' })
  if (made.exitCode !== 0) throw new Error(`openssl: ${made.stderr.toString()}`)
  cert = readFileSync(join(dir, 'cert.pem'), 'utf8')
  server = Bun.serve({
    port: 0, hostname: '127.0.0.1',
    tls: { cert, key: readFileSync(join(dir, 'key.pem'), 'utf8') },
    fetch(request) {
      seen.push({ host: request.headers.get('host'), connection: request.headers.get('connection') })
      return new Response('secure')
    },
  })
})
afterAll(() => {
  server?.stop(true)
  rmSync(dir, { recursive: true, force: true })
})

const request = (host: string, overrides: Partial<OutboundRequest> = {}): OutboundRequest => ({
  url: `https://${host}:${server.port}/hook`, headers: { 'content-type': 'application/json' }, body: '{}',
  timeoutMs: 3000, maxResponseBytes: 1024, allowPrivate: true, ca: cert,
  resolve: async () => ['127.0.0.1'], ...overrides,
})

test('the certificate is verified against the name while the connection goes to the checked address', async () => {
  const result = await sendOutbound(request('hooks.test'))
  expect([result.status, result.excerpt, result.address, result.error]).toEqual([200, 'secure', '127.0.0.1', undefined])
  expect(seen.at(-1)).toEqual({ host: `hooks.test:${server.port}`, connection: 'close' })
})

test('a certificate for another name fails, and so does one no trusted authority signed', async () => {
  const before = seen.length
  const wrongName = await sendOutbound(request('other.test'))
  expect(wrongName.status).toBeNull()
  expect(wrongName.error).toMatch(/certificate|altname|hostname/i)
  expect(wrongName.error).toBe(CONNECTION_FAILURES.tlsName) // fixed words; the runtime's own in cause, for the logs
  const untrusted = await sendOutbound(request('hooks.test', { ca: undefined }))
  expect(untrusted.status).toBeNull()
  expect(untrusted.error).toMatch(/certificate|self.signed/i)
  expect(untrusted.error).toBe(CONNECTION_FAILURES.tlsTrust)
  expect(seen.length).toBe(before)
})

test('where private addresses are not allowed, the name resolving to 127.0.0.1 is refused before any connection', async () => {
  const before = seen.length
  const refused = await sendOutbound(request('hooks.test', { allowPrivate: false }))
  expect([refused.status, refused.error, refused.address]).toEqual([null, 'hooks.test does not resolve to allowed addresses only', '127.0.0.1'])
  expect(seen.length).toBe(before)
})
