// Benchmark ceiling: one bare Bun.serve process publishing to its own topic, no Redis, no auth, no protocol.
// Clients on /ws are subscribed to topic "bench"; POST /publish sends the body to all of them with server.publish.
// Started by scripts/bench/fanout.ts; env BENCH_PORT.
const server = Bun.serve({
  port: Number(process.env.BENCH_PORT),
  async fetch(request, srv) {
    const path = new URL(request.url).pathname
    if (path === '/readyz') return new Response('ok')
    if (path === '/ws') return srv.upgrade(request, { data: undefined }) ? undefined : new Response('upgrade', { status: 426 })
    if (path === '/publish') {
      server.publish('bench', await request.text())
      return new Response('ok')
    }
    return new Response('not found', { status: 404 })
  },
  websocket: {
    open: (ws) => void ws.subscribe('bench'),
    message: () => {},
  },
})
process.on('SIGTERM', () => process.exit(0))
