// Packages as a user gets them: built with their build.ts, packed with npm pack, installed from the tarball into a
// scratch project in a temp dir (no registry: they have no dependencies).
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export const ROOT = join(import.meta.dir, '..', '..')
export const TSC = join(ROOT, 'node_modules', '.bin', 'tsc')

/** Runs a command to completion (`env` on top of this process's) and answers its stdout; throws with its output when it exits non-zero. */
export async function run(cmd: string[], cwd: string, env: Record<string, string> = {}): Promise<string> {
  const proc = Bun.spawn(cmd, { cwd, stdout: 'pipe', stderr: 'pipe', env: { ...process.env, npm_config_update_notifier: 'false', ...env } })
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited])
  if (code !== 0) throw new Error(`${cmd.join(' ')} exited ${code}:\n${out}\n${err}`)
  return out
}

export interface Installed {
  /** The scratch project's directory; the package is in its node_modules. */
  dir: string
  /** The tarball's files, as npm pack listed them. */
  files: string[]
}

/** Builds the package at `packageDir` (shared/<name>), packs it and installs the tarball into a new scratch project. */
export async function packAndInstall(packageDir: string): Promise<Installed> {
  const dir = mkdtempSync(join(tmpdir(), 'pack-scratch-'))
  await run(['bun', 'run', 'build.ts'], packageDir)
  const [packed] = JSON.parse(await run(['npm', 'pack', '--json', '--ignore-scripts', '--pack-destination', dir], packageDir))
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'scratch', private: true, type: 'module' }))
  await run(['npm', 'install', '--offline', '--no-audit', '--no-fund', join(dir, packed.filename)], dir)
  return { dir, files: packed.files.map((file: { path: string }) => file.path).sort() }
}
