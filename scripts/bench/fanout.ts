// Fan-out benchmark: N WebSocket subscribers of one channel, messages published over HTTP, measured at the subscribers.
// Three systems in the same run, on this machine:
//   gateway   — two gateway processes (subscribers spread over both), published through the public POST /messages
//   socket.io — a two-node Socket.IO 4.8 cluster with @socket.io/redis-streams-adapter, published through node 1
//   ceiling   — one bare Bun.serve publishing to its own topic (server.publish), no Redis, no auth, no protocol
// For each: a burst (delivered messages per second, publish-to-delivery p50/p99) and a paced load (p50/p99). Then the
// gateway's RSS per idle connection at --idle connections. Method and figures: docs/performance.md.
// Usage: bun run scripts/bench/fanout.ts [--connections 1000] [--burst 200] [--rate 100] [--seconds 5] [--idle 10000]
// Needs DATABASE_URL / REDIS_URL / PLATFORM_SECRET_KEY like the tests (scripts/bench/README.md).
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { io as socketIo, type Socket } from 'socket.io-client'
import { signToken } from '../../shared/realtime/tokens'
import { closeRedis } from '../../shared/redis'
import { sql } from '../../shared/db/client'
import { freePort, startWorker, type Worker } from '../../test/helpers'
import { realtimeProduct } from '../../test/realtime/public-helpers'

const { values: args } = parseArgs({
  options: {
    connections: { type: 'string', default: '1000' },
    burst: { type: 'string', default: '200' },
    rate: { type: 'string', default: '100' },
    seconds: { type: 'string', default: '5' },
    idle: { type: 'string', default: '10000' },
  },
})
const N = Number(args.connections)
const BURST = Number(args.burst)
const RATE = Number(args.rate)
const SECONDS = Number(args.seconds)
const IDLE = Number(args.idle)
const now = () => performance.timeOrigin + performance.now()

/** What the benchmark needs of one system. */
interface System {
  name: string
  /** Its server processes, by role, for the CPU each spends on the burst. */
  pids: Record<string, number>
  /** Opens one subscriber; resolves once it is subscribed. `received(sentAt)` is called per delivered message. */
  open(index: number, received: (sentAt: number) => void): Promise<() => void>
  publish(body: string): Promise<void>
  stop(): Promise<void>
}

async function waitReady(url: string) {
  for (let i = 0; i < 200; i++) {
    if (await fetch(url).then((r) => r.ok, () => false)) return
    await Bun.sleep(50)
  }
  throw new Error(`${url} never answered`)
}

/**
 * Every bench connection comes from 127.0.0.1 with one subject: lift the per-IP and per-subject abuse bounds
 * (gateway/limits.ts) so they measure fan-out, not refusals.
 */
const UNLIMITED_GATEWAY = {
  GATEWAY_IP_UPGRADES_PER_MINUTE: '1000000000',
  GATEWAY_IP_CONNECTS_PER_MINUTE: '1000000000',
  GATEWAY_MAX_CONNECTIONS_PER_SUBJECT: '1000000000',
}
const gatewayEnv = (port: number) =>
  ({ ...UNLIMITED_GATEWAY, GATEWAY_PORT: String(port), GATEWAY_URL: `ws://127.0.0.1:${port}/connection/websocket` })

