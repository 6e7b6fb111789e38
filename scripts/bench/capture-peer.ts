// Benchmark peer of the capture route, no guards: a bare Bun.serve that parses the JSON batch and runs the same INSERT
// (unnest of text arrays) as shared/analytics/capture.ts, with no key, origin, rate limit, schema or field checks.
// Started by scripts/bench/capture.ts; env BENCH_PEER_PORT.
import { sql } from '../../shared/db/client'

const port = Number(process.env.BENCH_PEER_PORT)
if (!Number.isInteger(port) || port <= 0) throw new Error('BENCH_PEER_PORT must be a port number')
const route = /^\/([^/]+)\/capture$/

interface Event { event: string; timestamp?: string; identity: Record<string, string | undefined>; properties?: unknown }

const server = Bun.serve({
  port, reusePort: true,
  async fetch(request) {
    const path = new URL(request.url).pathname
    if (path === '/healthz') return new Response('ok') // what startWorker waits for
    const productId = route.exec(path)?.[1]
    if (!productId || request.method !== 'POST') return new Response('not found', { status: 404 })
    const { events } = (await request.json()) as { events: Event[] }
    const now = new Date().toISOString()
    const column = (k: string) => events.map((e) => e.identity[k] ?? null)
    await sql`
      insert into tracked_events (product_id, event, ts, anonymous_id, users_id, email, phone, properties)
      select ${productId}, event, ts::timestamptz, anonymous_id, users_id, lower(email), phone, properties::jsonb
      from unnest(${events.map((e) => e.event)}::text[], ${events.map((e) => e.timestamp ?? now)}::text[],
                  ${column('anonymous_id')}::text[], ${column('users_id')}::text[], ${column('email')}::text[], ${column('phone')}::text[],
                  ${events.map((e) => JSON.stringify(e.properties ?? {}))}::text[])
        as t(event, ts, anonymous_id, users_id, email, phone, properties)`
    return Response.json({ accepted: events.length })
  },
})
process.once('SIGTERM', () => void server.stop(true).then(() => sql.end()).then(() => process.exit(0)))
console.log(JSON.stringify({ msg: 'capture peer listening', port }))
