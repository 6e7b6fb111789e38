// Publish over HTTP against a Centrifuge node, side by side on the same Redis: one public worker's
// POST /{productId}/realtime/messages and a Centrifuge node (Debian's Centrifuge library with its Redis broker keeping
// history in streams: scripts/bench/centrifuge-peer) publishing the same bodies with history, both driven by wrk with
// the same connections, in alternating rounds. Prints publishes/s, Redis CPU per publish (INFO cpu before and after)
// and each server's CPU per publish (/proc), and the ratios the publish path is held to (docs/performance.md, "Publish").
// Usage: bun run scripts/bench/publish-centrifuge.ts [--seconds 8] [--rounds 3] [--connections 32] [--channels 1]
//        [--workers 1] [--cpu-prof DIR]
// (--workers N: N public workers share the port, as a deployment runs one per core; server CPU is their sum. Each is
// started after the previous answers /readyz, but the port's answer may come from any of them: the warm-up round
// covers a later one still starting, and a worker that died fails the run.)
// (--cpu-prof DIR: the public worker runs under Bun's sampling profiler, `bun --cpu-prof --cpu-prof-md`, and writes
// its profile to DIR when it stops, a .cpuprofile for Chrome's DevTools and a .md to read or grep; the profiler's own
// cost lowers the worker's figures of that run.)
// Needs DATABASE_URL and REDIS_URL (one Redis, not a cluster) like the tests; installs wrk and Go from Debian's packages.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { positive, runCleaningUp } from './run'
import { LIMITS_LIFTED, publishWrkScript } from './publish-load'
import { sql } from '../../shared/db/client'
import { closeRedis, redis } from '../../shared/redis/client'
import { onCluster } from '../../shared/redis/cluster'
import { freePort, startWorker, type Worker } from '../../test/helpers'
import { realtimeProduct } from '../../test/realtime/public-helpers'
import { processCpuSeconds, redisCpuSeconds, redisReads } from './cpu'

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '32' },
    channels: { type: 'string', default: '1' },
    'cpu-prof': { type: 'string' },
    workers: { type: 'string', default: '1' },
  },
})
const SECONDS = positive('seconds', args.seconds!)
const ROUNDS = positive('rounds', args.rounds!)
const CONNECTIONS = positive('connections', args.connections!)
const CHANNELS = positive('channels', args.channels!)
const WORKERS = positive('workers', args.workers!)
const HISTORY = { ttlSeconds: 300, size: 1000 }
const ROOT = join(import.meta.dir, '..', '..')

interface Subject {
  name: string
  url: string
  pids: number[]
}

/** CPU seconds of every process of a subject, summed. */
const cpuOf = async (pids: number[]) => (await Promise.all(pids.map(processCpuSeconds))).reduce((a, b) => a + b, 0)

interface Round {
  requests: number
  failed: number
  seconds: number
  redisCpu: number
  redisReads: number
  serverCpu: number
  p50: number
  p99: number
}

/** Runs a shell line with the project's helpers (installs, builds); its stdout's last line. */
async function shell(line: string): Promise<string> {
  const proc = Bun.spawn(['bash', '-c', `source scripts/lib/common.sh && ${line}`], { cwd: ROOT, stdout: 'pipe', stderr: 'inherit' })
  const out = await new Response(proc.stdout).text()
  if ((await proc.exited) !== 0) throw new Error(`${line} failed`)
  return out.trim().split('\n').at(-1)!
}

/** One wrk run: its 2xx answers (publishes) and the others; throws when more than 1 % were not 2xx. */
async function wrk(url: string, script: string, seconds: number): Promise<{ requests: number; failed: number; seconds: number; p50: number; p99: number }> {
  const proc = Bun.spawn(['wrk', '-t2', `-c${CONNECTIONS}`, `-d${seconds}s`, '--latency', '-s', script, url], { stdout: 'pipe', stderr: 'pipe' })
  const out = await new Response(proc.stdout).text()
  if ((await proc.exited) !== 0) throw new Error(`wrk failed: ${await new Response(proc.stderr).text()}`)
  const failed = Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0)
  const requests = Number(/(\d+) requests in ([0-9.]+)(m?s)/.exec(out)?.[1]) - failed
  if (failed > requests / 100) throw new Error(`${url} answered ${failed} requests with a non-2xx status:\n${out}`)
  const latency = (p: string) => {
    const match = new RegExp(`^\\s+${p}%\\s+([0-9.]+)(us|ms|s)`, 'm').exec(out)
    if (!match) return NaN
    return Number(match[1]) * (match[2] === 'us' ? 0.001 : match[2] === 's' ? 1000 : 1)
  }
  return { requests, failed, seconds, p50: latency('50'), p99: latency('99') }
}

