// Fan-out benchmark: N WebSocket subscribers of one channel, messages published over HTTP, measured at the subscribers.
// Three systems in the same run, on this machine:
//   gateway   — two gateway processes (subscribers spread over both), published through the public POST /messages
//   socket.io — a two-node Socket.IO 4.8 cluster with @socket.io/redis-streams-adapter, published through node 1
//   ceiling   — one bare Bun.serve publishing to its own topic (server.publish), no Redis, no auth, no protocol
// For each: a burst (delivered messages per second, publish-to-delivery p50/p99) and a paced load (p50/p99). Then the
// gateway's RSS per idle connection at --idle connections. Then the same gateways on channels spread over every shard
// (--channels channels, --per-connection of them per subscriber), on one Redis and on a three-master Redis Cluster the
// benchmark starts itself (test/cluster/redis-cluster.ts), side by side. Method and figures: docs/performance.md.
// Usage: bun run scripts/bench/fanout.ts [--connections 1000] [--burst 200] [--rate 100] [--seconds 5] [--idle 10000]
//          [--channels 256] [--per-connection 8] [--spread-burst 2000] [--runs one-channel,idle,cluster] [--cluster-first]
// Needs DATABASE_URL / REDIS_URL / PLATFORM_SECRET_KEY like the tests (scripts/bench/README.md).
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { io as socketIo, type Socket } from 'socket.io-client'
import { config } from '../../shared/config'
import { fanKey } from '../../shared/realtime/keys'
import { shardOf } from '../../shared/realtime/shards'
import { signToken } from '../../shared/realtime/tokens'
import { closeRedis, redis } from '../../shared/redis/client'
import { keySlot } from '../../shared/redis/key-slot'
import { sql } from '../../shared/db/client'
import { RedisCluster } from '../../test/cluster/redis-cluster'
import { freePort, startWorker, type Worker } from '../../test/helpers'
import { realtimeProduct } from '../../test/realtime/public-helpers'

const { values: args } = parseArgs({
  options: {
    connections: { type: 'string', default: '1000' },
    burst: { type: 'string', default: '200' },
    rate: { type: 'string', default: '100' },
    seconds: { type: 'string', default: '5' },
    idle: { type: 'string', default: '10000' },
    channels: { type: 'string', default: '256' },
    'per-connection': { type: 'string', default: '8' },
    'spread-burst': { type: 'string', default: '2000' },
    runs: { type: 'string', default: 'one-channel,idle,cluster' },
    'cluster-first': { type: 'boolean', default: false },
  },
})
const N = Number(args.connections)
const BURST = Number(args.burst)
const RATE = Number(args.rate)
const SECONDS = Number(args.seconds)
const IDLE = Number(args.idle)
const CHANNELS = Number(args.channels)
const PER_CONNECTION = Math.min(Number(args['per-connection']), CHANNELS)
const SPREAD_BURST = Number(args['spread-burst'])
const RUNS = new Set(args.runs!.split(','))
const now = () => performance.timeOrigin + performance.now()

