// A local SMTP server that catches every message: plain SMTP on loopback (no STARTTLS: Bun's server-side TLS upgrade
// is unreliable), no authentication. `scripts/up` runs it so the mailer has somewhere to deliver; tests start their own.
//
//   bun run scripts/smtp-sink.ts            # listens on SMTP_SINK_PORT (59025), keeps mail in SMTP_SINK_DIR (.data/mail)
//
// Each message is one `.eml` file (the raw message as received, envelope in the first lines as X-Sink-* headers) and one
// JSON log line. A few recipient addresses answer like real servers do, so bounces and retries can be tried by hand:
// `bounce@…` is refused permanently (550) and `defer@…` temporarily (451).
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { SMTPServer } from 'smtp-server'

export interface CaughtMessage {
  from: string
  to: string[]
  raw: Buffer
}

type Answer = { code: number; message: string } | undefined

export interface SinkOptions {
  port: number
  host?: string
  /** Keep each message as an .eml file here. */
  dir?: string
  /** Called with every accepted message. */
  onMessage?: (message: CaughtMessage) => void
  /**
   * How the server answers a recipient: undefined accepts it; `{code, message}` refuses it (4xx temporary, 5xx
   * permanent). Default: `bounce@…` 550, `defer@…` 451, everyone else accepted.
   */
  answerRecipient?: (address: string) => { code: number; message: string } | undefined
  /** How the server answers the end of DATA, the same way (default: accept); a promise answers when it settles. */
  answerData?: (message: CaughtMessage) => Answer | Promise<Answer>
}

export const defaultAnswer = (address: string) => {
  const local = address.split('@')[0]!.toLowerCase()
  if (local === 'bounce') return { code: 550, message: '5.1.1 mailbox does not exist' }
  if (local === 'defer') return { code: 451, message: '4.3.0 try again later' }
  return undefined
}

const smtpError = (answer: { code: number; message: string }) => Object.assign(new Error(answer.message), { responseCode: answer.code })

export interface Sink {
  port: number
  close(): Promise<void>
}

export async function startSmtpSink(options: SinkOptions): Promise<Sink> {
  const answerRecipient = options.answerRecipient ?? defaultAnswer
  if (options.dir) mkdirSync(options.dir, { recursive: true })
  const server = new SMTPServer({
    secure: false,
    disabledCommands: ['STARTTLS', 'AUTH'],
    authOptional: true,
    logger: false,
    size: 50 * 1024 * 1024,
    onRcptTo(address, _session, callback) {
      const answer = answerRecipient(address.address)
      callback(answer ? smtpError(answer) : undefined)
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = []
      stream.on('data', (chunk: Buffer) => chunks.push(chunk))
      stream.on('end', () => {
        const message: CaughtMessage = {
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks),
        }
        void Promise.resolve(options.answerData?.(message)).then((answer) => {
          if (answer) return callback(smtpError(answer))
          accept(message)
          callback()
        })
      })
      const accept = (message: CaughtMessage) => {
        if (options.dir) {
          const name = `${new Date().toISOString().replace(/[:.]/g, '-')}-${Math.random().toString(36).slice(2, 8)}.eml`
          const envelope = `X-Sink-Mail-From: ${message.from}\r\nX-Sink-Rcpt-To: ${message.to.join(', ')}\r\n`
          writeFileSync(join(options.dir, name), Buffer.concat([Buffer.from(envelope), message.raw]))
          console.log(JSON.stringify({ at: new Date().toISOString(), msg: 'caught', file: name, from: message.from, to: message.to }))
        }
        options.onMessage?.(message)
      }
    },
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(options.port, options.host ?? '127.0.0.1', () => resolve())
  })
  server.removeAllListeners('error')
  // smtp-server reports each client connection's socket errors on the server: a sender that dies mid-session (a reset)
  // must not take the sink down with an unhandled 'error'.
  server.on('error', (error: Error) => {
    if (options.dir) console.log(JSON.stringify({ at: new Date().toISOString(), msg: 'connection error', error: error.message }))
  })
  const address = (server.server.address() as { port: number })
  return { port: address.port, close: () => new Promise<void>((resolve) => server.close(() => resolve())) }
}

if (import.meta.main) {
  const port = Number(process.env.SMTP_SINK_PORT ?? 59025)
  const dir = process.env.SMTP_SINK_DIR ?? join(import.meta.dir, '..', '.data', 'mail')
  const sink = await startSmtpSink({ port, dir })
  console.log(JSON.stringify({ at: new Date().toISOString(), msg: 'listening', port: sink.port, dir }))
  const stop = () => void sink.close().then(() => process.exit(0))
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
}
