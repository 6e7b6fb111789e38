// Redis work per publish, counted in instructions: a Redis server of its own under valgrind's callgrind, then one
// public worker's POST /{productId}/realtime/messages and a Centrifuge node's HTTP publish with history
// (scripts/bench/centrifuge-peer) each drive the same bodies into it, and the instructions Redis executed are read per
// publish for each. Wall-clock CPU on two shared cores moves 10-20 % between runs; instruction counts move well under
// 1 %, so a change to the publish scripts is measured here, its throughput in publish-centrifuge.ts.
// Usage: bun run scripts/bench/publish-instructions.ts [--publishes 2000] [--concurrency 8] [--channels 1] [--functions N]
//        [--keep DIR]
// (--functions N: also the N Redis functions that cost most per publish, inclusive of what they call, from
// callgrind_annotate: where the instructions go, e.g. Lua's interpreter, INFO, XADD, reading requests; --keep DIR: the
// dumps are copied there, route.callgrind and centrifuge.callgrind, for callgrind_annotate. Debian's redis-server has no
// symbols: a redis-server built from `apt-get source redis` first on PATH names Lua's functions too.)
// Needs DATABASE_URL like the tests (REDIS_URL is ignored: the Redis measured is the benchmark's own); installs valgrind
// and Go from Debian's packages. About a minute.
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { type Children, dropProduct, positive, runBench } from './run'
import { LIMITS_LIFTED } from './publish-load'

const { values: args } = parseArgs({
  options: {
    publishes: { type: 'string', default: '2000' },
    concurrency: { type: 'string', default: '8' },
    channels: { type: 'string', default: '1' },
    functions: { type: 'string', default: '0' },
    keep: { type: 'string' },
  },
})
const PUBLISHES = positive('publishes', args.publishes!)
const CONCURRENCY = positive('concurrency', args.concurrency!)
const CHANNELS = positive('channels', args.channels!)
const FUNCTIONS = args.functions === '0' ? 0 : positive('functions', args.functions!)
const WARMUP = 300
const HISTORY = { ttlSeconds: 300, size: 1000 }
const ROOT = join(import.meta.dir, '..', '..')
const scratch = mkdtempSync(join(tmpdir(), 'bench-instructions-'))
const children: Children = []

/** Runs a shell line with the project's helpers (installs, builds); its stdout's last line. */
async function shell(line: string): Promise<string> {
  const proc = Bun.spawn(['bash', '-c', `source scripts/lib/common.sh && ${line}`], { cwd: ROOT, stdout: 'pipe', stderr: 'inherit' })
  const out = await new Response(proc.stdout).text()
  if ((await proc.exited) !== 0) throw new Error(`${line} failed`)
  return out.trim().split('\n').at(-1) ?? ''
}

const callgrindControl = async (pid: number, ...flags: string[]) => {
  const proc = Bun.spawn(['callgrind_control', ...flags, String(pid)], { stdout: 'pipe', stderr: 'pipe' })
  const [code, out, err] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()])
  if (code !== 0) throw new Error(`callgrind_control ${flags.join(' ')} failed: ${out}${err}`)
}

async function redisCli(port: number, ...command: string[]): Promise<string> {
  const proc = Bun.spawn(['redis-cli', '-p', String(port), ...command], { stdout: 'pipe', stderr: 'inherit' })
  const out = await new Response(proc.stdout).text()
  if ((await proc.exited) !== 0) throw new Error(`redis-cli ${command.join(' ')} failed`)
  return out
}

/** The newest callgrind dump's path: callgrind.out.<pid>.<n> for the n-th dump asked for (callgrind.out.<pid> itself is
 * written only at exit). */
function lastDump(): string {
  const dumps = readdirSync(scratch).filter((f) => /^callgrind\.out\.\d+\.\d+$/.test(f)).sort((a, b) => Number(a.split('.').at(-1)) - Number(b.split('.').at(-1)))
  return join(scratch, dumps.at(-1)!)
}

/** The instructions of the newest callgrind dump (its `totals:` line). */
function lastDumpInstructions(): number {
  const text = readFileSync(lastDump(), 'utf8')
  const totals = /^(?:totals|summary): (\d+)/m.exec(text)
  if (!totals) throw new Error('no totals in the callgrind dump')
  return Number(totals[1])
}

/** POSTs `n` publishes to `url` with `concurrency` in flight; throws on any non-2xx. */
async function drive(url: string, headers: Record<string, string>, channels: string[], from: number, n: number): Promise<void> {
  let next = 0
  const client = async () => {
    while (next < n) {
      const i = from + next++
      const body = JSON.stringify({ channel: channels[i % channels.length], data: { text: 'hello from the publish benchmark', seq: i, at: 1_790_000_000_000 + i } })
      const response = await fetch(url, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } })
      if (!response.ok) throw new Error(`${url}: ${response.status} ${await response.text()}`)
    }
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, client))
}

/** The FUNCTIONS costliest functions of a dump per publish, inclusive (callgrind_annotate --inclusive=yes). */
async function printFunctions(dump: string) {
  const proc = Bun.spawn(['callgrind_annotate', '--inclusive=yes', `--threshold=100`, dump], { stdout: 'pipe', stderr: 'ignore' })
  const out = await new Response(proc.stdout).text()
  await proc.exited
  const rows = [...out.matchAll(/^\s*([\d,]+) \([^)]*\)\s+\S*:(\S+)/gm)].slice(0, FUNCTIONS)
  for (const [, count, name] of rows) {
    console.log(`      ${Math.round(Number(count!.replaceAll(',', '')) / PUBLISHES).toLocaleString('en-US').padStart(9)}  ${name}`)
  }
}

