// The local SMTP sink as scripts/up runs it (its own process, writing caught mail to a folder): a sender that resets its
// connection mid-session must not take it down, or every later delivery of the cluster would fail.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort } from '../helpers'

let sink: Bun.Subprocess<'ignore', 'pipe', 'pipe'>
let port: number
let dir: string

beforeAll(async () => {
  port = await freePort()
  dir = mkdtempSync(join(tmpdir(), 'smtp-sink-'))
  sink = Bun.spawn(['bun', 'run', 'scripts/smtp-sink.ts'], {
    env: { ...process.env, SMTP_SINK_PORT: String(port), SMTP_SINK_DIR: dir },
    stdin: 'ignore', stdout: 'pipe', stderr: 'pipe',
  })
  for (const deadline = Date.now() + 10_000; !(await accepts(port)); await Bun.sleep(50)) {
    if (Date.now() > deadline || sink.exitCode !== null) throw new Error('the SMTP sink did not start')
  }
})

afterAll(() => {
  sink?.kill('SIGKILL')
  rmSync(dir, { recursive: true, force: true })
})

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => resolve(!!socket.end()))
    socket.once('error', () => resolve(false))
  })
}

/** A raw SMTP client: `say` writes a line and waits for the next reply line whose code ends it. */
async function session() {
  const socket = net.connect(port, '127.0.0.1')
  let buffered = ''
  const waiting: ((line: string) => void)[] = []
  socket.on('data', (chunk) => {
    buffered += chunk.toString()
    for (let end; (end = buffered.indexOf('\r\n')) >= 0; ) {
      const line = buffered.slice(0, end)
      buffered = buffered.slice(end + 2)
      if (/^\d{3} /.test(line)) waiting.shift()?.(line) // the last line of a (possibly multi-line) reply
    }
  })
  // A connection that ends or fails answers every waiting reply with what happened, so a dead sink fails at once.
  const ended = (what: string) => () => waiting.splice(0).forEach((resolve) => resolve(what))
  socket.on('close', ended('connection closed')).on('error', (error) => ended(`connection failed: ${error.message}`)())
  const reply = () => new Promise<string>((resolve) => waiting.push(resolve))
  const greeting = reply()
  expect(await greeting).toStartWith('220')
  const say = (line: string) => {
    const answer = reply()
    socket.write(`${line}\r\n`)
    return answer
  }
  return { socket, say }
}

test('a sender that resets its connection in the middle of DATA leaves the sink serving: the next message is caught', async () => {
  const broken = await session()
  expect(await broken.say('EHLO sender.test')).toStartWith('250')
  expect(await broken.say('MAIL FROM:<a@sender.test>')).toStartWith('250')
  expect(await broken.say('RCPT TO:<lost@example.test>')).toStartWith('250')
  expect(await broken.say('DATA')).toStartWith('354')
  broken.socket.write('Subject: never finished\r\n\r\nhalf a body')
  await Bun.sleep(100)
  broken.socket.resetAndDestroy() // a TCP RST, as a sender that crashes or a middlebox that drops the session
  await Bun.sleep(500)
  expect(sink.exitCode).toBeNull()

  const next = await session()
  expect(await next.say('EHLO sender.test')).toStartWith('250')
  expect(await next.say('MAIL FROM:<a@sender.test>')).toStartWith('250')
  expect(await next.say('RCPT TO:<kept@example.test>')).toStartWith('250')
  expect(await next.say('DATA')).toStartWith('354')
  expect(await next.say('Subject: after the reset\r\n\r\nwhole body\r\n.')).toStartWith('250')
  await next.say('QUIT')
  next.socket.destroy()
  const files = readdirSync(dir).filter((name) => name.endsWith('.eml'))
  expect(files.length).toBe(1)
  const caught = readFileSync(join(dir, files[0]!), 'utf8')
  expect(caught).toContain('X-Sink-Rcpt-To: kept@example.test')
  expect(caught).toContain('Subject: after the reset')
  expect(caught).not.toContain('never finished')
})
