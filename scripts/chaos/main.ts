// The kill-anything soak from one command (docs/chaos.md). Needs DATABASE_URL, REDIS_URL and S3_URL
// like the tests (scripts/soak starts project-local ones); prints the invariants broken (none, when the platform held),
// the kills, the load's counts and answers, and each process's memory.
//   bun run scripts/chaos/main.ts [--seconds 60] [--kill-every 3000 (0: no kills, a memory run)] [--subscribers 4]
import { parseArgs } from 'node:util'
import { runSoak, type SoakReport } from './soak'

const { values: args } = parseArgs({
  options: { seconds: { type: 'string', default: '60' }, 'kill-every': { type: 'string', default: '3000' }, subscribers: { type: 'string', default: '4' } },
})
const report = await runSoak({
  seconds: Number(args.seconds), killEveryMs: Number(args['kill-every']), subscribers: Number(args.subscribers),
  memoryEveryMs: 5000, log: (line) => console.error(line),
})

/** Per process: resident memory of its last incarnation after the first fifth of its life, at its peak, and at the end. */
function memoryTable(memory: SoakReport['memory']): string[] {
  const lines = ['| process | starts | RSS after warm-up | peak | end | end / warm |', '| --- | ---: | ---: | ---: | ---: | ---: |']
  const mib = (kib: number) => `${(kib / 1024).toFixed(1)} MiB`
  for (const [name, samples] of Object.entries(memory)) {
    const last = samples.at(-1)
    if (!last) continue
    const life = samples.filter((s) => s.incarnation === last.incarnation)
    const warm = life[Math.floor(life.length / 5)]!
    const peak = Math.max(...life.map((s) => s.rssKiB))
    lines.push(`| ${name} | ${last.incarnation} | ${mib(warm.rssKiB)} | ${mib(peak)} | ${mib(last.rssKiB)} | ${(last.rssKiB / warm.rssKiB).toFixed(2)} |`)
  }
  return lines
}

console.log(`\nkills: ${JSON.stringify(report.kills)}`)
console.log(`load: ${JSON.stringify(report.counts)}`)
console.log(`answers: ${JSON.stringify(report.answers)}`)
console.log(`\n${memoryTable(report.memory).join('\n')}\n`)
console.log(report.violations.length ? `VIOLATIONS (${report.violations.length}):\n${report.violations.slice(0, 50).join('\n')}` : 'every invariant held')
process.exit(report.violations.length ? 1 : 0)