/** What the benchmark needs of one system. */
interface System {
  name: string
  /** Its server processes, by role, for the CPU each spends on the burst. */
  pids: Record<string, number>
  /** Opens one subscriber; resolves once it is subscribed. `received(sentAt)` is called per delivered message. */
  open(index: number, received: (sentAt: number) => void): Promise<() => void>
  /** Publishes message number `seq` (a system with several channels picks the channel by it). */
  publish(body: string, seq: number): Promise<void>
  /** How many deliveries messages 0..count-1 make to the `subscribers` opened (default: each reaches every one). */
  deliveries?(count: number, subscribers: number): number
  /** Redis CPU time so far (ms, used_cpu_user + used_cpu_sys of INFO cpu), per server, when the system uses Redis. */
  redisCpu?(): Promise<Record<string, number>>
  /** One line on how the system's load is laid out (shards per node), printed with its figures. */
  note?: string
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

/** Every channel `index`'s subscriber subscribes to: `PER_CONNECTION` consecutive channels of the spread run. */
const spreadChannelsOf = (index: number) =>
  Array.from({ length: PER_CONNECTION }, (_, j) => `bench:room-${(index * PER_CONNECTION + j) % CHANNELS}`)

interface GatewayOptions {
  name: string
  /** REDIS_URL of the gateway and public processes (default: the benchmark's own). */
  redisUrl?: string
  /** The channels subscriber `index` subscribes to, and the channel message `seq` goes to. */
  channelsOf(index: number): string[]
  channelOf(seq: number): string
  redisCpu?(): Promise<Record<string, number>>
  /** How the product's channels are laid out, for the output. */
  describe?(productId: string): Promise<string>
}

const oneChannel: GatewayOptions = { name: 'gateway', channelsOf: () => ['bench:room'], channelOf: () => 'bench:room', redisCpu: oneRedisCpu }

async function gatewaySystem(options: GatewayOptions = oneChannel): Promise<System> {
  const product = await realtimeProduct([{ name: 'bench' }])
  const [g1, g2, publicPort] = await Promise.all([freePort(), freePort(), freePort()])
  const redisEnv: Record<string, string> = options.redisUrl ? { REDIS_URL: options.redisUrl } : {}
  const workers: Worker[] = await Promise.all([
    startWorker('gateway/main.ts', { ...redisEnv, ...gatewayEnv(g1) }, g1),
    startWorker('gateway/main.ts', { ...redisEnv, ...gatewayEnv(g2) }, g2),
    startWorker('services/public/main.ts', { ...redisEnv, PUBLIC_PORT: String(publicPort), PUBLIC_IP_RATE_LIMIT: '1000000000', REALTIME_QUOTA_BURST: '1000000000' }, publicPort),
  ])
  // One token per distinct channel set (the sets repeat), signed once.
  const tokens = new Map<string, Promise<string>>()
  const tokenFor = (channels: string[]) => {
    const id = channels.join(',')
    if (!tokens.has(id)) tokens.set(id, signToken({ productId: product.productId, apiKeyId: product.keyId, subject: 'bench', channels: channels.map((name) => ({ name, ops: ['subscribe'] })) }).then((t) => t.token))
    return tokens.get(id)!
  }
  const publishUrl = `http://127.0.0.1:${publicPort}/${product.productId}/realtime/messages`
  return {
    name: options.name,
    pids: { 'gateway 1': workers[0]!.proc.pid, 'gateway 2': workers[1]!.proc.pid, public: workers[2]!.proc.pid },
    open: async (index, received) => {
      const channels = options.channelsOf(index)
      const token = await tokenFor(channels)
      return new Promise((resolve, reject) => {
        const ws = new WebSocket(`ws://127.0.0.1:${index % 2 ? g2 : g1}/connection/websocket`)
        let pending = channels.length
        ws.onopen = () => {
          ws.send(JSON.stringify({ type: 'connect', id: 1, token }))
          channels.forEach((channel, i) => ws.send(JSON.stringify({ type: 'subscribe', id: 2 + i, channel })))
        }
        ws.onmessage = (event) => {
          const frame = JSON.parse(String(event.data))
          if (frame.type === 'publication') received(frame.data.s)
          else if (frame.id >= 2) frame.type === 'reply' ? --pending === 0 && resolve(() => ws.close()) : reject(new Error(frame.message))
        }
        ws.onerror = () => reject(new Error('gateway connection failed'))
        ws.onclose = (event) => reject(new Error(`gateway closed the connection: ${event.code} ${event.reason}`))
      })
    },
    publish: async (body, seq) => {
      const response = await fetch(publishUrl, { method: 'POST', headers: { 'x-api-key': product.key, 'content-type': 'application/json' }, body: `{"channel":"${options.channelOf(seq)}","data":${body}}` })
      if (!response.ok) throw new Error(`publish: ${response.status} ${await response.text()}`)
    },
    deliveries: (count, subscribers) => {
      const perChannel = new Map<string, number>()
      for (let i = 0; i < subscribers; i++) for (const channel of options.channelsOf(i)) perChannel.set(channel, (perChannel.get(channel) ?? 0) + 1)
      let total = 0
      for (let seq = 0; seq < count; seq++) total += perChannel.get(options.channelOf(seq)) ?? 0
      return total
    },
    redisCpu: options.redisCpu,
    note: await options.describe?.(product.productId),
    stop: async () => void (await Promise.all(workers.map((w) => w.stop()))),
  }
}

const infoCpuMs = (info: string) =>
  Math.round(1000 * ['used_cpu_user', 'used_cpu_sys'].reduce((sum, field) => sum + Number(new RegExp(`^${field}:([\\d.]+)`, 'm').exec(info)?.[1] ?? 0), 0))
/** The benchmark's one Redis: its whole server's CPU (other clients of that server included). */
async function oneRedisCpu(): Promise<Record<string, number>> {
  return { redis: infoCpuMs(await redis().info('cpu')) }
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
  note?: string
  burstRate: number
  /** Burst wall time and CPU ms per process. */
  burstMs: number
  cpu: Record<string, number>
  burst: [number, number]
  paced: [number, number]
  lost: number
}

async function measure(system: System, burstMessages = BURST): Promise<Result> {
  const expected = (count: number) => (system.deliveries ? system.deliveries(count, N) : count * N)
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
    while (warm < 400) await system.publish('{"s":0}', warm++)
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
  const redisBefore = await system.redisCpu?.()
  const start = now()
  let next = 0
  await Promise.all(Array.from({ length: 16 }, async () => {
    while (next < burstMessages) await system.publish(`{"s":${now()}}`, next++)
  }))
  await waitFor(expected(burstMessages), 60_000)
  const cpu = Object.fromEntries(Object.keys(roles).map((role, i) => [role, Math.round(cpuOf(Object.values(roles)[i]!) - cpuBefore[i]!)]))
  const redisAfter = await system.redisCpu?.()
  for (const server of Object.keys(redisAfter ?? {})) cpu[server] = redisAfter![server]! - redisBefore![server]!
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
    void system.publish(`{"s":${now()}}`, i)
  }
  await waitFor(expected(total), 60_000)
  const paced = Float64Array.from(latencies).sort()
  const lost = expected(burstMessages) - burstDelivered + (expected(total) - delivered)
  for (const close of closers) close()
  await system.stop()
  return { name: system.name, note: system.note, burstRate, burstMs, cpu, burst: [percentile(burst, 0.5), percentile(burst, 0.99)], paced: [percentile(paced, 0.5), percentile(paced, 0.99)], lost }
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

/** The shards the spread run's channels use, and how many subscriptions each holds. */
function spreadShards(productId: string): Map<number, number> {
  const shards = new Map<number, number>()
  for (let c = 0; c < CHANNELS; c++) {
    const shard = shardOf(productId, `bench:room-${c}`)
    shards.set(shard, (shards.get(shard) ?? 0) + 1)
  }
  return shards
}

/** The spread run on one Redis: the benchmark's own REDIS_URL. */
const spreadOnOneRedis = (): GatewayOptions => ({
  name: 'one Redis',
  channelsOf: spreadChannelsOf,
  channelOf: (seq) => `bench:room-${seq % CHANNELS}`,
  redisCpu: oneRedisCpu,
  describe: async (productId) => `${CHANNELS} channels on ${spreadShards(productId).size} of ${config.realtime.shards} shards, all on one Redis`,
})

/** The spread run on `cluster`: gateways and public worker on REDIS_URL=redis+cluster://..., each node's CPU read apart. */
const spreadOnCluster = (cluster: RedisCluster): GatewayOptions => ({
  name: `cluster (${cluster.ports.length} masters)`,
  redisUrl: cluster.url,
  channelsOf: spreadChannelsOf,
  channelOf: (seq) => `bench:room-${seq % CHANNELS}`,
  redisCpu: async () => Object.fromEntries(await Promise.all(cluster.ports.map(async (port, i) => [`node ${i + 1}`, infoCpuMs(await cluster.cli(port, 'INFO', 'cpu'))]))),
  describe: async (productId) => {
    const shards = spreadShards(productId)
    const perNode = new Map<number, number[]>()
    for (const shard of shards.keys()) {
      const port = await cluster.ownerOf(keySlot(fanKey(shard)))
      perNode.set(port, [...(perNode.get(port) ?? []), shard])
    }
    const nodes = cluster.ports.map((port, i) => `node ${i + 1}: ${(perNode.get(port) ?? []).length} shards, ${(perNode.get(port) ?? []).reduce((sum, shard) => sum + shards.get(shard)!, 0)} channels`)
    return `${CHANNELS} channels on ${shards.size} of ${config.realtime.shards} shards; ${nodes.join('; ')}`
  },
})

// A cluster started here is stopped on every way out: the end, a failure, Ctrl-C or SIGTERM (the workers go with the
// process: test/helpers.ts kills them on exit).
let cluster: RedisCluster | undefined
async function stopCluster() {
  const running = cluster
  cluster = undefined
  await running?.stop()
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => void stopCluster().finally(() => process.exit(130)))
}

