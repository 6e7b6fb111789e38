// Publish benchmark: broker publish() vs two plain XADDs, and the public POST /messages and POST /tokens/issue, each vs a
// guard-free Bun.serve peer.
// On a Redis Cluster (REDIS_URL=redis+cluster://...) the same rows measure the cluster's publish (three round trips).
// Usage: bun run scripts/bench/publish.ts [--messages N] [--http-messages N] [--token-requests N] [--concurrency C]
//        [--channels K] [--rounds R]
// Needs DATABASE_URL / REDIS_URL (and S3_URL) like the tests; see scripts/bench/README.md.
import { randomUUID } from 'node:crypto'
import os from 'node:os'
import { parseArgs } from 'node:util'
import { sql } from '../../shared/db/client'
import { publish, type HistoryPolicy } from '../../shared/realtime/broker'
import { config } from '../../shared/config'
import { channelKeys, shardTag } from '../../shared/realtime/keys'
import { verifyToken, type Claims } from '../../shared/realtime/tokens'
import type { Cluster } from 'ioredis'
import { closeRedis, redis } from '../../shared/redis/client'
import { onCluster } from '../../shared/redis/cluster'
import { freePort, startWorker, type Worker } from '../../test/helpers'
import { processCpuSeconds, redisCpuSeconds } from './cpu'
import { realtimeProduct } from '../../test/realtime/public-helpers'

const { values: args } = parseArgs({
  options: {
    messages: { type: 'string' },
    'http-messages': { type: 'string' },
    'token-requests': { type: 'string' },
    concurrency: { type: 'string', default: '32' },
    channels: { type: 'string', default: '16' },
    rounds: { type: 'string', default: '3' },
  },
})
const positive = (name: string, raw: string | undefined, fallback: number) => {
  if (raw === undefined) return fallback
  const value = Number(raw)
  if (!Number.isInteger(value) || value <= 0) throw new Error(`--${name} must be a positive integer, got "${raw}"`)
  return value
}
// Measured operations per row (split over the rounds). --messages alone sets both publish levels; --http-messages the
// HTTP one; --token-requests the token issue pair (the defaults keep the whole run near 40 s on 2 cores).
const LIB_N = positive('messages', args.messages, 60_000)
const HTTP_N = positive('http-messages', args['http-messages'], args.messages !== undefined ? LIB_N : 60_000)
const TOKEN_N = positive('token-requests', args['token-requests'], 60_000)
const CONCURRENCY = positive('concurrency', args.concurrency, 32)
const CHANNELS = positive('channels', args.channels, 16)
const ROUNDS = positive('rounds', args.rounds, 3)
/**
 * Operations each side runs before a row is measured: one round's worth, and at least this many. A server's hot code
 * reaches JavaScriptCore's optimizing tiers only after thousands of calls; with 500 (the earlier figure) the HTTP rows
 * measured workers still warming, the platform's route (more code to compile) more than the bare peer: its server CPU
 * per request read 88 µs where it runs at 56 warm, its peer's 48 where 31 (docs/performance.md).
 */
const WARMUP_MIN = 500
const warmupOf = (n: number) => Math.max(WARMUP_MIN, Math.ceil(n / ROUNDS))
const POLICY: HistoryPolicy = { historyTtlSeconds: 300, historySize: 1000 }
const CLIENT_IP = '10.200.0.1'
/** The peer's own key prefix, so its streams never mix with the data plane's `rt:` keys. */
const PEER_PREFIX = 'bench:peer'
/** Set on Ctrl-C / SIGTERM: the running step stops issuing operations. */
let interrupted = false

/** A small chat-like message (~70 bytes serialized). */
const message = (i: number) => ({ text: 'hello from the publish benchmark', seq: i, at: 1_790_000_000_000 + i })

interface Row {
  level: string
  name: string
  ops: number
  /** Slowest and fastest round, ops/s. */
  range: [number, number]
  p50: number
  p99: number
  bytesPerEntry?: number
  /** Redis CPU (user + system, INFO cpu) per operation over the measured rounds, µs. */
  redisUs: number
  /** The serving process's CPU per operation, µs (HTTP rows: the worker or the peer server). */
  processUs?: number
}

