// What a real worker answers to request bytes Bun's HTTP parser refuses before any application code runs
// (docs/architecture.md, "Requests the runtime refuses"), sent over a raw TCP socket: the runtime's bodyless answer,
// exactly as documented, then a closed connection; the same bytes percent-encoded reach the platform and get its body.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { connect } from 'node:net'
import { startProcess, type Worker } from '../helpers'

let api: Worker
beforeAll(async () => {
  api = await startProcess('api')
})
afterAll(async () => {
  await api.stop()
})

/** Writes `bytes` on a new connection; resolves with all it reads and whether the worker closed the connection. */
const exchange = (bytes: string, waitMs = 2000) =>
  new Promise<{ answer: string; closed: boolean }>((resolve) => {
    const socket = connect(api.port, '127.0.0.1', () => socket.write(Buffer.from(bytes, 'latin1')))
    let answer = ''
    const timer = setTimeout(() => {
      socket.destroy()
      resolve({ answer, closed: false })
    }, waitMs)
    socket.on('data', (chunk) => (answer += chunk.toString('latin1')))
    socket.on('close', () => {
      clearTimeout(timer)
      resolve({ answer, closed: true })
    })
    socket.on('error', () => {})
  })

const BODYLESS_505 = 'HTTP/1.1 505 HTTP Version Not Supported\r\nConnection: close\r\n\r\n'
const BODYLESS_400 = 'HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n'

describe('a request line the runtime cannot parse: a bodyless 505 and a closed connection, as documented', () => {
  const lines: [string, string][] = [
    ['a bare LF ending the request line', 'GET /healthz HTTP/1.1\nHost: a\r\n\r\n'],
    ['bare LFs throughout', 'GET /healthz HTTP/1.1\nHost: a\n\n'],
    ['a NUL in the request target', 'GET /a\0b HTTP/1.1\r\nHost: a\r\n\r\n'],
    ['another control character in the target', 'GET /a\x01b HTTP/1.1\r\nHost: a\r\n\r\n'],
    ['a space in the target', 'GET /a b HTTP/1.1\r\nHost: a\r\n\r\n'],
    ['a version other than HTTP/1.0 or 1.1', 'GET /healthz HTTP/1.2\r\nHost: a\r\n\r\n'],
  ]
  for (const [what, bytes] of lines) {
    test(what, async () => {
      expect(await exchange(bytes)).toEqual({ answer: BODYLESS_505, closed: true })
    })
  }
})

describe('other bytes the parser refuses: a bodyless 400, or the connection closed unanswered', () => {
  test('an HTTP/1.1 request without Host, a NUL in a header value, a non-numeric Content-Length: bodyless 400', async () => {
    expect(await exchange('GET /healthz HTTP/1.1\r\n\r\n')).toEqual({ answer: BODYLESS_400, closed: true })
    expect(await exchange('GET /healthz HTTP/1.1\r\nHost: a\r\nX: \0\r\n\r\n')).toEqual({ answer: BODYLESS_400, closed: true })
    expect(await exchange('POST /healthz HTTP/1.1\r\nHost: a\r\nContent-Length: x\r\n\r\n')).toEqual({ answer: BODYLESS_400, closed: true })
  })

  test('an unknown method: closed with no answer', async () => {
    expect(await exchange('FOO /healthz HTTP/1.1\r\nHost: a\r\n\r\n')).toEqual({ answer: '', closed: true })
  })
})

test('the same NUL percent-encoded reaches the platform: its JSON error body, and the worker serves on', async () => {
  const { answer } = await exchange('GET /a%00b HTTP/1.1\r\nHost: abcd\r\nConnection: close\r\n\r\n')
  expect(answer).toStartWith('HTTP/1.1 404 Not Found\r\n')
  expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toEqual({ error: 'not_found', message: 'No route GET /a%00b' })
  expect((await fetch(`${api.url}/healthz`)).status).toBe(200)
})