async function main() {
  await shell('ensure_apt valgrind')
  const binary = await shell('scripts/bench/centrifuge-peer/build')
  const redisServer = await shell('command -v redis-server')
  const { freePort, startWorker } = await import('../../test/helpers')
  const redisPort = await freePort()
  const redis = Bun.spawn(['valgrind', '--tool=callgrind', '--instr-atstart=no', `--callgrind-out-file=${join(scratch, 'callgrind.out.%p')}`,
    redisServer, '--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', scratch],
  { stdout: 'ignore', stderr: 'ignore' })
  children.push(redis)
  const redisUrl = `redis://127.0.0.1:${redisPort}/0`
  for (const deadline = Date.now() + 60_000; ;) {
    const ping = Bun.spawn(['redis-cli', '-p', String(redisPort), 'ping'], { stdout: 'pipe', stderr: 'ignore' })
    if ((await new Response(ping.stdout).text()).trim() === 'PONG') break
    if (Date.now() > deadline) throw new Error('redis-server under callgrind did not start')
    await Bun.sleep(200)
  }
  // Everything this process and its workers touch goes to the Redis under measurement.
  process.env.REDIS_URL = redisUrl
  const { realtimeProduct } = await import('../../test/realtime/public-helpers')

  const product = await realtimeProduct([{ name: 'bench', history: HISTORY }])
  const channels = Array.from({ length: CHANNELS }, (_, k) => `bench:room-${k}`)
  const port = await freePort()
  const worker = await startWorker('services/public/main.ts', {
    ...LIMITS_LIFTED, REDIS_URL: redisUrl, PUBLIC_PORT: String(port),
  }, port)
  children.push(worker.proc)
  const peerPort = await freePort()
  const centrifuge = Bun.spawn([binary, '-listen', `127.0.0.1:${peerPort}`, '-redis', `127.0.0.1:${redisPort}`, '-db', '0',
    '-history-size', String(HISTORY.size), '-history-ttl', `${HISTORY.ttlSeconds}s`], { stdout: 'ignore', stderr: 'inherit' })
  children.push(centrifuge)
  for (const deadline = Date.now() + 10_000; ;) {
    if (await fetch(`http://127.0.0.1:${peerPort}/health`).then((r) => r.ok, () => false)) break
    if (Date.now() > deadline) throw new Error('the Centrifuge peer did not start')
    await Bun.sleep(100)
  }

  const subjects: { name: string; url: string; headers: Record<string, string> }[] = [
    { name: 'POST /{productId}/realtime/messages', url: `${worker.url}/${product.productId}/realtime/messages`, headers: { 'x-api-key': product.key } },
    { name: 'Centrifuge node: HTTP publish with history', url: `http://127.0.0.1:${peerPort}/publish`, headers: {} },
  ]
  console.log(`Redis instructions per publish (callgrind), ${PUBLISHES} publishes each after ${WARMUP} not counted, ` +
    `${CONCURRENCY} in flight, ${CHANNELS} channel(s) with history of ${HISTORY.size} for ${HISTORY.ttlSeconds} s`)
  const counted: number[] = []
  for (const subject of subjects) {
    await drive(subject.url, subject.headers, channels, 0, WARMUP)
    await redisCli(redisPort, 'config', 'resetstat')
    await callgrindControl(redis.pid, '-z')
    await callgrindControl(redis.pid, '-i', 'on')
    await drive(subject.url, subject.headers, channels, WARMUP, PUBLISHES)
    await callgrindControl(redis.pid, '-d') // while instrumented: a dump taken after '-i off' counts nothing
    await callgrindControl(redis.pid, '-i', 'off')
    counted.push(lastDumpInstructions() / PUBLISHES)
    console.log(`  ${subject.name.padEnd(46)} ${Math.round(counted.at(-1)!).toLocaleString('en-US').padStart(9)} instructions`)
    // What Redis ran per publish, by command (INFO commandstats; the Lua's own calls counted under their names)
    const stats = await redisCli(redisPort, 'info', 'commandstats')
    const calls = [...stats.matchAll(/^cmdstat_(\S+):calls=(\d+)/gm)].map(([, name, n]) => [name!, Number(n) / PUBLISHES] as const)
      .filter(([name, perPublish]) => perPublish >= 0.01 && name !== 'config').sort((a, b) => b[1] - a[1])
    console.log(`    per publish: ${calls.map(([name, n]) => `${name} ${n.toFixed(2)}`).join(', ')}`)
    if (FUNCTIONS) await printFunctions(lastDump())
    if (args.keep) {
      mkdirSync(args.keep, { recursive: true })
      copyFileSync(lastDump(), join(args.keep, `${subjects.indexOf(subject) === 0 ? 'route' : 'centrifuge'}.callgrind`))
    }
  }
  console.log(`  ratio: ${(counted[0]! / counted[1]!).toFixed(2)}x Centrifuge's (the goal: at most 1.5x)`)
  await dropProduct(product.productId)
}

await runBench(main, children, () => rmSync(scratch, { recursive: true, force: true }))