async function gatewaySystem(): Promise<System> {
  const product = await realtimeProduct([{ name: 'bench' }])
  const [g1, g2, publicPort] = await Promise.all([freePort(), freePort(), freePort()])
  const workers: Worker[] = await Promise.all([
    startWorker('gateway/main.ts', gatewayEnv(g1), g1),
    startWorker('gateway/main.ts', gatewayEnv(g2), g2),
    startWorker('services/public/main.ts', { PUBLIC_PORT: String(publicPort), PUBLIC_IP_RATE_LIMIT: '1000000000', REALTIME_QUOTA_BURST: '1000000000' }, publicPort),
  ])
  const token = (await signToken({ productId: product.productId, apiKeyId: product.keyId, subject: 'bench', channels: [{ name: 'bench:room', ops: ['subscribe'] }] })).token
  const publishUrl = `http://127.0.0.1:${publicPort}/${product.productId}/realtime/messages`
  return {
    name: 'gateway',
    pids: { 'gateway 1': workers[0]!.proc.pid, 'gateway 2': workers[1]!.proc.pid, public: workers[2]!.proc.pid },
    open: (index, received) => new Promise((resolve, reject) => {
      const ws = new WebSocket(`ws://127.0.0.1:${index % 2 ? g2 : g1}/connection/websocket`)
      ws.onopen = () => {
        ws.send(JSON.stringify({ type: 'connect', id: 1, token }))
        ws.send(JSON.stringify({ type: 'subscribe', id: 2, channel: 'bench:room' }))
      }
      ws.onmessage = (event) => {
        const frame = JSON.parse(String(event.data))
        if (frame.type === 'publication') received(frame.data.s)
        else if (frame.id === 2) frame.type === 'reply' ? resolve(() => ws.close()) : reject(new Error(frame.message))
      }
      ws.onerror = () => reject(new Error('gateway connection failed'))
      ws.onclose = (event) => reject(new Error(`gateway closed the connection: ${event.code} ${event.reason}`))
    }),
    publish: async (body) => {
      const response = await fetch(publishUrl, { method: 'POST', headers: { 'x-api-key': product.key, 'content-type': 'application/json' }, body: `{"channel":"bench:room","data":${body}}` })
      if (!response.ok) throw new Error(`publish: ${response.status} ${await response.text()}`)
    },
    stop: async () => void (await Promise.all(workers.map((w) => w.stop()))),
  }
}

async function socketIoSystem(): Promise<System> {
  const ports = await Promise.all([freePort(), freePort()])
  const stream = crypto.randomUUID()
  const nodes = ports.map((port) => Bun.spawn(['bun', 'run', 'scripts/bench/socketio-node.ts'], {
    env: { ...process.env, BENCH_PORT: String(port), BENCH_STREAM: stream }, stdout: 'ignore', stderr: 'inherit',
  }))
  await Promise.all(ports.map((port) => waitReady(`http://127.0.0.1:${port}/readyz`)))
  return {
    name: 'socket.io',
    pids: { 'node 1': nodes[0]!.pid, 'node 2': nodes[1]!.pid },
    open: (index, received) => new Promise((resolve, reject) => {
      const socket: Socket = socketIo(`http://127.0.0.1:${ports[index % 2]}`, { transports: ['websocket'], reconnection: false })
      socket.on('m', (body: string) => received(JSON.parse(body).s))
      socket.on('connect', () => resolve(() => socket.close()))
      socket.on('connect_error', (error) => reject(error))
    }),
    publish: async (body) => {
      const response = await fetch(`http://127.0.0.1:${ports[0]}/publish`, { method: 'POST', body })
      if (!response.ok) throw new Error(`publish: ${response.status}`)
    },
    stop: async () => {
      for (const node of nodes) node.kill()
      await Promise.all(nodes.map((node) => node.exited))
    },
  }
}

async function ceilingSystem(): Promise<System> {
  const port = await freePort()
  const server = Bun.spawn(['bun', 'run', 'scripts/bench/ceiling-server.ts'], { env: { ...process.env, BENCH_PORT: String(port) }, stdout: 'ignore', stderr: 'inherit' })
  await waitReady(`http://127.0.0.1:${port}/readyz`)
  return {
    name: 'ceiling',
    pids: { server: server.pid },
    open: (_index, received) => new Promise((resolve, reject) => {
      const ws = new WebSocket(`ws://127.0.0.1:${port}/ws`)
      ws.onopen = () => setTimeout(() => resolve(() => ws.close()), 10) // the server subscribes it in its own open
      ws.onmessage = (event) => received(JSON.parse(String(event.data)).s)
      ws.onerror = () => reject(new Error('ceiling connection failed'))
    }),
    publish: async (body) => void (await fetch(`http://127.0.0.1:${port}/publish`, { method: 'POST', body })),
    stop: async () => {
      server.kill()
      await server.exited
    },
  }
}

