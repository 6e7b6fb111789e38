// Builds the package into dist/: one ESM file for every runtime (bun build, target browser: no Node built-ins can slip
// in) and its .d.ts (tsc, with no runtime's types, so a Node or Bun API in src/ fails here). `bun run build.ts`.
import { rmSync } from 'node:fs'
import { join } from 'node:path'

const here = import.meta.dir
rmSync(join(here, 'dist'), { recursive: true, force: true })
const built = await Bun.build({ entrypoints: [join(here, 'src', 'index.ts')], outdir: join(here, 'dist'), target: 'browser', format: 'esm' })
if (!built.success) throw new AggregateError(built.logs, 'bun build failed')
const tsc = Bun.spawnSync([join(here, '..', '..', 'node_modules', '.bin', 'tsc'), '-p', join(here, 'tsconfig.build.json')], { stdout: 'inherit', stderr: 'inherit' })
if (tsc.exitCode !== 0) throw new Error('tsc failed')
