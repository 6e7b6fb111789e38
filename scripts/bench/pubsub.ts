// Pub/sub on a Redis Cluster: plain PUBLISH (the cluster broadcasts every message over its bus to every node, so a
// subscriber may sit on any node) against sharded SPUBLISH (Redis 7+: the message stays on the node that holds the
// channel's slot, so every subscriber must sit there). The question it answers: which one should carry the platform's
// cache invalidations (shared/cache/invalidation.ts), which every worker and gateway must hear.
// On a three-master cluster it starts itself (test/cluster/redis-cluster.ts) and stops at the end or on Ctrl-C, for
// each subscriber count (one connection per simulated worker process): a burst (publish rate sustained until every
// subscriber has every message), a paced load (publish-to-delivery p50/p99), and per node the Redis CPU, the client
// bytes in and out, and the cluster-bus publish messages, before/after each burst. Figures: docs/realtime-data-plane.md.
// Usage: bun run scripts/bench/pubsub.ts [--subscribers 8,32] [--messages 5000] [--rate 500] [--seconds 3] [--payload 100]
// Needs only redis-server and redis-cli (Redis 7+ for SPUBLISH) and ss; no platform service, no environment.
import Redis from 'ioredis'
import { parseArgs } from 'node:util'
import { RedisCluster } from '../../test/cluster/redis-cluster'

const { values: args } = parseArgs({
  options: {
    subscribers: { type: 'string', default: '8,32' },
    messages: { type: 'string', default: '5000' },
    rate: { type: 'string', default: '500' },
    seconds: { type: 'string', default: '3' },
    payload: { type: 'string', default: '100' },
  },
})
const SUBSCRIBERS = args.subscribers!.split(',').map(Number)
const MESSAGES = Number(args.messages)
const RATE = Number(args.rate)
const SECONDS = Number(args.seconds)
const PADDING = 'x'.repeat(Math.max(0, Number(args.payload) - 20))
/** Publishes kept in flight during the burst (ioredis pipelines them on one connection). */
const IN_FLIGHT = 64
// The shape of an invalidation: one channel every process listens on (shared/cache/invalidation.ts uses one too).
const CHANNEL = 'bench:invalidate'
const now = () => performance.timeOrigin + performance.now()

type Mode = 'PUBLISH' | 'SPUBLISH'

/** Per node: Redis CPU ms, client bytes in/out, cluster-bus publish messages sent/received (CLUSTER INFO). */
interface NodeCounters {
  cpuMs: number
  inBytes: number
  outBytes: number
  busSent: number
  busReceived: number
  /** Bytes both ways on the cluster-bus links this node accepted (TCP counters from `ss`), gossip included. */
  busBytes: number
}

const field = (text: string, name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(text)?.[1] ?? 0)

/**
 * Bytes carried so far by the TCP connections accepted on `port`'s cluster-bus port (port + 10 000), both ways. Every
 * link between two nodes has one end there, so the nodes' figures add up to the whole bus (each link counted once).
 */
async function busBytesOf(port: number): Promise<number> {
  const proc = Bun.spawn(['ss', '-tinH', 'state', 'established', `( sport = :${port + 10_000} )`], { stdout: 'pipe' })
  const text = await new Response(proc.stdout).text()
  let total = 0
  for (const match of text.matchAll(/bytes_(?:sent|received):(\d+)/g)) total += Number(match[1])
  return total
}

async function countersOf(cluster: RedisCluster, port: number): Promise<NodeCounters> {
  const [info, clusterInfo, busBytes] = await Promise.all([cluster.cli(port, 'INFO', 'all'), cluster.cli(port, 'CLUSTER', 'INFO'), busBytesOf(port)])
  const bus = (direction: 'sent' | 'received') =>
    field(clusterInfo, `cluster_stats_messages_publish_${direction}`) + field(clusterInfo, `cluster_stats_messages_publishshard_${direction}`)
  return {
    cpuMs: Math.round(1000 * (field(info, 'used_cpu_user') + field(info, 'used_cpu_sys'))),
    inBytes: field(info, 'total_net_input_bytes'),
    outBytes: field(info, 'total_net_output_bytes'),
    busSent: bus('sent'),
    busReceived: bus('received'),
    busBytes,
  }
}

const percentile = (sorted: Float64Array, p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]! : NaN)

interface Result {
  mode: Mode
  subscribers: number
  /** Messages a second, from the first publish until every subscriber has every message. */
  sustained: number
  burstMs: number
  paced: [number, number]
  /** PUBLISH only: paced p50/p99 of the subscribers on the publisher's node, and on the others (one bus hop more). */
  pacedLocal?: [number, number]
  pacedRemote?: [number, number]
  lost: number
  /** Per node (port order): the burst's counters, after minus before. */
  nodes: NodeCounters[]
}

