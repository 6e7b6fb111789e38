// Benchmark peer of scripts/bench/client-events.ts: a bare Bun WebSocket server that takes the gateway's client event
// frames and calls the same domain code, nothing else: no token, no grants, no policy lookup, no per-connection bucket,
// no usage counting. `connect` is answered at once; `publish` parses the frame, serializes its data and publishes it
// with the product-wide client-event budget (publishClientEvent, the gateway's own path), then replies.
// Env: BENCH_PEER_PORT, BENCH_PRODUCT_ID.
import { randomUUID } from 'node:crypto'
import { publishClientEvent } from '../../gateway/event-budget'
import { closeRedis } from '../../shared/redis/client'

const port = Number(process.env.BENCH_PEER_PORT)
const productId = process.env.BENCH_PRODUCT_ID ?? ''
if (!Number.isInteger(port) || port <= 0 || !productId) throw new Error('BENCH_PEER_PORT and BENCH_PRODUCT_ID are required')
// The namespace keeps no history (client events are never stored anyway).
const policy = { historyTtlSeconds: 0, historySize: 0 }

const server = Bun.serve<{ id: string }>({
  port,
  fetch: (request, srv) => (srv.upgrade(request, { data: { id: randomUUID() } }) ? undefined : new Response('websocket only', { status: 400 })),
  websocket: {
    async message(ws, message) {
      const frame = JSON.parse(String(message)) as { type: string; id: number; channel?: string; data?: unknown }
      if (frame.type === 'connect') return void ws.send(JSON.stringify({ type: 'reply', id: frame.id, to: 'connect' }))
      if (frame.type !== 'publish') return
      const published = await publishClientEvent({ productId, channel: frame.channel!, policy, data: JSON.stringify(frame.data), senderConnectionId: ws.data.id })
      ws.send(JSON.stringify({ type: 'reply', id: frame.id, to: 'publish', channel: frame.channel, messageId: published?.id }))
    },
  },
})
console.log(`client-events peer listening on ${server.port}`)
process.on('SIGTERM', async () => {
  server.stop(true)
  await closeRedis()
  process.exit(0)
})