const ms = (value: number) => `${value.toFixed(1)} ms`
const rate = (value: number) => Math.round(value).toLocaleString('en')
const cpuLine = (r: Result) => `- ${r.name} (${r.burstMs.toFixed(0)} ms wall): ${Object.entries(r.cpu).map(([role, ms]) => `${role} ${ms}`).join(', ')}`
const cores = navigator.hardwareConcurrency
try {
  if (RUNS.has('one-channel')) {
    const results: Result[] = []
    for (const make of [() => gatewaySystem(), socketIoSystem, ceilingSystem]) {
      const system = await make()
      process.stderr.write(`measuring ${system.name} (${N} subscribers)…\n`)
      results.push(await measure(system))
    }
    console.log(`\nFan-out: ${N} subscribers of one channel, burst of ${BURST} messages, paced ${RATE}/s for ${SECONDS} s (${cores} cores)\n`)
    console.log('| system | delivered msg/s (burst) | burst p50 / p99 | paced p50 / p99 | lost |')
    console.log('| --- | ---: | ---: | ---: | ---: |')
    for (const r of results) console.log(`| ${r.name} | ${rate(r.burstRate)} | ${ms(r.burst[0])} / ${ms(r.burst[1])} | ${ms(r.paced[0])} / ${ms(r.paced[1])} | ${r.lost} |`)
    console.log('\nCPU spent during the burst (ms; two cores give at most twice the wall time; redis: the whole server, other clients included):')
    for (const r of results) console.log(cpuLine(r))
    const [gateway, socketio, ceiling] = results as [Result, Result, Result]
    console.log(`\ngateway / socket.io delivered msg/s: ${(gateway.burstRate / socketio.burstRate).toFixed(2)}x (target ≥ 5x)`)
    console.log(`gateway paced p99 / socket.io paced p99: ${(gateway.paced[1] / socketio.paced[1]).toFixed(2)} (target ≤ 0.20)`)
    console.log(`gateway / ceiling delivered msg/s: ${((100 * gateway.burstRate) / ceiling.burstRate).toFixed(0)} % (target ≥ 40 %)`)
  }
  if (RUNS.has('idle')) {
    const memory = await idleMemory()
    const kib = (bytes: number) => `${(bytes / IDLE / 1024).toFixed(2)} KiB`
    console.log(`\ngateway RSS per idle connection at ${IDLE}: ${kib(memory.after - memory.before)} settled (${(memory.before / 2 ** 20).toFixed(0)} → ${(memory.after / 2 ** 20).toFixed(0)} MiB; ${kib(memory.early - memory.before)} 2 s after connecting; target ≤ 4 KiB)`)
  }
  if (RUNS.has('cluster')) {
    process.stderr.write('starting a three-master Redis Cluster…\n')
    cluster = new RedisCluster()
    await cluster.start()
    // One Redis first unless --cluster-first: running both orders shows what the order itself does to the figures.
    const runs = [spreadOnOneRedis(), spreadOnCluster(cluster)]
    if (args['cluster-first']) runs.reverse()
    const measured: Result[] = []
    for (const options of runs) {
      const system = await gatewaySystem(options)
      process.stderr.write(`measuring ${system.name} (${N} subscribers × ${PER_CONNECTION} of ${CHANNELS} channels)…\n`)
      measured.push(await measure(system, SPREAD_BURST))
    }
    await stopCluster()
    const results = args['cluster-first'] ? measured.reverse() : measured
    const [one, spread] = results as [Result, Result]
    const fanout = (N * PER_CONNECTION) / CHANNELS
    console.log(`\nFan-out over every shard: two gateways, ${N} subscribers × ${PER_CONNECTION} channels of ${CHANNELS} (about ${fanout.toFixed(1)} subscribers a message), burst of ${SPREAD_BURST} messages over all channels, paced ${RATE}/s for ${SECONDS} s (${cores} cores; ${args['cluster-first'] ? 'cluster' : 'one Redis'} measured first)\n`)
    console.log('| Redis | delivered msg/s (burst) | publishes/s (burst) | burst p50 / p99 | paced p50 / p99 | lost |')
    console.log('| --- | ---: | ---: | ---: | ---: | ---: |')
    for (const r of results) console.log(`| ${r.name} | ${rate(r.burstRate)} | ${rate(SPREAD_BURST / (r.burstMs / 1000))} | ${ms(r.burst[0])} / ${ms(r.burst[1])} | ${ms(r.paced[0])} / ${ms(r.paced[1])} | ${r.lost} |`)
    console.log('\nCPU spent during the burst (ms; redis: INFO cpu of each server, the one Redis shared with other clients):')
    for (const r of results) console.log(cpuLine(r))
    for (const r of results) console.log(`- ${r.name}: ${r.note}`)
    console.log(`\ncluster / one Redis: delivered msg/s ${(spread.burstRate / one.burstRate).toFixed(2)}x; burst p99 ${(spread.burst[1] / one.burst[1]).toFixed(2)}x; paced p50 ${(spread.paced[0] / one.paced[0]).toFixed(2)}x, p99 ${(spread.paced[1] / one.paced[1]).toFixed(2)}x`)
    console.log(`On ${cores} cores the three redis-servers share the same cores as the gateways, the public worker and this client: the cluster cannot win here.`)
    console.log('What it buys is memory and Redis CPU spread over machines; here the figures show what its extra hops cost (a reader connection per shard, slot routing).')
  }
} finally {
  await stopCluster()
}
await sql.end()
await closeRedis()
process.exit(0)