async function measure(cluster: RedisCluster, mode: Mode, count: number): Promise<Result> {
  const owner = await cluster.ownerOf(Number((await cluster.cli(cluster.ports[0]!, 'CLUSTER', 'KEYSLOT', CHANNEL)).trim()))
  // PUBLISH: subscribers spread over every node, the publisher on the first (any node would do: the bus carries it).
  // SPUBLISH: everyone on the node holding the channel's slot (elsewhere Redis answers MOVED).
  const nodeOf = (i: number) => (mode === 'PUBLISH' ? cluster.ports[i % cluster.ports.length]! : owner)
  const publisher = new Redis({ host: '127.0.0.1', port: mode === 'PUBLISH' ? cluster.ports[0]! : owner })
  const publisherPort = mode === 'PUBLISH' ? cluster.ports[0]! : owner
  let latencies: number[] = []
  let local: number[] = []
  let remote: number[] = []
  let delivered = 0
  let last = 0
  const received = (message: string, port: number) => {
    const at = now()
    const latency = at - Number(message.slice(0, message.indexOf(' ')))
    latencies.push(latency)
    ;(port === publisherPort ? local : remote).push(latency)
    delivered++
    last = at
  }
  const subscribers = await Promise.all(Array.from({ length: count }, async (_, i) => {
    const port = nodeOf(i)
    const subscriber = new Redis({ host: '127.0.0.1', port })
    if (mode === 'PUBLISH') {
      subscriber.on('message', (_channel: string, message: string) => received(message, port))
      await subscriber.subscribe(CHANNEL)
    } else {
      subscriber.on('smessage', (_channel: string, message: string) => received(message, port))
      await subscriber.ssubscribe(CHANNEL)
    }
    return subscriber
  }))
  const send = (message: string) => (mode === 'PUBLISH' ? publisher.publish(CHANNEL, message) : publisher.spublish(CHANNEL, message))
  const waitFor = async (expected: number, ms: number) => {
    for (const deadline = Date.now() + ms; delivered < expected && Date.now() < deadline; ) await Bun.sleep(5)
  }
  // Warm-up (JIT, connections), not measured.
  for (let i = 0; i < 200; i++) await send(`${now()} ${PADDING}`)
  await waitFor(200 * count, 10_000)

  // Burst: MESSAGES as fast as IN_FLIGHT outstanding publishes go.
  delivered = 0
  const before = await Promise.all(cluster.ports.map((port) => countersOf(cluster, port)))
  const start = now()
  let next = 0
  await Promise.all(Array.from({ length: IN_FLIGHT }, async () => {
    while (next++ < MESSAGES) await send(`${now()} ${PADDING}`)
  }))
  await waitFor(MESSAGES * count, 60_000)
  const burstMs = last - start
  const burstDelivered = delivered
  const after = await Promise.all(cluster.ports.map((port) => countersOf(cluster, port)))

  // Paced: RATE a second for SECONDS.
  latencies = []
  local = []
  remote = []
  delivered = 0
  const total = RATE * SECONDS
  const pacedStart = now()
  for (let i = 0; i < total; i++) {
    const wait = pacedStart + (i * 1000) / RATE - now()
    if (wait > 1) await Bun.sleep(wait)
    void send(`${now()} ${PADDING}`)
  }
  await waitFor(total * count, 30_000)
  const paced = Float64Array.from(latencies).sort()
  const p50p99 = (values: number[]): [number, number] => {
    const sorted = Float64Array.from(values).sort()
    return [percentile(sorted, 0.5), percentile(sorted, 0.99)]
  }
  const lost = MESSAGES * count - burstDelivered + (total * count - delivered)
  for (const connection of [publisher, ...subscribers]) connection.disconnect()
  return {
    mode, subscribers: count, sustained: MESSAGES / (burstMs / 1000), burstMs, paced: [percentile(paced, 0.5), percentile(paced, 0.99)], lost,
    ...(mode === 'PUBLISH' ? { pacedLocal: p50p99(local), pacedRemote: p50p99(remote) } : {}),
    nodes: after.map((a, i) => {
      const b = before[i]!
      return { cpuMs: a.cpuMs - b.cpuMs, inBytes: a.inBytes - b.inBytes, outBytes: a.outBytes - b.outBytes, busSent: a.busSent - b.busSent, busReceived: a.busReceived - b.busReceived, busBytes: a.busBytes - b.busBytes }
    }),
  }
}