const percentile = (sorted: Float64Array, p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]! : NaN)

interface Result {
  name: string
  burstRate: number
  /** Burst wall time and CPU ms per process. */
  burstMs: number
  cpu: Record<string, number>
  burst: [number, number]
  paced: [number, number]
  lost: number
}

async function measure(system: System): Promise<Result> {
  let latencies: number[] = []
  let delivered = 0
  let last = 0
  const received = (sentAt: number) => {
    const at = now()
    latencies.push(at - sentAt)
    delivered++
    last = at
  }
  // Warm up the publish path (JIT, connection pools, caches) before anyone subscribes: a running system is warm.
  let warm = 0
  await Promise.all(Array.from({ length: 16 }, async () => {
    while (warm++ < 400) await system.publish('{"s":0}')
  }))
  const closers: (() => void)[] = []
  for (let i = 0; i < N; i += 100) {
    closers.push(...(await Promise.all(Array.from({ length: Math.min(100, N - i) }, (_, k) => system.open(i + k, received)))))
  }
  await Bun.sleep(500)
  const waitFor = async (expected: number, ms: number) => {
    for (const deadline = Date.now() + ms; delivered < expected && Date.now() < deadline; ) await Bun.sleep(10)
  }

  // Burst: BURST messages as fast as 16 concurrent publishers go.
  const roles = { 'bench client': process.pid, ...system.pids }
  const cpuBefore = Object.values(roles).map(cpuOf)
  const start = now()
  let next = 0
  await Promise.all(Array.from({ length: 16 }, async () => {
    while (next < BURST) {
      next++
      await system.publish(`{"s":${now()}}`)
    }
  }))
  await waitFor(BURST * N, 60_000)
  const cpu = Object.fromEntries(Object.keys(roles).map((role, i) => [role, Math.round(cpuOf(Object.values(roles)[i]!) - cpuBefore[i]!)]))
  const burstDelivered = delivered
  const burstMs = last - start
  const burstRate = burstDelivered / (burstMs / 1000)
  const burst = Float64Array.from(latencies).sort()

  // Paced: RATE messages a second for SECONDS.
  latencies = []
  delivered = 0
  const total = RATE * SECONDS
  const pacedStart = now()
  for (let i = 0; i < total; i++) {
    const due = pacedStart + (i * 1000) / RATE
    const wait = due - now()
    if (wait > 1) await Bun.sleep(wait)
    void system.publish(`{"s":${now()}}`)
  }
  await waitFor(total * N, 60_000)
  const paced = Float64Array.from(latencies).sort()
  const lost = BURST * N - burstDelivered + (total * N - delivered)
  for (const close of closers) close()
  await system.stop()
  return { name: system.name, burstRate, burstMs, cpu, burst: [percentile(burst, 0.5), percentile(burst, 0.99)], paced: [percentile(paced, 0.5), percentile(paced, 0.99)], lost }
}

/** CPU time (user + system, ms) of this process and of the system's server processes. */
const cpuOf = (pid: number) => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100 // clock ticks (USER_HZ 100)
}
const rssOf = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024

