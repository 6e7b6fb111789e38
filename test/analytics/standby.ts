// A real PostgreSQL hot standby of the test run's server, on loopback, for tests of reads on a replica: a base backup
// (pg_basebackup -R -X stream) into the checkout's .data/, started with the primary's own major version of the server
// binaries, as the `postgres` user when the tests run as root (PostgreSQL refuses to run as root, as
// scripts/lib/common.sh says), and stopped and removed by stop().
import { existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs'
import { connect } from 'node:net'
import { join, resolve } from 'node:path'
import postgres from 'postgres'

export interface Standby {
  /** The standby's URL: the primary's, with the standby's port. */
  url: string
  port: number
  /** A small pool on the standby (read-only), ended by stop(). */
  sql: postgres.Sql
  /** How long the base backup took, ms (the primary's whole cluster is copied: every database on it). */
  backupMs: number
  /** Stops the server (fast shutdown) and removes its directory; safe to call twice. */
  stop(): Promise<void>
}

const ROOT = resolve(import.meta.dir, '../..')
const asRoot = process.getuid?.() === 0

/** `cmd` as the postgres user when running as root (its cwd `/`, which that user can always enter). */
const asPostgres = (cmd: string[]) => (asRoot ? ['setpriv', '--reuid=postgres', '--regid=postgres', '--init-groups', ...cmd] : cmd)

async function run(cmd: string[], what: string): Promise<void> {
  const proc = Bun.spawn(cmd, { cwd: '/', stdout: 'pipe', stderr: 'pipe' })
  const [code, out, err] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()])
  if (code !== 0) throw new Error(`${what} failed (${code}): ${out}${err}`)
}

/** The server binaries of `major` (PG_BIN when set): Debian's layout, else pg_config's. */
function binaries(major: number): string {
  if (process.env.PG_BIN) return process.env.PG_BIN
  const debian = `/usr/lib/postgresql/${major}/bin`
  if (existsSync(join(debian, 'postgres'))) return debian
  const found = existsSync('/usr/lib/postgresql') ? readdirSync('/usr/lib/postgresql') : []
  throw new Error(`no PostgreSQL ${major} server binaries in /usr/lib/postgresql (found ${found.join(', ') || 'none'}); set PG_BIN`)
}

/** True when nothing listens on 127.0.0.1:port. */
const portFree = (port: number) => new Promise<boolean>((done) => {
  const socket = connect({ host: '127.0.0.1', port })
  socket.once('connect', () => { socket.destroy(); done(false) })
  socket.once('error', () => done(true))
})

/** The first free port from 55442 on (below the ephemeral range, where a client connection's local port never lands). */
async function standbyPort(): Promise<number> {
  for (let port = 55442; port < 55535; port++) if (await portFree(port)) return port
  throw new Error('no free port between 55442 and 55534 for the standby')
}

/** A directory under .data/ the postgres user can enter (every parent traversable), else one under /var/tmp. */
function standbyHome(): string {
  const name = `standby-${process.pid}`
  const data = join(ROOT, '.data')
  mkdirSync(data, { recursive: true })
  if (!asRoot) return join(data, name)
  Bun.spawnSync(['chmod', 'o+x', data])
  const traversable = Bun.spawnSync(['runuser', '-u', 'postgres', '--', 'test', '-x', data], { cwd: '/' }).exitCode === 0
  return traversable && join(data, name).length < 80 ? join(data, name) : `/var/tmp/platform-${name}`
}

/**
 * Starts a hot standby of `primaryUrl` and waits until it accepts connections. `settings` are passed as `-c name=value`
 * (e.g. max_standby_streaming_delay).
 */
export async function startStandby(primaryUrl: string, settings: Record<string, string> = {}): Promise<Standby> {
  const primary = new URL(primaryUrl)
  const probe = postgres(primaryUrl, { max: 1, onnotice: () => {} })
  const [row] = await probe`select current_setting('server_version_num')::int / 10000 as version`
  await probe.end()
  const bin = binaries(Number(row!.version))
  const home = standbyHome()
  const dataDir = join(home, 'data')
  rmSync(home, { recursive: true, force: true })
  await run(asRoot ? ['install', '-d', '-o', 'postgres', '-g', 'postgres', '-m', '700', home] : ['install', '-d', '-m', '700', home], 'mkdir')

  const started = performance.now()
  await run(asPostgres([join(bin, 'pg_basebackup'), '-h', primary.hostname, '-p', primary.port || '5432', '-U', decodeURIComponent(primary.username || 'postgres'),
    '-D', dataDir, '-R', '-X', 'stream', '-c', 'fast']), 'pg_basebackup')
  const backupMs = performance.now() - started

  const port = await standbyPort()
  const options = { listen_addresses: '127.0.0.1', unix_socket_directories: '', ...settings }
  const proc = Bun.spawn(asPostgres([join(bin, 'postgres'), '-D', dataDir, '-p', String(port),
    ...Object.entries(options).flatMap(([name, value]) => ['-c', `${name}=${value}`])]), {
    cwd: '/', stdout: 'ignore', stderr: Bun.file(join(home, 'postgres.log')), // PostgreSQL logs to stderr
  })
  const url = new URL(primaryUrl)
  url.port = String(port)
  const sql = postgres(url.toString(), { max: 2, onnotice: () => {}, connect_timeout: 2 })
  let stopped = false
  const stop = async () => {
    if (stopped) return
    stopped = true
    await sql.end({ timeout: 1 }).catch(() => {})
    proc.kill('SIGINT') // fast shutdown: disconnects clients instead of waiting for them
    const ended = await Promise.race([proc.exited.then(() => true), Bun.sleep(10_000).then(() => false)])
    if (!ended) proc.kill('SIGKILL')
    await proc.exited
    rmSync(home, { recursive: true, force: true })
  }
  process.once('exit', () => proc.kill('SIGKILL')) // a run that dies half-way leaves no server behind

  const deadline = Date.now() + 20_000
  for (;;) {
    try {
      await sql`select 1`
      break
    } catch (error) {
      if (proc.exitCode !== null || Date.now() > deadline) {
        const log = await Bun.file(join(home, 'postgres.log')).text().catch(() => '')
        await stop()
        throw new Error(`the standby did not accept connections on port ${port}: ${(error as Error).message}\n${log.slice(-2000)}`)
      }
      await Bun.sleep(50)
    }
  }
  return { url: url.toString(), port, sql, backupMs, stop }
}
