// The public worker's publish route at two commits, side by side: `--base REF` (a git worktree of it, made for the run
// and removed after) against the working tree, each in a public worker of its own on the same Redis and PostgreSQL,
// both driven by wrk with the same bodies in alternating rounds. Prints publishes/s and each worker's CPU per publish
// (/proc/<pid>/stat) and their ratio: a change to the worker's per-request work is measured here, against the code
// before it in the same minutes (two workers of the same code read up to about 2 % apart, a change's runs spread by a few
// per cent: read several; runs minutes apart move by 10 % or more).
// Usage: bun run scripts/bench/publish-ab.ts --base REF [--seconds 6] [--rounds 4] [--connections 32] [--env NAME=VALUE ...]
//        [--together] [--route publish|tokens] [--channels 1]
// (--route tokens: POST /tokens/issue instead, a subject of its own per request; "publishes" then counts tokens.)
// (--channels K: publishes spread over K channels in turn, bench:room-0 to bench:room-<K-1>: one channel is the hot
// channel's case, several the case where a turn's batch names each channel's keys anew.)
// (--env: set for the working tree's worker only; with --base HEAD and a clean tree, a setting against the same code.)
// (--together: both workers driven at the same time, a wrk thread and --connections each, instead of in turn: both meet
// the same moments of a machine whose speed moves within seconds. Read the median of the rounds' ratios it prints.)
// Needs DATABASE_URL and REDIS_URL like the tests (one Redis or a cluster) and wrk (installed from Debian's packages).
// The base shares this checkout's node_modules: a base whose package.json, bun.lock or scripts/patches differ is refused.
import { existsSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { positive, runCleaningUp } from './run'
import { LIMITS_LIFTED, publishWrkScript, tokenIssueWrkScript } from './publish-load'
import { sql } from '../../shared/db/client'
import { closeRedis } from '../../shared/redis/client'
import { freePort, startWorker, type Worker } from '../../test/helpers'
import { realtimeProduct } from '../../test/realtime/public-helpers'
import { processCpuSeconds } from './cpu'

const { values: args } = parseArgs({
  options: {
    base: { type: 'string' },
    seconds: { type: 'string', default: '6' },
    rounds: { type: 'string', default: '4' },
    connections: { type: 'string', default: '32' },
    env: { type: 'string', multiple: true, default: [] },
    together: { type: 'boolean', default: false },
    route: { type: 'string', default: 'publish' },
    channels: { type: 'string', default: '1' },
  },
})
if (!args.base) throw new Error('--base REF is required: the commit the working tree is measured against')
if (args.route !== 'publish' && args.route !== 'tokens') throw new Error('--route is publish (POST /messages) or tokens (POST /tokens/issue)')
const TOKENS = args.route === 'tokens'
const SECONDS = positive('seconds', args.seconds!)
const ROUNDS = positive('rounds', args.rounds!)
const CONNECTIONS = positive('connections', args.connections!)
const CHANNELS = positive('channels', args.channels!)
const ROOT = join(import.meta.dir, '..', '..')
/** --env NAME=VALUE (repeatable): set for the working tree's worker only, to measure a setting against the same code. */
const TREE_ENV = Object.fromEntries((args.env ?? []).map((pair) => {
  const at = pair.indexOf('=')
  if (at < 1) throw new Error(`--env ${pair}: expected NAME=VALUE`)
  return [pair.slice(0, at), pair.slice(at + 1)]
}))
async function run(command: string[], cwd = ROOT): Promise<string> {
  const proc = Bun.spawn(command, { cwd, stdout: 'pipe', stderr: 'pipe' })
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited])
  if (code !== 0) throw new Error(`${command.join(' ')} failed: ${err}`)
  return out.trim()
}

/** One wrk run: its 2xx answers; throws when more than 1 % were not 2xx. */
async function wrk(url: string, script: string, seconds: number, threads = 2): Promise<number> {
  const out = await run(['wrk', `-t${threads}`, `-c${CONNECTIONS}`, `-d${seconds}s`, '-s', script, url])
  const failed = Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0)
  const answered = Number(/(\d+) requests in/.exec(out)?.[1])
  const socketErrors = /Socket errors: (.*)/.exec(out)?.[1]
  if (!(answered > 0) || socketErrors) throw new Error(`${url}: wrk got ${answered || 0} answers${socketErrors ? `, socket errors ${socketErrors}` : ''}`)
  if (failed > answered / 100) throw new Error(`${url} answered ${failed} of ${answered} requests with a non-2xx status`)
  return answered - failed
}

const scratch = mkdtempSync(join(tmpdir(), 'bench-ab-'))
const worktree = join(scratch, 'base')
const workers: Worker[] = []

