// Benchmark peer for POST /{productId}/realtime/messages: a bare Bun.serve that parses the body and calls publish(), no guards.
// Started by scripts/bench/publish.ts; env BENCH_PEER_PORT, BENCH_HISTORY_TTL_SECONDS, BENCH_HISTORY_SIZE.
import { publish, type HistoryPolicy } from '../../shared/realtime/broker'
import { closeRedis, redis } from '../../shared/redis'

const port = Number(process.env.BENCH_PEER_PORT)
if (!Number.isInteger(port) || port <= 0) throw new Error('BENCH_PEER_PORT must be a port number')
// The same namespace policy the public worker reads from PostgreSQL, passed in instead of looked up.
const policy: HistoryPolicy = {
  historyTtlSeconds: Number(process.env.BENCH_HISTORY_TTL_SECONDS ?? 300),
  historySize: Number(process.env.BENCH_HISTORY_SIZE ?? 1000),
}
const route = /^\/([^/]+)\/realtime\/messages$/

const server = Bun.serve({
  port,
  async fetch(request) {
    const path = new URL(request.url).pathname
    if (path === '/readyz') return (await redis().ping()) === 'PONG' ? new Response('ok') : new Response('redis', { status: 503 })
    const match = route.exec(path)
    if (request.method !== 'POST' || !match) return new Response('not found', { status: 404 })
    const body = (await request.json()) as { channel: string; data: unknown }
    const result = await publish({ productId: match[1]!, channel: body.channel, policy, data: JSON.stringify(body.data) })
    return Response.json({ id: result.id, channel: body.channel, offset: result.offset, epoch: result.epoch })
  },
})

const stop = async () => {
  await server.stop()
  await closeRedis()
  process.exit(0)
}
process.on('SIGTERM', () => void stop())
process.on('SIGINT', () => void stop())
