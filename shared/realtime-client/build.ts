// Builds the package into dist/: index.js, one ESM module with the close-code table it imports bundled in (target
// browser), and index.d.ts, the declarations tsc emits for client.ts with no runtime's types. `bun run build.ts`.
import { copyFileSync, readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'

const here = import.meta.dir
const dist = join(here, 'dist')
rmSync(dist, { recursive: true, force: true })
const built = await Bun.build({ entrypoints: [join(here, 'client.ts')], outdir: dist, naming: 'index.js', target: 'browser', format: 'esm' })
if (!built.success) throw new AggregateError(built.logs, 'bun build failed')
const tsc = Bun.spawnSync([join(here, '..', '..', 'node_modules', '.bin', 'tsc'), '-p', join(here, 'tsconfig.build.json')], { stdout: 'inherit', stderr: 'inherit' })
if (tsc.exitCode !== 0) throw new Error('tsc failed')
// tsc lays the declarations out by source folder (client.ts imports ../realtime/close-codes); the client's own must
// stand alone, its close codes inlined as literal types, or the package would ship a dangling import.
const declarations = join(dist, 'types', 'realtime-client', 'client.d.ts')
if (/^import /m.test(readFileSync(declarations, 'utf8'))) throw new Error('client.d.ts imports another module: the package would not be self-contained')
copyFileSync(declarations, join(dist, 'index.d.ts'))
rmSync(join(dist, 'types'), { recursive: true })