type Op = (i: number) => Promise<void>
/** One side of a pair: its name, its operation, and the process that serves it (for its CPU), if not this one. */
type Side = [name: string, op: Op, serverPid?: number]

/** Runs operations `from`..`from + n - 1` keeping `concurrency` in flight; per-operation latency in ms. Stops on Ctrl-C. */
async function drive(from: number, n: number, concurrency: number, op: Op): Promise<{ latencies: Float64Array; seconds: number }> {
  const latencies = new Float64Array(n)
  let next = 0
  const worker = async () => {
    for (let i = next++; i < n && !interrupted; i = next++) {
      const started = performance.now()
      await op(from + i)
      latencies[i] = performance.now() - started
    }
  }
  const started = performance.now()
  await Promise.all(Array.from({ length: Math.min(concurrency, n) }, worker))
  if (interrupted) throw new Error('interrupted')
  return { latencies, seconds: (performance.now() - started) / 1000 }
}

/**
 * Measures a subject against its peer: both warm up (connections, scripts, caches, JIT), then ROUNDS rounds of
 * `n / ROUNDS` operations each, alternating which goes first (ABBA…) so drift and ordering hit both alike.
 * ops/s is all operations over all measured time; p50/p99 pool every round's latencies.
 */
async function compare(level: string, n: number, subject: Side, peer: Side): Promise<[Row, Row]> {
  const sides = [subject, peer]
  const warmup = warmupOf(n)
  for (const [, op] of sides) await drive(0, warmup, CONCURRENCY, op)
  const perRound = Math.ceil(n / ROUNDS)
  const results: { latencies: Float64Array; seconds: number }[][] = [[], []]
  // CPU seconds spent during each side's rounds: Redis (INFO cpu) and the serving process (/proc).
  const cpu = [{ redis: 0, process: 0 }, { redis: 0, process: 0 }]
  for (let round = 0; round < ROUNDS; round++) {
    for (const side of round % 2 === 0 ? [0, 1] : [1, 0]) {
      const pid = sides[side]![2]
      const before = [await redisCpuSeconds(redis()), pid ? await processCpuSeconds(pid) : 0]
      results[side]!.push(await drive(warmup + round * perRound, perRound, CONCURRENCY, sides[side]![1]))
      cpu[side]!.redis += (await redisCpuSeconds(redis())) - before[0]!
      if (pid) cpu[side]!.process += (await processCpuSeconds(pid)) - before[1]!
    }
  }
  const summarize = (side: number): Row => {
    const runs = results[side]!
    const all = new Float64Array(runs.reduce((sum, r) => sum + r.latencies.length, 0))
    let at = 0
    for (const r of runs) {
      all.set(r.latencies, at)
      at += r.latencies.length
    }
    all.sort()
    const q = (p: number) => all[Math.min(all.length - 1, Math.floor(p * all.length))]!
    const rates = runs.map((r) => r.latencies.length / r.seconds)
    return {
      level, name: sides[side]![0], ops: all.length / runs.reduce((sum, r) => sum + r.seconds, 0),
      range: [Math.min(...rates), Math.max(...rates)], p50: q(0.5), p99: q(0.99),
      redisUs: cpu[side]!.redis / all.length * 1e6,
      ...(sides[side]![2] ? { processUs: cpu[side]!.process / all.length * 1e6 } : {}),
    }
  }
  console.error(`  done: ${level}`)
  return [summarize(0), summarize(1)]
}

/** Redis bytes per stored entry over the given streams (MEMORY USAGE with every node sampled). */
async function bytesPerEntry(keys: string[]): Promise<number | undefined> {
  let bytes = 0
  let entries = 0
  for (const key of keys) {
    const usage = (await redis().call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) as number | null
    if (usage === null) continue
    bytes += usage
    entries += await redis().xlen(key)
  }
  return entries > 0 ? bytes / entries : undefined
}

