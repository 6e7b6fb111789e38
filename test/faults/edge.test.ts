// A hostile HTTP edge, as raw sockets against real `api` and `public` workers: malformed Host headers, short hosts,
// odd request lines, aborted uploads and oversized integers. No response may carry a stack, a path or the runtime's
// error page; what the app routes is what it logs; malformed requests get the platform's JSON error body.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { okResponse, startProcess, type Worker } from '../helpers'
import { abortedUpload, rawRequest, type RawResponse } from './raw-http'

let api: Worker
let pub: Worker

beforeAll(async () => {
  ;[api, pub] = await Promise.all([
    startProcess('api', { LOG_REQUESTS: '1' }, { logs: true }),
    startProcess('public', { LOG_REQUESTS: '1' }, { logs: true }),
  ])
}, 30_000)

afterAll(async () => {
  await Promise.all([api?.stop(), pub?.stop()])
})

const get = (path: string, host: string) => `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`

/** Nothing about the server's insides: no working directory, no source or module paths, no stack frames. */
function expectNoDisclosure(response: RawResponse) {
  expect(response.raw).not.toContain(process.cwd())
  expect(response.raw).not.toContain('node_modules')
  expect(response.raw).not.toMatch(/\n\s+at /)
  expect(response.raw).not.toMatch(/<html/i)
}

/** Polls the worker's log for a line, since the log line is written after the answer. */
async function logLine(worker: Worker, match: (line: Record<string, any>) => boolean): Promise<Record<string, any>> {
  for (const deadline = Date.now() + 5000; Date.now() < deadline; await Bun.sleep(20)) {
    const found = worker.logs().find(match)
    if (found) return found
  }
  throw new Error('no matching log line')
}

const MALFORMED_HOSTS = ['a b', 'a/b', 'a?b', 'a#b', 'a%41', 'a:99999', 'a:x', 'a:', '[', '[1:2]', '', 'ü.example', 'a\tb']

describe.each([['api'], ['public']])('%s worker', (name) => {
  const worker = () => (name === 'api' ? api : pub)

  test.each(MALFORMED_HOSTS)('Host %p: 400 invalid_host in the platform body, logged, nothing disclosed', async (host) => {
    const path = `/healthz?probe=${encodeURIComponent(host)}-${Math.random()}`
    const response = await rawRequest(worker().port, get(path, host))
    expect(response.status).toBe(400)
    expect(response.headers['content-type']).toContain('application/json')
    expect(JSON.parse(response.body)).toMatchObject({ error: 'invalid_host', message: expect.any(String) })
    expect(response.headers['x-request-id']).toBeTruthy()
    expectNoDisclosure(response)
    const line = await logLine(worker(), (l) => l.msg === 'request' && l.requestId === response.headers['x-request-id'])
    expect(line).toMatchObject({ level: 'info', status: 400, path: null, host: expect.any(String), url: expect.any(String) })
  })

  test('a Host shorter than four characters routes, answers and logs the path that was sent', async () => {
    const shifted = await rawRequest(worker().port, get('/xy/healthz', 'a'))
    expect(shifted.status).toBe(404) // not /healthz: the router saw /xy/healthz
    expect(JSON.parse(shifted.body)).toMatchObject({ error: 'not_found', message: 'No route GET /xy/healthz' })
    const line = await logLine(worker(), (l) => l.requestId === shifted.headers['x-request-id'])
    expect(line).toMatchObject({ path: '/xy/healthz', status: 404 })
    const direct = await rawRequest(worker().port, get('/healthz', 'ab'))
    expect(direct.status).toBe(200)
    expect(JSON.parse(direct.body).status).toBe('ok')
  })

  test('HTTP/1.0 without a Host is served (load-balancer health checks send such requests)', async () => {
    const response = await rawRequest(worker().port, 'GET /healthz HTTP/1.0\r\n\r\n')
    expect(response.status).toBe(200)
  })

  test('odd request lines and framing: a 4xx (the platform body when the request reaches the app), never a 5xx or a disclosure', async () => {
    const odd = [
      'GET /%ff%fe/..%2f..%2fetc HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n',
      'GET /../../etc/passwd HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n',
      'GET /ü HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n',
      'OPTIONS * HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n',
      'GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n',
      'hello\r\n\r\n',
      'GET ?a=1 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n',
      'POST /x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n',
      'POST /x HTTP/1.1\r\nHost: localhost\r\nContent-Length: abc\r\nConnection: close\r\n\r\n',
      `GET /${'a'.repeat(20_000)} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`,
      `GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: ${'b'.repeat(100_000)}\r\nConnection: close\r\n\r\n`,
    ]
    for (const text of odd) {
      const response = await rawRequest(worker().port, text)
      expect(response.status === 0 || (response.status >= 400 && response.status < 500)).toBe(true)
      expectNoDisclosure(response)
      if (response.body) expect(JSON.parse(response.body).error).toEqual(expect.any(String))
    }
    expect((await rawRequest(worker().port, get('/healthz', 'localhost'))).status).toBe(200) // still serving
  })
})

