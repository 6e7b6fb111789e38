// Benchmark peer for two public routes, no guards: a bare Bun.serve that parses the body and calls the same domain code.
//   POST /{productId}/realtime/messages      → publish() with the namespace policy passed in
//   POST /{productId}/realtime/tokens/issue  → narrow() by the product's policies, then signToken() (the route's key set)
// Started by scripts/bench/publish.ts; env BENCH_PEER_PORT, BENCH_HISTORY_TTL_SECONDS, BENCH_HISTORY_SIZE, BENCH_API_KEY_ID.
import { config } from '../../shared/config'
import { publish, type HistoryPolicy } from '../../shared/realtime/broker'
import { productPolicies, type ProductPolicies } from '../../shared/realtime/policies'
import { signToken } from '../../shared/realtime/tokens'
import { closeRedis, redis } from '../../shared/redis/client'
import { narrow } from '../../shared/realtime/token-issue'
import type { TokenIssueBody } from '../../shared/realtime/request-schemas'

const port = Number(process.env.BENCH_PEER_PORT)
if (!Number.isInteger(port) || port <= 0) throw new Error('BENCH_PEER_PORT must be a port number')
// The same namespace policy the public worker reads from PostgreSQL, passed in instead of looked up.
const policy: HistoryPolicy = {
  historyTtlSeconds: Number(process.env.BENCH_HISTORY_TTL_SECONDS ?? 300),
  historySize: Number(process.env.BENCH_HISTORY_SIZE ?? 1000),
}
// The id of the key the route would find behind X-Api-Key (it goes into the token's `akid`); the peer looks nothing up.
const apiKeyId = process.env.BENCH_API_KEY_ID ?? '00000000-0000-0000-0000-000000000000'
const messagesRoute = /^\/([^/]+)\/realtime\/messages$/
const issueRoute = /^\/([^/]+)\/realtime\/tokens\/issue$/

// The product's policies, read from PostgreSQL once per product and kept: the public worker answers them from its
// invalidated cache, so neither side pays a query per request (this process hears no invalidations, so it keeps its own).
const policies = new Map<string, Promise<ProductPolicies>>()
const policiesOf = (productId: string) => {
  let found = policies.get(productId)
  if (!found) policies.set(productId, (found = productPolicies(productId)))
  return found
}

async function issue(productId: string, body: TokenIssueBody): Promise<Response> {
  const { granted, dropped } = narrow(await policiesOf(productId), body.channels)
  if (granted.length === 0) return Response.json({ error: 'nothing granted', dropped }, { status: 422 })
  const { token, claims, expiresAt } = await signToken({ productId, apiKeyId, subject: body.subject, channels: granted, ttlSeconds: body.ttlSeconds })
  return Response.json({ token, gatewayUrl: config.gatewayUrl, expiresAt: expiresAt.toISOString(), subject: claims.sub, channels: granted, dropped })
}

const server = Bun.serve({
  port,
  async fetch(request) {
    const path = new URL(request.url).pathname
    if (path === '/readyz') return (await redis().ping()) === 'PONG' ? new Response('ok') : new Response('redis', { status: 503 })
    if (request.method !== 'POST') return new Response('not found', { status: 404 })
    const tokens = issueRoute.exec(path)
    if (tokens) return issue(tokens[1]!, (await request.json()) as TokenIssueBody)
    const match = messagesRoute.exec(path)
    if (!match) return new Response('not found', { status: 404 })
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