/** Mean MEMORY USAGE of the given keys (those that exist). */
async function bytesPerKey(keys: string[]): Promise<number | undefined> {
  const sizes = (await Promise.all(keys.map((key) => redis().call('MEMORY', 'USAGE', key) as Promise<number | null>))).filter((n) => n !== null)
  return sizes.length > 0 ? sizes.reduce((a, b) => a + b, 0) / sizes.length : undefined
}

const peerHistKey = (productId: string, channel: string) => `${PEER_PREFIX}:${shardTag(channelKeys(productId, channel).shard)}:hist:${productId}:${channel}`
const peerFanKey = (productId: string, channel: string) => `${PEER_PREFIX}:${shardTag(channelKeys(productId, channel).shard)}:fan`

// ---- lifecycle: children and Redis keys are cleaned up on success, failure and Ctrl-C ----

const workers = new Set<Worker>()
const createdKeys = new Set<string>()
let cleaning: Promise<void> | undefined

function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    await Promise.all([...workers].map((w) => w.stop().catch(() => 0)))
    workers.clear()
    const keys = [...createdKeys]
    // One DEL per key: on a cluster a DEL of several keys must not span slots.
    for (let i = 0; i < keys.length; i += 500) await Promise.all(keys.slice(i, i + 500).map((key) => redis().del(key).catch(() => 0)))
    await closeRedis()
    await sql.end({ timeout: 2 }).catch(() => {})
  })()
  return cleaning
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (interrupted) return
    interrupted = true
    console.error(`\n${signal}: stopping child processes and removing benchmark keys`)
    // The running step drains its in-flight operations and throws; main's `finally` cleans up. This is the backstop.
    for (const w of workers) w.proc.kill('SIGTERM')
    setTimeout(() => process.exit(130), 5000).unref()
  })
}
// Last resort (an exception before cleanup ran): never leave a worker behind.
process.on('exit', () => {
  for (const w of workers) w.proc.kill('SIGKILL')
})

async function start(script: string, env: Record<string, string>, portVar: string): Promise<Worker> {
  const port = await freePort()
  const worker = await startWorker(script, { [portVar]: String(port), ...env }, port)
  workers.add(worker)
  return worker
}

// ---- the benchmark ----