test('a route\'s own request id is the one its response carries and its request log line names, a new one per request', async () => {
  // The API's operation routes and the public product-key routes make their id themselves (it is in their error logs).
  const cases = [
    { worker: api, path: '/mail/domains', method: 'GET' },
    { worker: pub, path: `/${crypto.randomUUID()}/realtime/messages`, method: 'POST' },
  ]
  for (const { worker, path, method } of cases) {
    const ids: string[] = []
    for (let i = 0; i < 2; i++) {
      const response = await fetch(`${worker.url}${path}`, { method, headers: { 'content-type': 'application/json' }, ...(method === 'POST' ? { body: '{}' } : {}) })
      expect(response.status).toBe(401)
      const id = response.headers.get('x-request-id')!
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/)
      const line = await logLine(worker, (l) => l.msg === 'request' && l.requestId === id)
      expect(line).toMatchObject({ path, status: 401 })
      ids.push(id)
    }
    expect(ids[0]).not.toBe(ids[1])
  }
})

test('a client that drops its upload mid-body is logged as a client abort (499, info), not as a server error', async () => {
  await abortedUpload(api.port, '/auth/signup', 100_000, '{"email":"half')
  const line = await logLine(api, (l) => l.msg === 'request' && l.path === '/auth/signup' && l.status === 499)
  expect(line).toMatchObject({ level: 'info', aborted: true })
})

test('an integer beyond 2^53 - 1 in a JSON body is a 400 naming the field, not a silently rounded value', async () => {
  const body = '{"email":"big@example.test","password":"correct horse battery","name":9007199254740993}'
  const response = await rawRequest(api.port,
    `POST /auth/signup HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`)
  expect(response.status).toBe(400)
  expect(JSON.parse(response.body).fields).toEqual([{ path: '/body/name', message: expect.stringContaining('2^53') }])
})

test('malformed tools/call params answer JSON-RPC -32602 (invalid params), not -32603', async () => {
  const signup = await okResponse(await fetch(`${api.url}/auth/signup`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: `mcp-${crypto.randomUUID()}@example.test`, password: 'correct horse battery' }),
  }), 'sign up')
  const { token } = (await signup.json()) as { token: string }
  for (const params of [{ name: 'organization_products_list', arguments: 'not an object' }, { arguments: {} }]) {
    const response = await fetch(`${api.url}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params }),
    })
    const reply = (await response.json()) as { id: number; error?: { code: number } }
    expect(reply).toMatchObject({ id: 7, error: { code: -32602 } })
  }
})

test('nothing in this file made either worker log an error', () => {
  expect([...api.logs(), ...pub.logs()].filter((line) => line.level === 'error')).toEqual([])
})
