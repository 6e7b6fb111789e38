// /healthz (the process runs) and /readyz (PostgreSQL and Redis both answer within a second, and any process-specific
// condition holds, e.g. the public worker's cache-invalidation subscription is live; on a Redis Cluster, see redisProbe).
import { Elysia } from 'elysia'
import { Cluster } from 'ioredis'
import { sql } from '../db/client'
import { noRoute, toErrorResponse } from '../errors'
import { log } from '../log'
import { redis } from '../redis/client'
import { clusterNode } from '../redis/cluster'

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

/**
 * One Redis: it answers PING. A cluster: every node serving slots is asked; ready while any answers that its cluster
 * state is ok, `degraded` when some do not. A master down costs every process the same slots, so taking them all out
 * of a load balancer would only add the slots that still work to the loss.
 */
async function redisProbe(): Promise<'ok' | 'degraded' | 'down'> {
  const client = redis()
  if (!(client instanceof Cluster)) return probe(() => client.ping())
  const serving = new Set(client.slots.map((owners) => owners?.[0]).filter((node): node is string => !!node))
  const answers = await Promise.all([...serving].map((node) => {
    const connection = clusterNode(node)
    // CLUSTER INFO, not PING: a node cut off from the majority answers, but refuses every keyed command (CLUSTERDOWN).
    return connection ? probe(async () => {
      if (!String(await connection.cluster('INFO')).includes('cluster_state:ok')) throw new Error('cluster_state is not ok')
    }) : Promise.resolve('down' as const)
  }))
  if (answers.length === 0 || answers.every((answer) => answer === 'down')) return 'down'
  return answers.every((answer) => answer === 'ok') ? 'ok' : 'degraded'
}

/** A process-specific readiness condition, reported by name in /readyz. */
export type ReadinessCheck = { name: string; ready: () => boolean }

/** The /readyz answer: 200 only when PostgreSQL, Redis and every process-specific check are up. */
export async function readiness(checks: ReadinessCheck[] = []): Promise<{ status: number; body: Record<string, string> }> {
  const [postgres, redisStatus] = await Promise.all([probe(() => sql`select 1`), redisProbe()])
  const extra = Object.fromEntries(checks.map((c) => [c.name, c.ready() ? 'ok' : 'down']))
  const ready = postgres === 'ok' && redisStatus !== 'down' && Object.values(extra).every((s) => s === 'ok')
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

/**
 * A worker with no other HTTP surface (mailer, webhooks): /healthz and /readyz on `port` (reusePort, so any of its
 * workers answers), every other path 404 in the error shape.
 */
export function serveHealth(name: string, port: number): { stop(closeActive?: boolean): void } {
  const server = Bun.serve({
    port,
    reusePort: true,
    async fetch(request) {
      const path = new URL(request.url).pathname
      if (path === '/healthz') return Response.json(liveness())
      if (path === '/readyz') {
        const { status, body } = await readiness()
        return Response.json(body, { status })
      }
      return toErrorResponse(noRoute(request.method, path))
    },
  })
  log('info', 'listening', { name, port: server.port })
  return server
}
