// /healthz (the process runs) and /readyz (PostgreSQL and Redis both answer within a second, and any process-specific
// condition holds, e.g. the public worker's cache-invalidation subscription is live).
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

/** A process-specific readiness condition, reported by name in /readyz. */
export type ReadinessCheck = { name: string; ready: () => boolean }

/** The /readyz answer: 200 only when PostgreSQL, Redis and every process-specific check are up. */
export async function readiness(checks: ReadinessCheck[] = []): Promise<{ status: number; body: Record<string, string> }> {
  const [postgres, redisStatus] = await Promise.all([probe(() => sql`select 1`), probe(() => redis().ping())])
  const extra = Object.fromEntries(checks.map((c) => [c.name, c.ready() ? 'ok' : 'down']))
  const ready = postgres === 'ok' && redisStatus === 'ok' && Object.values(extra).every((s) => s === 'ok')
  return { status: ready ? 200 : 503, body: { status: ready ? 'ready' : 'not_ready', postgres, redis: redisStatus, ...extra } }
}

export const liveness = () => ({ status: 'ok', pid: process.pid })

export const healthRoutes = (checks: ReadinessCheck[] = []) =>
  new Elysia()
    .get('/healthz', liveness)
    .get('/readyz', async ({ set }) => {
      const { status, body } = await readiness(checks)
      set.status = status
      return body
    })
