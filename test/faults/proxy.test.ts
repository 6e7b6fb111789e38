// The fault proxy itself, with real clients: it forwards (large values too), cuts, stalls without losing bytes, restores.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import Redis from 'ioredis'
import { connect, createServer, type Server, type Socket as NetSocket } from 'node:net'
import postgres from 'postgres'
import { config } from '../../shared/config'
import { startFaultProxy, type FaultProxy } from './proxy'

let redisProxy: FaultProxy
let pgProxy: FaultProxy
let redis: Redis
let sql: postgres.Sql
let pgCloses = 0

beforeAll(async () => {
  const r = new URL(config.redisUrl)
  const p = new URL(config.databaseUrl)
  redisProxy = await startFaultProxy({ host: r.hostname, port: Number(r.port) })
  pgProxy = await startFaultProxy({ host: p.hostname, port: Number(p.port) })
  // Reconnect quickly after a cut; errors while cut are expected, not test failures.
  redis = new Redis(redisProxy.url(config.redisUrl), { maxRetriesPerRequest: 1, retryStrategy: () => 50 })
  redis.on('error', () => {})
  // One connection, so "the existing client" is one socket whose close the test can see.
  sql = postgres(pgProxy.url(config.databaseUrl), { max: 1, onnotice: () => {}, onclose: () => void pgCloses++ })
})

afterAll(async () => {
  redis?.disconnect()
  await sql?.end({ timeout: 1 })
  await Promise.all([redisProxy?.close(), pgProxy?.close()])
})

/** Waits for a condition, bounded: a loaded machine is slow, never stuck. */
async function until(condition: () => boolean, ms = 10_000) {
  for (const deadline = Date.now() + ms; !condition(); await Bun.sleep(20)) {
    if (Date.now() > deadline) throw new Error('condition not met in time')
  }
}

const refused = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect(port, '127.0.0.1')
    socket.on('connect', () => (socket.destroy(), resolve(false)))
    socket.on('error', () => resolve(true))
  })

test('forwards both ways, a 1 MiB value intact', async () => {
  const key = `proxy:${crypto.randomUUID()}`
  const value = 'x'.repeat(1 << 20) + crypto.randomUUID()
  await redis.set(key, value, 'EX', 60)
  expect(await redis.get(key)).toBe(value)
  expect((await sql`select 41 + 1 as n`)[0]!.n).toBe(42)
  expect(redisProxy.connections).toBeGreaterThanOrEqual(1)
})

test('cut closes live connections and refuses new ones; restore accepts again on the same port', async () => {
  const redisClosed = new Promise((resolve) => redis.once('close', resolve))
  const pgClosesBefore = pgCloses
  redisProxy.cut()
  pgProxy.cut()
  await redisClosed
  await until(() => pgCloses > pgClosesBefore)
  expect(await refused(redisProxy.port)).toBe(true)
  expect(await refused(pgProxy.port)).toBe(true)
  await Promise.all([redisProxy.restore(), pgProxy.restore()])
  expect(await refused(redisProxy.port)).toBe(false)
  await until(() => redis.status === 'ready')
  expect(await redis.ping()).toBe('PONG')
  expect((await sql`select 'back' as v`)[0]!.v).toBe('back')
})

test('stall holds a pending reply without dropping it; restore delivers it', async () => {
  const key = `proxy:${crypto.randomUUID()}`
  await redis.set(key, 'held', 'EX', 60)
  pgProxy.stall()
  redisProxy.stall()
  let answered = false
  const pending = redis.get(key).then((v) => ((answered = true), v))
  const query = sql`select 'late' as v`.then((rows) => rows[0]!.v)
  await Bun.sleep(300)
  expect(answered).toBe(false)
  await Promise.all([redisProxy.restore(), pgProxy.restore()])
  expect(await pending).toBe('held')
  expect(await query).toBe('late')
})

// The edges real clients rarely reach, against a scripted upstream: what a server sends before closing must arrive.

/** A local server running `script` on each connection; counts connections. */
async function scripted(script: (socket: NetSocket) => void) {
  let accepted = 0
  const server: Server = createServer((socket) => (accepted++, socket.on('error', () => {}), script(socket)))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const proxy = await startFaultProxy({ host: '127.0.0.1', port: (server.address() as { port: number }).port })
  return { proxy, accepted: () => accepted, close: () => (server.close(), proxy.close()) }
}

/** Opens a client through the proxy and collects what it receives until the proxy closes it. */
async function reader(port: number) {
  const socket = connect(port, '127.0.0.1')
  await new Promise((resolve, reject) => (socket.once('connect', resolve), socket.once('error', reject)))
  const received: Buffer[] = []
  let closed = false
  socket.on('data', (chunk: Buffer) => received.push(chunk))
  const ended = new Promise<void>((resolve) => socket.on('close', () => ((closed = true), resolve())))
  return { socket, ended, closed: () => closed, text: () => Buffer.concat(received).toString() }
}

test('a server closing after a large reply: a slow reader still gets every byte, then the close', async () => {
  const size = 8 << 20 // far beyond the kernel buffers, so the proxy holds the tail and writes it on drain
  const upstream = await scripted((socket) => socket.end(Buffer.alloc(size, 'a')))
  try {
    const client = await reader(upstream.proxy.port)
    client.socket.pause() // the proxy's writes fall short until the reader resumes
    await Bun.sleep(300)
    client.socket.resume()
    await client.ended
    expect(client.text().length).toBe(size)
  } finally {
    await upstream.close()
  }
})

test('a close during a stall is held with the bytes before it, and delivered on restore', async () => {
  const upstream = await scripted((socket) => setTimeout(() => socket.end('bye'), 100))
  try {
    const client = await reader(upstream.proxy.port)
    await until(() => upstream.accepted() === 1)
    upstream.proxy.stall()
    await Bun.sleep(400) // the server has said bye and closed by now
    expect(client.closed()).toBe(false)
    await upstream.proxy.restore()
    await client.ended
    expect(client.text()).toBe('bye')
  } finally {
    await upstream.close()
  }
})

test('stall and restore while the upstream connect is in flight still open one upstream connection', async () => {
  const upstream = await scripted(() => {})
  try {
    const client = await reader(upstream.proxy.port)
    upstream.proxy.stall()
    await upstream.proxy.restore()
    await Bun.sleep(200) // time for a second connect, if there were one
    expect(upstream.accepted()).toBe(1)
    client.socket.destroy()
  } finally {
    await upstream.close()
  }
})