async function main() {
  await run(['bash', '-c', 'source scripts/lib/common.sh && ensure_apt wrk'])
  const baseCommit = await run(['git', 'rev-parse', '--short', `${args.base}^{commit}`])
  // node_modules is shared: the base must have the same packages and the same patches to them.
  const differing = await run(['git', 'diff', '--name-only', baseCommit, '--', 'package.json', 'bun.lock', 'scripts/patches/*.patch'])
  if (differing !== '') throw new Error(`${args.base} differs from the working tree in ${differing.split('\n').join(', ')}: it cannot share its node_modules`)
  await run(['git', 'worktree', 'add', '--detach', worktree, baseCommit])
  symlinkSync(join(ROOT, 'node_modules'), join(worktree, 'node_modules'))

  const product = await realtimeProduct([{ name: 'bench', history: { ttlSeconds: 300, size: 1000 } }])
  const sides: { name: string; worker: Worker }[] = []
  for (const [name, tree] of [[`base ${baseCommit}`, worktree], ['working tree', ROOT]] as const) {
    const port = await freePort()
    const worker = await startWorker(join(tree, 'services/public/main.ts'), { ...LIMITS_LIFTED, ...(tree === ROOT ? TREE_ENV : {}), PUBLIC_PORT: String(port) }, port)
    workers.push(worker)
    sides.push({ name, worker })
  }
  const script = join(scratch, 'publish.lua')
  writeFileSync(script, TOKENS ? tokenIssueWrkScript(product.key) : publishWrkScript(product.key, Array.from({ length: CHANNELS }, (_, i) => `bench:room-${i}`)))
  const url = (worker: Worker) => `${worker.url}/${product.productId}/realtime/${TOKENS ? 'tokens/issue' : 'messages'}`

  console.log(`${TOKENS ? 'Token issue' : 'Publish'} route, two commits side by side: base ${baseCommit} vs the working tree`)
  const driving = args.together ? `a wrk -t1 -c${CONNECTIONS} per worker at once, ${ROUNDS} rounds` : `wrk -t2 -c${CONNECTIONS}, ${ROUNDS} alternating rounds`
  console.log(`  bun ${Bun.version}; ${driving} of ${SECONDS} s each; ${CHANNELS === 1 ? 'one channel' : `${CHANNELS} channels in turn`} with history; limits lifted`)
  console.error('warming up…')
  for (const side of sides) await wrk(url(side.worker), script, 2)
  const totals = sides.map(() => ({ publishes: 0, cpu: 0 }))
  // Each round's two figures are minutes closer than the run's ends: their ratio leaves out what the machine drifts by.
  const roundRatios: number[] = []
  for (let round = 0; round < ROUNDS; round++) {
    const perPublish: number[] = []
    const drive = async (s: number, threads?: number) => {
      const { worker, name } = sides[s]!
      const before = await processCpuSeconds(worker.proc.pid)
      const publishes = await wrk(url(worker), script, SECONDS, threads)
      const cpu = (await processCpuSeconds(worker.proc.pid)) - before
      totals[s]!.publishes += publishes
      totals[s]!.cpu += cpu
      perPublish[s] = cpu / publishes
      console.error(`round ${round + 1}: ${name}: ${(publishes / SECONDS).toFixed(0)}/s, ${(cpu / publishes * 1e6).toFixed(1)} µs/publish`)
    }
    if (args.together) {
      // Both ended before a failure is thrown: the clean-up must not stop a worker that a wrk still drives.
      const failed = (await Promise.allSettled([drive(0, 1), drive(1, 1)])).filter((r) => r.status === 'rejected')
      if (failed.length > 0) throw new Error(failed.map((r) => String(r.reason)).join('; '))
    }
    else for (const s of round % 2 === 0 ? [0, 1] : [1, 0]) await drive(s)
    roundRatios.push(perPublish[1]! / perPublish[0]!)
  }
  const rows = totals.map((t, s) => ({ name: sides[s]!.name, rate: t.publishes / (SECONDS * ROUNDS), us: t.cpu / t.publishes * 1e6 }))
  console.log(`${'what'.padEnd(16)}  ${'publishes/s'.padStart(11)}  ${'worker µs/publish'.padStart(17)}`)
  for (const row of rows) console.log(`${row.name.padEnd(16)}  ${row.rate.toFixed(0).padStart(11)}  ${row.us.toFixed(1).padStart(17)}`)
  const [base, tree] = rows as [typeof rows[0], typeof rows[0]]
  console.log(`\nthe working tree: ${(tree.rate / base.rate).toFixed(3)}× the base's publishes/s, ${(tree.us / base.us).toFixed(3)}× its worker CPU per publish`)
  const sorted = roundRatios.toSorted((a, b) => a - b)
  const median = sorted.length % 2 ? sorted[sorted.length >> 1]! : (sorted[sorted.length / 2 - 1]! + sorted[sorted.length / 2]!) / 2
  console.log(`worker CPU per publish, round by round (the working tree's ÷ the base's): median ${median.toFixed(3)}, ${sorted[0]!.toFixed(3)}–${sorted.at(-1)!.toFixed(3)} over ${sorted.length} rounds`)
}

// The workers stopped and the worktree removed, whatever happened.
await runCleaningUp(main, async () => {
  await Promise.all(workers.map((w) => w.stop().catch(() => 0)))
  if (existsSync(worktree)) await run(['git', 'worktree', 'remove', '--force', worktree]).catch(() => {})
  rmSync(scratch, { recursive: true, force: true })
  await closeRedis()
  await sql.end({ timeout: 2 }).catch(() => {})
})
