// The mailer records what happened, exactly, against real mailer processes and SMTP servers started here: a mailer
// killed (SIGKILL) while the server holds its DATA reply never records `sent`, and the next mailer delivers the email
// once with the same Message-ID; SIGTERM waits for an attempt in flight and records it, and stops waiting after
// MAILER_SMTP_TIMEOUT_MS for one that never ends (a server dripping a multi-line reply, so no socket timeout ends it
// first); MAIL_DEV_VERIFY is refused at start-up in production; credentials in SMTP_URL require STARTTLS (never AUTH in
// clear); and Idempotency-Key is scoped to the sending API key.
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test'
import { type AddressInfo, createServer } from 'node:net'
import { createTransport } from 'nodemailer'
import { SMTPServer } from 'smtp-server'
import { startSmtpSink, type CaughtMessage } from '../../scripts/smtp-sink'
import { freePort, newProduct, startProcess, type Worker } from '../helpers'
import { manage, type Pair, pub, startPublicPair } from '../realtime/public-helpers'
import { emailReader } from '../mail/email-reader'

let pair: Pair
let owner: Awaited<ReturnType<typeof newProduct>>
let domain: string
let key: string

beforeAll(async () => {
  pair = await startPublicPair({ MAIL_SEND_RATE_PER_SECOND: '1000' })
  owner = await newProduct('Mailer delivery')
  domain = (await manage(owner, 'POST', '/mail/domains', { name: `m${crypto.randomUUID().slice(0, 8)}.example.com` })).name
  key = (await manage(owner, 'POST', '/mail/api-keys', { name: 'sender', scope: 'full_access' })).key
}, 30_000)
afterAll(() => pair?.stop())

/** Every mailer a test started: one a failing test left running is stopped after it (it would take other tests' emails). */
const mailers: Worker[] = []
afterEach(async () => {
  for (const mailer of mailers.splice(0)) if (mailer.proc.exitCode === null && mailer.proc.signalCode === null) await mailer.stop('SIGKILL')
})
async function startMailer(smtpUrl: string, env: Record<string, string> = {}): Promise<Worker> {
  return startProcess('mailer', {
    SMTP_URL: smtpUrl, MAILER_POLL_MS: '50', MAIL_LEASE_MS: '1500', MAIL_RETRY_BASE_MS: '200',
    MAILER_SMTP_TIMEOUT_MS: '20000', ...env,
  }).then((mailer) => (mailers.push(mailer), mailer))
}
/**
 * A server that holds (never answers, or answers late) the end of DATA for this file's marked messages only: emails other
 * test files left queued in the same database go through at once, so they never fill a mailer's batch with held attempts.
 */
const MARK = `hold-${crypto.randomUUID()}`
const marked = (message: CaughtMessage) => message.raw.toString().includes(MARK)
const send = async (body: Record<string, unknown> = {}, headers: Record<string, string> = {}, sender = key) => {
  const result = await pub(pair.a, 'POST', `/${owner.productId}/mail/emails`, {
    key: sender, headers, body: { from: `Acme <hello@${domain}>`, to: 'ann@example.org', subject: 'Hi', text: 'Hello', ...body },
  })
  if (result.status !== 200) throw new Error(`send: ${result.status} ${JSON.stringify(result.body)}`)
  return result.body.id as string
}
const { read, until } = emailReader(() => pair.b, () => owner.productId, () => key, 20_000)
const kinds = (email: { events: { type: string }[] }) => email.events.map((e) => e.type)
async function waitFor(condition: () => boolean, what: string, ms = 15_000) {
  for (const deadline = Date.now() + ms; !condition(); await Bun.sleep(20)) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
  }
}
/**
 * A raw SMTP server that, at the end of DATA of this file's marked messages, answers with a multi-line reply it never
 * finishes: a `250-` line every 500 ms. The connection is never idle, so nodemailer's socket timeout never fires and the
 * attempt never ends by itself. Other messages are accepted at once.
 */
