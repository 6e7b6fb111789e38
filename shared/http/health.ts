// /healthz (the process runs) and /readyz (PostgreSQL and Redis both answer within a second).
import { Elysia } from 'elysia'
import { sql } from '../db/client'
import { redis } from '../redis'

const within = <T>(promise: Promise<T>, ms: number) =>
  Promise.race([promise, new Promise<never>((_, reject) => setTimeout(() => reject(new Error('timeout')), ms))])

async function probe(check: () => Promise<unknown>): Promise<'ok' | 'down'> {
  try {
    await within(check(), 1000)
    return 'ok'
  } catch {
    return 'down'
  }
}

export const healthRoutes = () =>
  new Elysia()
    .get('/healthz', () => ({ status: 'ok', pid: process.pid }))
    .get('/readyz', async ({ set }) => {
      const [postgres, redisStatus] = await Promise.all([probe(() => sql`select 1`), probe(() => redis().ping())])
      const ready = postgres === 'ok' && redisStatus === 'ok'
      set.status = ready ? 200 : 503
      return { status: ready ? 'ready' : 'not_ready', postgres, redis: redisStatus }
    })
