// Capture throughput: events a second through the public capture route (POST /{productId}/capture?key=ptk_..., every
// guard: key, origin, IP and key rates, body, schema, field checks, INSERT) against a bare Bun.serve peer that parses the
// same batches and runs the same INSERT (scripts/bench/capture-peer.ts), in the same run. Figures: docs/performance.md.
// Usage: bun run scripts/bench/capture.ts [--batch 500] [--clients 8] [--seconds 10] [--workers 1] [--gzip]
// Needs PostgreSQL and Redis (DATABASE_URL, REDIS_URL; the schema is migrated by test/helpers). It makes a product named
// `Capture bench` and deletes it (and its events) at the end; a run stopped midway leaves it to delete by hand.
import { parseArgs } from 'node:util'
import { gzipSync } from 'node:zlib'
import { call, freePort, newProduct, startProcess, startWorker, type Worker } from '../../test/helpers'
import { unboundedSql } from '../../shared/db/client'

const { values: args } = parseArgs({
  options: {
    batch: { type: 'string', default: '500' },
    clients: { type: 'string', default: '8' },
    seconds: { type: 'string', default: '10' },
    workers: { type: 'string', default: '1' },
    gzip: { type: 'boolean', default: false },
  },
})
const BATCH = Number(args.batch)
const CLIENTS = Number(args.clients)
const SECONDS = Number(args.seconds)
const WORKERS = Number(args.workers)

const product = await newProduct('Capture bench')
const key = (await call('POST', '/tracking/capture-keys', { token: product.token, productId: product.productId, body: { name: 'bench' } })).body.key as string
if (!key) throw new Error('no capture key')

// A page's events: a handful of names, an anonymous id per visitor, a few properties (~150 bytes of JSON each).
const NAMES = ['$pageview', 'signup_clicked', 'add_to_cart', 'purchase', 'video_played']
const bodies = Array.from({ length: 8 }, (_, b) => JSON.stringify({
  events: Array.from({ length: BATCH }, (_, i) => ({
    event: NAMES[(b + i) % NAMES.length],
    timestamp: new Date(Date.now() - i * 1000).toISOString(),
    identity: { anonymous_id: `visitor-${b}-${i % 50}` },
    properties: { path: `/products/${i % 200}`, referrer: 'https://search.example/?q=shoes', plan: i % 3 ? 'free' : 'pro' },
  })),
}))
const payloads = bodies.map((text) => (args.gzip ? gzipSync(text) : text))
const headers: Record<string, string> = { 'content-type': 'text/plain', ...(args.gzip ? { 'content-encoding': 'gzip' } : {}) }

async function drive(url: string): Promise<{ events: number; requests: number; failed: number; p50: number; p99: number }> {
  const deadline = performance.now() + SECONDS * 1000
  const latencies: number[] = []
  let events = 0
  let failed = 0
  await Promise.all(Array.from({ length: CLIENTS }, async (_, c) => {
    for (let n = c; performance.now() < deadline; n++) {
      const t0 = performance.now()
      const response = await fetch(url, { method: 'POST', headers, body: payloads[n % payloads.length] })
      const text = await response.text()
      latencies.push(performance.now() - t0)
      if (response.ok) events += BATCH
      else if (failed++ < 3) console.error(`refused: ${response.status} ${text.slice(0, 200)}`)
    }
  }))
  latencies.sort((a, b) => a - b)
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0
  return { events: Math.round(events / SECONDS), requests: latencies.length, failed, p50: at(0.5), p99: at(0.99) }
}

const workers: Worker[] = []
try {
  const lifted = { CAPTURE_KEY_EVENTS_PER_SECOND: '10000000', CAPTURE_IP_RATE_LIMIT: '10000000', LOG_REQUESTS: '0' }
  const first = await startProcess('public', lifted)
  workers.push(first)
  // More workers share the first one's port (reusePort), as under foreman.
  for (let i = 1; i < WORKERS; i++) workers.push(await startWorker('services/public/main.ts', { ...lifted, PUBLIC_PORT: String(first.port) }, first.port))
  const peerPort = await freePort()
  const peers: Worker[] = []
  for (let i = 0; i < WORKERS; i++) peers.push(await startWorker('scripts/bench/capture-peer.ts', { BENCH_PEER_PORT: String(peerPort) }, peerPort, '/healthz'))
  workers.push(...peers)

  console.log(`capture: batches of ${BATCH} events${args.gzip ? ' (gzip)' : ''}, ${CLIENTS} concurrent clients, ${SECONDS} s each, ${WORKERS} worker(s) per side`)
  const rows: [string, Awaited<ReturnType<typeof drive>>][] = []
  // Warm both (JIT, pools, the key cache), then measure each in turn; peer first, route second, route again.
  await drive(`${peers[0]!.url}/${product.productId}/capture`)
  rows.push(['bare Bun.serve + same INSERT (peer)', await drive(`${peers[0]!.url}/${product.productId}/capture`)])
  rows.push(['public capture route', await drive(`${first.url}/${product.productId}/capture?key=${key}`)])
  rows.push(['public capture route (again)', await drive(`${first.url}/${product.productId}/capture?key=${key}`)])
  console.log('| side | events/s | requests | refused | p50 ms | p99 ms |\n| --- | ---: | ---: | ---: | ---: | ---: |')
  for (const [name, r] of rows) console.log(`| ${name} | ${r.events.toLocaleString('en')} | ${r.requests} | ${r.failed} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} |`)
  const best = Math.max(rows[1]![1].events, rows[2]![1].events)
  console.log(`goal (at least 50 000 events/s through the route): ${best >= 50_000 ? 'yes' : 'no'}, ${best.toLocaleString('en')} events/s; `
    + `route / peer: ${(best / rows[0]![1].events).toFixed(2)}`)
} finally {
  await Promise.all(workers.map((w) => w.stop()))
  // Without the request deadline: a run leaves millions of events, and their delete takes longer than a request may.
  const cleanup = unboundedSql()
  await cleanup`delete from products where id = ${product.productId}` // its key and events go with it
  await cleanup.end()
}

