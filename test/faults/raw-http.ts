// Raw HTTP over a plain TCP socket, for requests no HTTP client will send (malformed Host, aborted uploads).
import { connect } from 'node:net'

export interface RawResponse {
  /** 0 when the server closed without answering. */
  status: number
  headers: Record<string, string>
  body: string
  /** Everything received, status line and headers included. */
  raw: string
}

/** Sends `text` as is on a new connection and reads until the server closes it (ask for `Connection: close`). */
export function rawRequest(port: number, text: string | Uint8Array, timeoutMs = 5000): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(text))
    const chunks: Buffer[] = []
    const timer = setTimeout(() => {
      socket.destroy()
      reject(new Error(`no complete answer within ${timeoutMs} ms; got: ${Buffer.concat(chunks).toString().slice(0, 200)}`))
    }, timeoutMs)
    socket.on('data', (chunk: Buffer) => chunks.push(chunk))
    socket.on('error', () => {}) // a reset after the answer is the server closing: judged by what arrived
    socket.on('close', () => {
      clearTimeout(timer)
      const raw = Buffer.concat(chunks).toString('utf8')
      const [head = '', ...rest] = raw.split('\r\n\r\n')
      const [statusLine = '', ...headerLines] = head.split('\r\n')
      const headers = Object.fromEntries(headerLines.map((line) => {
        const colon = line.indexOf(':')
        return [line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()]
      }))
      resolve({ status: Number(statusLine.split(' ')[1] ?? 0) || 0, headers, body: rest.join('\r\n\r\n'), raw })
    })
  })
}

/** Starts an upload that promises `declaredBytes`, sends `sentBytes` of it, then drops the connection. */
export async function abortedUpload(port: number, path: string, declaredBytes: number, sent: string): Promise<void> {
  await new Promise<void>((resolve) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write(`POST ${path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${declaredBytes}\r\n\r\n${sent}`)
      setTimeout(() => socket.destroy(), 200) // long enough for the server to start reading the body
    })
    socket.on('error', () => {})
    socket.on('close', () => resolve())
  })
}