// The cluster is stopped on every way out: the end, a failure, Ctrl-C or SIGTERM.
let cluster: RedisCluster | undefined
async function stopCluster() {
  const running = cluster
  cluster = undefined
  await running?.stop()
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void stopCluster().finally(() => process.exit(130)))

const results: Result[] = []
let version = ''
try {
  cluster = new RedisCluster()
  await cluster.start()
  version = /redis_version:(\S+)/.exec(await cluster.cli(cluster.ports[0]!, 'INFO', 'server'))?.[1] ?? '?'
  for (const count of SUBSCRIBERS) {
    for (const mode of ['PUBLISH', 'SPUBLISH'] as const) {
      process.stderr.write(`measuring ${mode} to ${count} subscribers…\n`)
      results.push(await measure(cluster, mode, count))
    }
  }
} finally {
  await stopCluster()
}

const fixed = (value: number, digits = 1) => value.toFixed(digits)
const kib = (bytes: number) => `${Math.round(bytes / 1024).toLocaleString('en')}`
const bus = (r: Result) => r.nodes.reduce((sum, n) => sum + n.busBytes, 0)
console.log(`\nPub/sub on a three-master Redis Cluster (Redis ${version}, ${navigator.hardwareConcurrency} cores): one channel, ~${PADDING.length + 20}-byte messages; burst of ${MESSAGES} (${IN_FLIGHT} in flight), paced ${RATE}/s for ${SECONDS} s`)
console.log('PUBLISH: subscribers spread over the nodes, publisher on node 1. SPUBLISH: subscribers and publisher on the node holding the channel\'s slot.\n')
console.log('| mode | subscribers | sustained msg/s | deliveries/s | paced p50 / p99 | lost | Redis CPU ms per node (sum) | client KiB in / out per node | bus publish msgs sent / received per node | bus KiB (per message) |')
console.log('| --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- | ---: |')
for (const r of results) {
  const cpu = r.nodes.map((n) => n.cpuMs)
  console.log(`| ${r.mode} | ${r.subscribers} | ${Math.round(r.sustained).toLocaleString('en')} | ${Math.round(r.sustained * r.subscribers).toLocaleString('en')} | ${fixed(r.paced[0], 2)} / ${fixed(r.paced[1], 2)} ms | ${r.lost} | ${cpu.join(' / ')} (${cpu.reduce((a, b) => a + b, 0)}) | ${r.nodes.map((n) => `${kib(n.inBytes)} / ${kib(n.outBytes)}`).join(', ')} | ${r.nodes.map((n) => `${n.busSent} / ${n.busReceived}`).join(', ')} | ${kib(bus(r))} (${Math.round(bus(r) / MESSAGES).toLocaleString('en')} B) |`)
}
console.log('\nPUBLISH paced latency by where the subscriber sits:')
for (const r of results.filter((r) => r.pacedLocal)) {
  console.log(`- ${r.subscribers} subscribers: on the publisher's node ${fixed(r.pacedLocal![0], 2)} / ${fixed(r.pacedLocal![1], 2)} ms, on the other nodes (over the bus) ${fixed(r.pacedRemote![0], 2)} / ${fixed(r.pacedRemote![1], 2)} ms`)
}
console.log('\nRatios, SPUBLISH over PUBLISH, same subscriber count:')
for (const count of SUBSCRIBERS) {
  const [plain, sharded] = (['PUBLISH', 'SPUBLISH'] as const).map((mode) => results.find((r) => r.mode === mode && r.subscribers === count)!)
  const cpu = (r: Result) => r.nodes.reduce((sum, n) => sum + n.cpuMs, 0) / MESSAGES
  console.log(`- ${count} subscribers: sustained ${(sharded!.sustained / plain!.sustained).toFixed(2)}x; paced p99 ${(sharded!.paced[1] / plain!.paced[1]).toFixed(2)}x; Redis CPU per message (all nodes) ${(1000 * cpu(plain!)).toFixed(1)} µs plain, ${(1000 * cpu(sharded!)).toFixed(1)} µs sharded`)
}
console.log('Bus KiB: every byte on the cluster-bus links during the burst (TCP counters), the nodes\' gossip included; the SPUBLISH rows, which send nothing on the bus, show that baseline.')
console.log(`\nOn ${navigator.hardwareConcurrency} cores the three nodes, the publisher and every subscriber (one process here) share the same cores: the`)
console.log('sustained rate is bounded by this process parsing every delivery; compare the rows and the per-node cost, not absolutes.')
process.exit(0)