async function idleMemory(): Promise<{ before: number; early: number; after: number; perConnection: number }> {
  const product = await realtimeProduct([{ name: 'bench' }])
  const port = await freePort()
  const gateway = await startWorker('gateway/main.ts', gatewayEnv(port), port)
  const token = (await signToken({ productId: product.productId, apiKeyId: product.keyId, subject: 'idle', channels: [{ name: 'bench:idle', ops: ['subscribe'] }] })).token
  await Bun.sleep(500)
  const before = rssOf(gateway.proc.pid)
  const sockets: WebSocket[] = []
  for (let i = 0; i < IDLE; i += 200) {
    await Promise.all(Array.from({ length: Math.min(200, IDLE - i) }, () => new Promise<void>((resolve, reject) => {
      const ws = new WebSocket(`ws://127.0.0.1:${port}/connection/websocket`)
      sockets.push(ws)
      ws.onopen = () => {
        ws.send(JSON.stringify({ type: 'connect', id: 1, token }))
        ws.send(JSON.stringify({ type: 'subscribe', id: 2, channel: 'bench:idle' }))
      }
      ws.onmessage = (event) => JSON.parse(String(event.data)).id === 2 && resolve()
      ws.onerror = () => reject(new Error('idle connection failed'))
      ws.onclose = (event) => reject(new Error(`gateway closed an idle connection: ${event.code} ${event.reason}`))
    })))
  }
  // Two readings: 2 s after the last connection subscribed, and once settled (20 s: the allocator has returned the
  // garbage of the connect phase, which an idle connection no longer holds).
  await Bun.sleep(2000)
  const early = rssOf(gateway.proc.pid)
  await Bun.sleep(18_000)
  const after = rssOf(gateway.proc.pid)
  for (const ws of sockets) ws.close()
  await gateway.stop()
  return { before, early, after, perConnection: (after - before) / IDLE }
}

const ms = (value: number) => `${value.toFixed(1)} ms`
const results: Result[] = []
for (const make of [gatewaySystem, socketIoSystem, ceilingSystem]) {
  const system = await make()
  process.stderr.write(`measuring ${system.name} (${N} subscribers)…\n`)
  results.push(await measure(system))
}
const memory = await idleMemory()

console.log(`\nFan-out: ${N} subscribers of one channel, burst of ${BURST} messages, paced ${RATE}/s for ${SECONDS} s (${navigator.hardwareConcurrency} cores)\n`)
console.log('| system | delivered msg/s (burst) | burst p50 / p99 | paced p50 / p99 | lost |')
console.log('| --- | ---: | ---: | ---: | ---: |')
for (const r of results) console.log(`| ${r.name} | ${Math.round(r.burstRate).toLocaleString('en')} | ${ms(r.burst[0])} / ${ms(r.burst[1])} | ${ms(r.paced[0])} / ${ms(r.paced[1])} | ${r.lost} |`)
console.log('\nCPU spent during the burst (ms; two cores give at most twice the wall time):')
for (const r of results) console.log(`- ${r.name} (${r.burstMs.toFixed(0)} ms wall): ${Object.entries(r.cpu).map(([role, ms]) => `${role} ${ms}`).join(', ')}`)
const [gateway, socketio, ceiling] = results as [Result, Result, Result]
console.log(`\ngateway / socket.io delivered msg/s: ${(gateway.burstRate / socketio.burstRate).toFixed(2)}x (target ≥ 5x)`)
console.log(`gateway paced p99 / socket.io paced p99: ${(gateway.paced[1] / socketio.paced[1]).toFixed(2)} (target ≤ 0.20)`)
console.log(`gateway / ceiling delivered msg/s: ${((100 * gateway.burstRate) / ceiling.burstRate).toFixed(0)} % (target ≥ 40 %)`)
const kib = (bytes: number) => `${(bytes / IDLE / 1024).toFixed(2)} KiB`
console.log(`gateway RSS per idle connection at ${IDLE}: ${kib(memory.after - memory.before)} settled (${(memory.before / 2 ** 20).toFixed(0)} → ${(memory.after / 2 ** 20).toFixed(0)} MiB; ${kib(memory.early - memory.before)} 2 s after connecting; target ≤ 4 KiB)`)
await sql.end()
await closeRedis()
process.exit(0)