async function main() {
  const redisVersion = /redis_version:(\S+)/.exec((await redis().info('server')) as string)?.[1] ?? '?'
  const cpus = os.cpus()
  console.log('Publish benchmark')
  const where = onCluster() ? `a Redis Cluster of ${(redis() as Cluster).nodes('master').length} masters` : 'one Redis'
  console.log(`  bun ${Bun.version}, ${cpus.length} CPUs (${cpus[0]?.model.trim() ?? '?'}), ${os.platform()} ${os.release()}, Redis ${redisVersion} (${where})`)
  console.log(`  library: ${LIB_N} messages; HTTP: ${HTTP_N} requests; token issue: ${TOKEN_N} requests; concurrency ${CONCURRENCY}; ${CHANNELS} channels; ` +
    `history policy ttl ${POLICY.historyTtlSeconds} s, size ${POLICY.historySize}; warm-up one round's operations per side (at least ${WARMUP_MIN}); ` +
    `payload ${JSON.stringify(message(0)).length} B; ${ROUNDS} alternating rounds per pair`)

  const product = await realtimeProduct([{ name: 'bench', history: { ttlSeconds: POLICY.historyTtlSeconds, size: POLICY.historySize } }])
  const { productId, key, keyId } = product
  console.log(`  product ${productId} (fresh, namespace "bench")\n`)
  const channelSet = (tag: string) => Array.from({ length: CHANNELS }, (_, k) => `bench:${tag}-${k}`)
  const remember = (channels: string[]) => {
    for (const channel of channels) {
      const keys = channelKeys(productId, channel)
      createdKeys.add(keys.hist).add(keys.meta).add(peerHistKey(productId, channel)).add(peerFanKey(productId, channel))
    }
  }
  const rows: Row[] = []

  // Library level: the same channels and payloads; the peer writes its own `bench:peer:` keys.
  const libChannels = channelSet('lib')
  remember(libChannels)
  console.error('running library level…')
  const library = await compare('library', LIB_N, ['publish() — Lua: epoch, offset, history, fan-out', async (i) => {
    await publish({ productId, channel: libChannels[i % CHANNELS]!, policy: POLICY, data: JSON.stringify(message(i)) })
  }], ['peer: pipeline of 2 × XADD, no Lua/offset/epoch', async (i) => {
    const channel = libChannels[i % CHANNELS]!
    const id = randomUUID()
    const data = JSON.stringify(message(i))
    const now = Date.now()
    const replies = await redis().pipeline()
      .xadd(peerHistKey(productId, channel), 'MAXLEN', POLICY.historySize, '*', 't', now, 'i', id, 'd', data)
      .xadd(peerFanKey(productId, channel), 'MINID', '~', now - config.realtime.fanoutRetentionMs, '*', 'channel', channel, 'product', productId, 'id', id, 't', now, 'd', data)
      .exec()
    const failed = replies?.find(([error]) => error)
    if (!replies || failed) throw failed?.[0] ?? new Error('pipeline aborted')
  }])
  library[0].bytesPerEntry = await bytesPerEntry(libChannels.map((c) => channelKeys(productId, c).hist))
  library[1].bytesPerEntry = await bytesPerEntry(libChannels.map((c) => peerHistKey(productId, c)))
  rows.push(...library)
  const metaBytes = await bytesPerKey(libChannels.map((c) => channelKeys(productId, c).meta))

  // HTTP level: one real public worker vs. one peer process, each on its own channels, the same client loop.
  console.error('starting the public worker and the peer server…')
  const [publicWorker, peer] = await Promise.all([
    start('services/public/main.ts', {
      TRUST_PROXY: '1', REALTIME_QUOTA_BURST: '10000000', PUBLIC_IP_RATE_LIMIT: '100000000',
    }, 'PUBLIC_PORT'),
    start('scripts/bench/peer-server.ts', {
      BENCH_HISTORY_TTL_SECONDS: String(POLICY.historyTtlSeconds), BENCH_HISTORY_SIZE: String(POLICY.historySize),
      BENCH_API_KEY_ID: keyId,
    }, 'BENCH_PEER_PORT'),
  ])
  const headers = { 'x-api-key': key, 'content-type': 'application/json', 'x-forwarded-for': CLIENT_IP }
  const post = (base: string, channels: string[]) => async (i: number) => {
    const response = await fetch(`${base}/${productId}/realtime/messages`, {
      method: 'POST', headers, body: JSON.stringify({ channel: channels[i % CHANNELS], data: message(i) }),
    })
    const text = await response.text()
    if (response.status !== 200) throw new Error(`${base} answered ${response.status}: ${text.slice(0, 300)}`)
  }
  const publicChannels = channelSet('http')
  const peerChannels = channelSet('peer')
  remember(publicChannels)
  remember(peerChannels)
  console.error('running HTTP level…')
  rows.push(...(await compare('http', HTTP_N,
    ['POST /{productId}/realtime/messages (public worker)', post(publicWorker.url, publicChannels), publicWorker.proc.pid],
    ['peer: bare Bun.serve → JSON parse → publish()', post(peer.url, peerChannels), peer.proc.pid])))

  // Token issue: the same worker and peer, the same body for both (two channels of the namespace, both kept whole).
  const tokenBody = (i: number) => ({
    subject: `bench-user-${i}`,
    channels: [{ name: `bench:room-${i % CHANNELS}`, ops: ['subscribe', 'history'] }, { name: 'bench:lobby', ops: ['subscribe'] }],
    ttlSeconds: 600,
  })
  const issue = (base: string) => async (i: number) => {
    const response = await fetch(`${base}/${productId}/realtime/tokens/issue`, { method: 'POST', headers, body: JSON.stringify(tokenBody(i)) })
    const text = await response.text()
    if (response.status !== 200) throw new Error(`${base} answered ${response.status}: ${text.slice(0, 300)}`)
    return text
  }
  await sameToken(await issue(publicWorker.url)(0), await issue(peer.url)(0))
  console.error('running token issue…')
  rows.push(...(await compare('token issue', TOKEN_N,
    ['POST /{productId}/realtime/tokens/issue (public worker)', async (i) => void (await issue(publicWorker.url)(i)), publicWorker.proc.pid],
    ['peer: bare Bun.serve → JSON parse → narrow() → signToken()', async (i) => void (await issue(peer.url)(i)), peer.proc.pid])))

  printTable(rows, metaBytes)
}