async function startDrippingServer() {
  const held: string[] = []
  let lines = 0
  const timers = new Set<ReturnType<typeof setInterval>>()
  const sockets = new Set<import('node:net').Socket>()
  const server = createServer((socket) => {
    sockets.add(socket)
    let buffer = ''
    let inData = false
    socket.on('close', () => sockets.delete(socket))
    socket.on('error', () => {})
    socket.write('220 drip ESMTP\r\n')
    socket.on('data', (chunk) => {
      buffer += chunk.toString('latin1')
      for (;;) {
        if (inData) {
          const end = buffer.indexOf('\r\n.\r\n')
          if (end < 0) return
          const raw = buffer.slice(0, end)
          buffer = buffer.slice(end + 5)
          inData = false
          if (!raw.includes(MARK)) {
            socket.write('250 accepted\r\n')
            continue
          }
          held.push(raw)
          const timer = setInterval(() => {
            if (socket.destroyed) return clearInterval(timer)
            lines++
            socket.write('250-still working\r\n')
          }, 500)
          timers.add(timer)
          socket.on('close', () => clearInterval(timer))
          continue
        }
        const eol = buffer.indexOf('\r\n')
        if (eol < 0) return
        const line = buffer.slice(0, eol)
        buffer = buffer.slice(eol + 2)
        const verb = line.slice(0, 4).toUpperCase()
        if (verb === 'EHLO') socket.write('250-drip\r\n250 8BITMIME\r\n')
        else if (verb === 'HELO' || verb === 'MAIL' || verb === 'RCPT' || verb === 'RSET' || verb === 'NOOP') socket.write('250 ok\r\n')
        else if (verb === 'DATA') {
          inData = true
          socket.write('354 go ahead\r\n')
        } else if (verb === 'QUIT') socket.end('221 bye\r\n')
        else socket.write('502 not implemented\r\n')
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  return {
    port: (server.address() as AddressInfo).port,
    held,
    lines: () => lines,
    close: () => {
      for (const timer of timers) clearInterval(timer)
      for (const socket of sockets) socket.destroy()
      return new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
const messageIdOf = async (id: string) => (await read(id)).message_id as string
const carrying = (messages: CaughtMessage[], messageId: string) => messages.filter((m) => m.raw.toString().includes(messageId))

describe('sent only after the SMTP server accepted', () => {
  test('a mailer killed (SIGKILL) while the server holds its DATA reply records nothing; the next mailer delivers the email once, with the same Message-ID', async () => {
    const held: CaughtMessage[] = []
    const holding = await startSmtpSink({ port: 0, answerData: (message) => (marked(message) ? (held.push(message), new Promise(() => {})) : undefined) })
    const accepted: CaughtMessage[] = []
    const accepting = await startSmtpSink({ port: 0, onMessage: (message) => accepted.push(message) })
    const doomed = await startMailer(`smtp://127.0.0.1:${holding.port}`)
    let survivor: Worker | undefined
    try {
      const id = await send({ subject: 'killed mid-DATA', text: MARK })
      const messageId = await messageIdOf(id)
      await waitFor(() => carrying(held, messageId).length > 0, 'the message to reach the end of DATA')
      await Bun.sleep(200) // the server is holding its reply: the attempt is in flight
      await doomed.stop('SIGKILL')
      const afterKill = await read(id)
      expect(kinds(afterKill)).toEqual(['queued']) // never `sent`: the server did not accept it
      expect(afterKill.last_event).toBe('queued')

      survivor = await startMailer(`smtp://127.0.0.1:${accepting.port}`)
      const email = await until(id, ['delivered', 'failed'])
      expect(kinds(email)).toEqual(['queued', 'sent', 'delivered'])
      expect(email.message_id).toBe(messageId)
      expect(carrying(accepted, messageId)).toHaveLength(1)
    } finally {
      await survivor?.stop()
      await Promise.all([holding.close(), accepting.close()])
    }
  }, 60_000)

  test('SIGTERM waits for an attempt in flight and records it: the process exits 0 after the server accepted, the email delivered', async () => {
    const started: CaughtMessage[] = []
    const accepted: CaughtMessage[] = []
    let acceptedAt = 0
    const slow = await startSmtpSink({
      port: 0,
      onMessage: (message) => { if (marked(message)) (acceptedAt = Date.now()), accepted.push(message) },
      answerData: (message) => (marked(message) ? (started.push(message), Bun.sleep(1500).then(() => undefined)) : undefined),
    })
    const mailer = await startMailer(`smtp://127.0.0.1:${slow.port}`, { MAILER_SMTP_TIMEOUT_MS: '10000' })
    try {
      const id = await send({ subject: 'in flight at SIGTERM', text: MARK })
      const messageId = await messageIdOf(id)
      await waitFor(() => carrying(started, messageId).length > 0, 'the message to reach the end of DATA')
      const code = await mailer.stop('SIGTERM')
      const exitedAt = Date.now()
      expect(code).toBe(0)
      expect(carrying(accepted, messageId)).toHaveLength(1)
      expect(exitedAt).toBeGreaterThanOrEqual(acceptedAt)
      const email = await read(id) // recorded before the process exited
      expect(kinds(email)).toEqual(['queued', 'sent', 'delivered'])
    } finally {
      await slow.close()
    }
  }, 60_000)

  test('SIGTERM waits at most MAILER_SMTP_TIMEOUT_MS for an attempt that never ends (a server dripping a multi-line reply, so no socket timeout fires): the process exits within the wait, no `sent`, and a later mailer delivers with the same Message-ID', async () => {
    const drip = await startDrippingServer()
    const accepted: CaughtMessage[] = []
    const accepting = await startSmtpSink({ port: 0, onMessage: (message) => accepted.push(message) })
    const mailer = await startProcess('mailer', {
      SMTP_URL: `smtp://127.0.0.1:${drip.port}`, MAILER_POLL_MS: '50', MAIL_LEASE_MS: '1500',
      MAIL_RETRY_BASE_MS: '200', MAILER_SMTP_TIMEOUT_MS: '1500',
    }, { logs: true })
    mailers.push(mailer)
    let next: Worker | undefined
    try {
      const id = await send({ subject: 'never answered', text: MARK })
      const messageId = await messageIdOf(id)
      await waitFor(() => drip.held.some((raw) => raw.includes(messageId)), 'the message to reach the end of DATA')
      // The reply keeps coming, a line every 500 ms, for longer than the SMTP timeout: the attempt is alive, not idle.
      await Bun.sleep(2000)
      expect(kinds(await read(id))).toEqual(['queued'])
      const linesAtStop = drip.lines()
      expect(linesAtStop).toBeGreaterThanOrEqual(3)
      const stopping = Date.now()
      const code = await mailer.stop('SIGTERM')
      const took = Date.now() - stopping
      expect(drip.lines()).toBeGreaterThan(linesAtStop) // the server was still talking while the mailer stopped
      // The wait is MAILER_SMTP_TIMEOUT_MS (1.5 s), then closing connections (PostgreSQL within 5 s): under 6.5 s, where
      // an unbounded wait would run into the process-wide bound (the SMTP timeout + 10 s = 11.5 s).
      expect(took).toBeLessThan(1500 + 5000)
      expect(code).toBe(0)
      const messages = mailer.logs().map((line) => line.msg)
      expect(messages).toContain('mailer stopped waiting for attempts in flight; one that ends before the process exits records its outcome, else its email stays leased and is retried with the same Message-ID')
      expect(messages).not.toContain('shutdown did not finish in time; exiting')
      const afterStop = await read(id)
      expect(kinds(afterStop)).not.toContain('sent')
      expect(kinds(afterStop)).not.toContain('delivered')

      next = await startMailer(`smtp://127.0.0.1:${accepting.port}`)
      const email = await until(id, ['delivered', 'failed'])
      expect(email.last_event).toBe('delivered')
      expect(kinds(email).filter((k) => k === 'sent')).toHaveLength(1)
      expect(carrying(accepted, messageId)).toHaveLength(1)
    } finally {
      await next?.stop()
      await Promise.all([drip.close(), accepting.close()])
    }
  }, 60_000)
})

test('MAIL_DEV_VERIFY with PLATFORM_ENV=production (or Production, prod, staging: anything but development, dev, test, local): every process refuses to start, exits non-zero and says why', async () => {
  for (const script of ['services/mailer/main.ts', 'services/public/main.ts', 'services/api/main.ts', 'gateway/main.ts']) {
    const port = String(await freePort())
    const proc = Bun.spawn(['bun', 'run', script], {
      env: { ...process.env, PLATFORM_ENV: 'production', MAIL_DEV_VERIFY: '1', MAILER_PORT: port, PUBLIC_PORT: port, API_PORT: port, GATEWAY_PORT: port },
      stdout: 'ignore', stderr: 'pipe',
    })
    const timer = setTimeout(() => proc.kill('SIGKILL'), 15_000)
    const code = await proc.exited
    clearTimeout(timer)
    const stderr = await new Response(proc.stderr).text()
    expect(code, script).not.toBe(0)
    expect(proc.signalCode, script).toBeNull() // it exited by itself, it was not killed by the timer
    expect(stderr, script).toContain('MAIL_DEV_VERIFY is refused when PLATFORM_ENV="production"')
  }
  // However production is spelled, or named (an allow-list: only development, dev, test and local may use it).
  for (const environment of ['Production', ' production', 'prod', 'staging']) {
    const port = String(await freePort())
    const proc = Bun.spawn(['bun', 'run', 'services/mailer/main.ts'], {
      env: { ...process.env, PLATFORM_ENV: environment, MAIL_DEV_VERIFY: '1', MAILER_PORT: port }, stdout: 'ignore', stderr: 'pipe',
    })
    const timer = setTimeout(() => proc.kill('SIGKILL'), 15_000)
    const code = await proc.exited
    clearTimeout(timer)
    expect([code === 0, proc.signalCode], environment).toEqual([false, null])
    expect(await new Response(proc.stderr).text(), environment).toContain(`MAIL_DEV_VERIFY is refused when PLATFORM_ENV=${JSON.stringify(environment)}`)
  }
  // The refusal is that combination only: production without it (and without the other development-only switch, which
  // the tests' environment turns on) starts.
  const production = await startProcess('mailer', { PLATFORM_ENV: 'production', MAIL_DEV_VERIFY: '0', WEBHOOK_ALLOW_PRIVATE_URLS: '0' }, { waitFor: '/healthz' })
  expect(await production.stop()).toBe(0)
}, 60_000)

test('credentials in an smtp:// SMTP_URL require STARTTLS: against a server that offers none, delivery is delayed with a reason naming TLS and AUTH is never sent in clear', async () => {
  const auths: string[] = []
  const accepted: CaughtMessage[] = []
  // A plain server that would take AUTH without TLS (as a man in the middle stripping STARTTLS would present itself).
  const server = new SMTPServer({
    secure: false, disabledCommands: ['STARTTLS'], allowInsecureAuth: true, authMethods: ['PLAIN', 'LOGIN'], logger: false,
    onAuth(auth, _session, callback) {
      auths.push(`${auth.username}:${auth.password}`)
      callback(null, { user: auth.username })
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = []
      stream.on('data', (chunk: Buffer) => chunks.push(chunk))
      stream.on('end', () => {
        accepted.push({ from: '', to: session.envelope.rcptTo.map((r) => r.address), raw: Buffer.concat(chunks) })
        callback()
      })
    },
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  const port = (server.server.address() as { port: number }).port
  // The control: a client without the rule would send the password in clear to this server.
  await createTransport({ host: '127.0.0.1', port, secure: false, auth: { user: 'probe', pass: 'probe-secret' } })
    .sendMail({ from: 'a@b.co', to: 'c@d.co', subject: 'probe', text: 'probe' })
  expect(auths).toEqual(['probe:probe-secret'])

  const mailer = await startMailer(`smtp://relay-user:s3cret@127.0.0.1:${port}`, { MAILER_SMTP_TIMEOUT_MS: '3000', MAIL_RETRY_BASE_MS: '60000' })
  try {
    const id = await send({ subject: 'needs TLS' })
    const email = await until(id, ['delivery_delayed', 'delivered', 'failed', 'bounced'])
    expect(kinds(email)).toEqual(['queued', 'delivery_delayed'])
    expect(email.events[1].detail).toContain('TLS')
    expect(auths).toEqual(['probe:probe-secret']) // the mailer never sent its credentials
    expect(carrying(accepted, email.message_id)).toEqual([])
  } finally {
    await mailer.stop()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
}, 60_000)

test('Idempotency-Key is scoped to the sending API key: two keys of one product using the same key make two emails, each repeat answers its own', async () => {
  const other = (await manage(owner, 'POST', '/mail/api-keys', { name: 'other sender', scope: 'full_access' })).key
  const body = { subject: 'scoped idempotency' }
  const fromA = await send(body, { 'idempotency-key': 'order-77' }, key)
  const fromB = await send(body, { 'idempotency-key': 'order-77' }, other)
  expect(fromB).not.toBe(fromA)
  expect(await send(body, { 'idempotency-key': 'order-77' }, key)).toBe(fromA)
  expect(await send(body, { 'idempotency-key': 'order-77' }, other)).toBe(fromB)
  // Another payload under the same key is a conflict for that API key only.
  const conflict = await pub(pair.a, 'POST', `/${owner.productId}/mail/emails`, {
    key, headers: { 'idempotency-key': 'order-77' }, body: { from: `hello@${domain}`, to: 'ann@example.org', subject: 'different', text: 'x' },
  })
  expect([conflict.status, conflict.body.error]).toEqual([409, 'invalid_idempotent_request'])
  expect(await send({ subject: 'different' }, { 'idempotency-key': 'order-78' }, other)).toBeString()
})
