// The fault proxy itself, with real clients: it forwards (large values too), cuts, stalls without losing bytes, restores.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import Redis from 'ioredis'
import { connect } from 'node:net'
import postgres from 'postgres'
import { config } from '../../shared/config'
import { startFaultProxy, type FaultProxy } from './proxy'

let redisProxy: FaultProxy
let pgProxy: FaultProxy
let redis: Redis
let sql: postgres.Sql

beforeAll(async () => {
  const r = new URL(config.redisUrl)
  const p = new URL(config.databaseUrl)
  redisProxy = await startFaultProxy({ host: r.hostname, port: Number(r.port) })
  pgProxy = await startFaultProxy({ host: p.hostname, port: Number(p.port) })
  redis = new Redis(redisProxy.url(config.redisUrl), { maxRetriesPerRequest: 1, retryStrategy: () => 50 })
  redis.on('error', () => {})
  sql = postgres(pgProxy.url(config.databaseUrl), { max: 1, onnotice: () => {} })
})

afterAll(async () => {
  redis.disconnect()
  await sql.end({ timeout: 1 })
  await Promise.all([redisProxy.close(), pgProxy.close()])
})

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
  const closed = new Promise((resolve) => redis.once('close', resolve))
  redisProxy.cut()
  await closed
  expect(await refused(redisProxy.port)).toBe(true)
  await redisProxy.restore()
  expect(await refused(redisProxy.port)).toBe(false)
  for (let i = 0; i < 100 && redis.status !== 'ready'; i++) await Bun.sleep(20)
  expect(await redis.ping()).toBe('PONG')
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