/** Both sides must sign with the same key and grant the same channels, or the pair would not compare like with like. */
async function sameToken(subjectText: string, peerText: string) {
  const [subject, peer] = [JSON.parse(subjectText), JSON.parse(peerText)]
  const [subjectClaims, peerClaims] = await Promise.all([verifyToken(subject.token), verifyToken(peer.token)])
  const kid = (token: string) => JSON.parse(Buffer.from(token.split('.')[0]!, 'base64url').toString()).kid
  const shape = (body: any, claims: Claims) => JSON.stringify([kid(body.token), body.channels, body.dropped, claims.sub, claims.exp - claims.iat, claims.akid])
  if (shape(subject, subjectClaims) !== shape(peer, peerClaims)) {
    throw new Error(`the token peer does not sign what the route signs:\n  route ${subjectText}\n  peer  ${peerText}`)
  }
}

function printTable(rows: Row[], metaBytes: number | undefined) {
  const header = ['level', 'what', 'ops/s', 'rounds ops/s', 'p50 ms', 'p99 ms', 'Redis µs/op', 'server µs/op', 'Redis B/history entry']
  const cells = rows.map((r) => [
    r.level, r.name, r.ops.toFixed(0), `${r.range[0].toFixed(0)}–${r.range[1].toFixed(0)}`, r.p50.toFixed(2), r.p99.toFixed(2),
    r.redisUs.toFixed(1), r.processUs === undefined ? '–' : r.processUs.toFixed(1),
    r.bytesPerEntry === undefined ? '–' : r.bytesPerEntry.toFixed(1),
  ])
  const widths = header.map((h, c) => Math.max(h.length, ...cells.map((row) => row[c]!.length)))
  const line = (row: string[]) => row.map((cell, c) => (c < 2 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  ')
  console.log(line(header))
  console.log(widths.map((w) => '-'.repeat(w)).join('  '))
  for (const row of cells) console.log(line(row))
  console.log('')
  for (let i = 0; i + 1 < rows.length; i += 2) {
    const [subject, peer] = [rows[i]!, rows[i + 1]!]
    const server = subject.processUs !== undefined && peer.processUs ? `, server CPU ${(subject.processUs / peer.processUs).toFixed(2)}×` : ''
    console.log(`${subject.level}: subject reaches ${(subject.ops / peer.ops * 100).toFixed(0)} % of the peer's throughput; ` +
      `p50 ${(subject.p50 / peer.p50).toFixed(2)}×, p99 ${(subject.p99 / peer.p99).toFixed(2)}× the peer's; ` +
      `Redis CPU ${(subject.redisUs / peer.redisUs).toFixed(2)}×${server} per operation`)
  }
  console.log('ops/s: all measured operations ÷ all measured time; rounds ops/s: slowest–fastest round; p50/p99 over every round.')
  console.log('Redis µs/op: the Redis server\'s CPU (INFO cpu, user + system) over the measured rounds ÷ their operations; ' +
    'server µs/op: the serving process\'s (/proc/<pid>/stat), for the HTTP rows.')
  console.log('B/history entry: MEMORY USAGE (all nodes sampled) of the channels\' history streams ÷ their entries; ' +
    `publish() also keeps one meta hash per channel (epoch, offset): ${metaBytes?.toFixed(0) ?? '?'} B each.`)
}

let failed = false
try {
  await main()
} catch (error) {
  failed = true
  // After Ctrl-C the in-flight requests fail against the stopped children: not worth reporting.
  if (!interrupted) console.error('benchmark failed:', error instanceof Error ? error.message : error, (error as { cause?: unknown })?.cause ?? '')
} finally {
  await cleanup()
}
process.exit(interrupted ? 130 : failed ? 1 : 0)