async function measure(subject: Subject, script: string): Promise<Round> {
  const [redisBefore, readsBefore, serverBefore] = [await redisCpuSeconds(redis()), await redisReads(redis()), await cpuOf(subject.pids)]
  const run = await wrk(subject.url, script, SECONDS)
  const serverCpu = (await cpuOf(subject.pids)) - serverBefore
  if (Number.isNaN(serverCpu)) throw new Error(`${subject.name}: a serving process is gone`)
  // The INFO calls themselves are two of the reads: negligible against a round's thousands.
  return { ...run, redisCpu: (await redisCpuSeconds(redis())) - redisBefore, redisReads: (await redisReads(redis())) - readsBefore, serverCpu }
}

const workers: Worker[] = []
let centrifuge: ReturnType<typeof Bun.spawn> | undefined
const scratch = mkdtempSync(join(tmpdir(), 'bench-centrifuge-'))

async function main() {
  if (onCluster()) throw new Error('this benchmark compares one Redis: REDIS_URL must not be a cluster')
  await shell('ensure_apt wrk')
  const binary = await shell('scripts/bench/centrifuge-peer/build')
  const redisUrl = new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379')
  const db = redisUrl.pathname.replace('/', '') || '0'
  const redisVersion = /redis_version:(\S+)/.exec((await redis().info('server')) as string)?.[1] ?? '?'

  const product = await realtimeProduct([{ name: 'bench', history: HISTORY }])
  const channels = Array.from({ length: CHANNELS }, (_, k) => `bench:room-${k}`)
  const port = await freePort()
  // With --workers N, N public workers share the port (reusePort), as a deployment runs one per core.
  for (let k = 0; k < WORKERS; k++) {
    workers.push(await startWorker('services/public/main.ts', {
      ...LIMITS_LIFTED, PUBLIC_PORT: String(port),
      ...(args['cpu-prof'] ? { BUN_OPTIONS: `--cpu-prof --cpu-prof-md --cpu-prof-dir=${args['cpu-prof']}` } : {}),
    }, port))
  }
  const worker = workers[0]!
  const peerPort = await freePort()
  centrifuge = Bun.spawn([binary, '-listen', `127.0.0.1:${peerPort}`, '-redis', `${redisUrl.hostname}:${redisUrl.port || 6379}`, '-db', db,
    '-history-size', String(HISTORY.size), '-history-ttl', `${HISTORY.ttlSeconds}s`], { stdout: 'ignore', stderr: 'inherit' })
  for (const deadline = Date.now() + 10_000; ;) {
    if (await fetch(`http://127.0.0.1:${peerPort}/health`).then((r) => r.ok, () => false)) break
    if (Date.now() > deadline) throw new Error('the Centrifuge peer did not start')
    await Bun.sleep(100)
  }

  const subjects: [Subject, string][] = [
    [{ name: `POST /{productId}/realtime/messages (${WORKERS === 1 ? 'one public worker' : `${WORKERS} public workers`})`, url: `${worker.url}/${product.productId}/realtime/messages`, pids: workers.map((w) => w.proc.pid) },
      join(scratch, 'platform.lua')],
    [{ name: 'Centrifuge node: HTTP publish with history (Go)', url: `http://127.0.0.1:${peerPort}/publish`, pids: [centrifuge.pid] },
      join(scratch, 'centrifuge.lua')],
  ]
  writeFileSync(subjects[0]![1], publishWrkScript(product.key, channels))
  writeFileSync(subjects[1]![1], publishWrkScript(null, channels))

  console.log('Publish over HTTP: the platform vs a Centrifuge node, on the same Redis')
  console.log(`  bun ${Bun.version}, Redis ${redisVersion}; wrk -t2 -c${CONNECTIONS}, ${ROUNDS} alternating rounds of ${SECONDS} s each; ` +
    `${CHANNELS} channel(s) with history (size ${HISTORY.size}, ${HISTORY.ttlSeconds} s); ~70-byte data; limits lifted on both sides`)
  console.error('warming up…')
  for (const [subject, script] of subjects) await wrk(subject.url, script, 2)
  const rounds: Round[][] = [[], []]
  for (let round = 0; round < ROUNDS; round++) {
    for (const side of round % 2 === 0 ? [0, 1] : [1, 0]) {
      console.error(`round ${round + 1}: ${subjects[side]![0].name}…`)
      rounds[side]!.push(await measure(subjects[side]![0], subjects[side]![1]))
    }
  }
  const rows = rounds.map((runs, side) => {
    const requests = runs.reduce((sum, r) => sum + r.requests, 0)
    const seconds = runs.reduce((sum, r) => sum + r.seconds, 0)
    const rates = runs.map((r) => r.requests / r.seconds)
    return {
      name: subjects[side]![0].name, rate: requests / seconds, low: Math.min(...rates), high: Math.max(...rates),
      redisUs: runs.reduce((sum, r) => sum + r.redisCpu, 0) / requests * 1e6,
      perRead: requests / runs.reduce((sum, r) => sum + r.redisReads, 0),
      serverUs: runs.reduce((sum, r) => sum + r.serverCpu, 0) / requests * 1e6,
      p50: Math.max(...runs.map((r) => r.p50)), p99: Math.max(...runs.map((r) => r.p99)),
      failed: runs.reduce((sum, r) => sum + r.failed, 0),
    }
  })
  const header = ['what', 'publishes/s', 'rounds', 'Redis µs/publish', 'publishes/Redis read', 'server µs/publish', 'p50 ms', 'p99 ms', 'not 2xx']
  const cells = rows.map((r) => [r.name, r.rate.toFixed(0), `${r.low.toFixed(0)}–${r.high.toFixed(0)}`, r.redisUs.toFixed(1),
    r.perRead.toFixed(1), r.serverUs.toFixed(1), r.p50.toFixed(2), r.p99.toFixed(2), String(r.failed)])
  const widths = header.map((h, c) => Math.max(h.length, ...cells.map((row) => row[c]!.length)))
  const line = (row: string[]) => row.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  ')
  console.log(line(header))
  console.log(widths.map((w) => '-'.repeat(w)).join('  '))
  for (const row of cells) console.log(line(row))
  const [ours, theirs] = rows as [typeof rows[0], typeof rows[0]]
  console.log(`\nthe platform: ${(ours.rate / theirs.rate).toFixed(2)}× Centrifuge's throughput, ${(ours.redisUs / theirs.redisUs).toFixed(2)}× its Redis CPU ` +
    `and ${(ours.serverUs / theirs.serverUs).toFixed(2)}× its server CPU per publish (goals: at least 0.8×, at most 1.5× Redis)`)
  console.log('Redis µs/publish: the Redis server\'s CPU (INFO cpu, user + system) during the rounds ÷ their publishes; ' +
    'publishes/Redis read: their publishes ÷ the reads Redis made from its clients\' sockets meanwhile (INFO stats; more publishes a read, less of its CPU each); ' +
    'server µs/publish: the serving process\'s (/proc/<pid>/stat); p50/p99: the worst round\'s, from wrk --latency; ' +
    'publishes: 2xx answers only (a run with more than 1 % others fails).')
}

// What the run started stopped, whatever happened.
await runCleaningUp(main, async () => {
  centrifuge?.kill('SIGTERM')
  await Promise.all(workers.map((w) => w.stop().catch(() => 0)))
  rmSync(scratch, { recursive: true, force: true })
  await closeRedis()
  await sql.end({ timeout: 2 }).catch(() => {})
})
