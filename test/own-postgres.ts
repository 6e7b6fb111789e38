// PostgreSQL servers of a test's own on loopback: a primary made with initdb (startPrimary), or any data directory
// started as a server (startServer; test/analytics/standby.ts makes a hot standby this way). They run as the
// `postgres` user when the tests run as root (PostgreSQL refuses to run as root, as scripts/lib/common.sh says), on a
// port between 55442 and 55534, from a directory under the checkout's .data/ (or /var/tmp), removed by stop().
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { join, resolve } from 'node:path'
import postgres from 'postgres'

export interface OwnPostgres {
  /** The server's URL (user postgres; the database of the URL it was started for). */
  url: string
  port: number
  /** A small pool on the server, ended by stop(). */
  sql: postgres.Sql
  /** The directory that holds the data directory (`data`) and the server's log (`postgres.log`). */
  home: string
  /** SIGKILL, as a crash or a lost host would end it: no shutdown checkpoint, clients cut without a word. */
  kill(): Promise<void>
  /** Stops the server (fast shutdown, unless already dead) and removes its directory; safe to call twice. */
  stop(): Promise<void>
}

const ROOT = resolve(import.meta.dir, '..')
const asRoot = process.getuid?.() === 0

/** `cmd` as the postgres user when running as root (its cwd `/`, which that user can always enter). */
export const asPostgres = (cmd: string[]) => (asRoot ? ['setpriv', '--reuid=postgres', '--regid=postgres', '--init-groups', ...cmd] : cmd)

export async function run(cmd: string[], what: string): Promise<void> {
  const proc = Bun.spawn(cmd, { cwd: '/', stdout: 'pipe', stderr: 'pipe' })
  const [code, out, err] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()])
  if (code !== 0) throw new Error(`${what} failed (${code}): ${out}${err}`)
}

/** The server binaries of `major` (PG_BIN when set; without `major`, the newest installed): Debian's layout. */
export function binaries(major?: number): string {
  if (process.env.PG_BIN) return process.env.PG_BIN
  const found = existsSync('/usr/lib/postgresql') ? readdirSync('/usr/lib/postgresql') : []
  const chosen = major ?? Math.max(...found.map(Number).filter((n) => existsSync(`/usr/lib/postgresql/${n}/bin/postgres`)))
  const debian = `/usr/lib/postgresql/${chosen}/bin`
  if (existsSync(join(debian, 'postgres'))) return debian
  throw new Error(`no PostgreSQL ${major ?? ''} server binaries in /usr/lib/postgresql (found ${found.join(', ') || 'none'}); set PG_BIN`)
}

/** True when nothing listens on 127.0.0.1:port. */
const portFree = (port: number) => new Promise<boolean>((done) => {
  const socket = connect({ host: '127.0.0.1', port })
  socket.once('connect', () => { socket.destroy(); done(false) })
  socket.once('error', () => done(true))
})

/** The first free port from `from` on (below the ephemeral range, where a client connection's local port never lands). */
async function serverPort(from = 55442): Promise<number> {
  for (let port = from; port < 55535; port++) if (await portFree(port)) return port
  throw new Error('no free port between 55442 and 55534 for a PostgreSQL server of the tests')
}

/**
 * An empty directory `name` the postgres user owns, under .data/ when the postgres user can enter it (every parent
 * traversable), else under /var/tmp.
 */
export async function serverHome(name: string): Promise<string> {
  const data = join(ROOT, '.data')
  mkdirSync(data, { recursive: true })
  let home = join(data, name)
  if (asRoot) {
    Bun.spawnSync(['chmod', 'o+x', data])
    const traversable = Bun.spawnSync(['runuser', '-u', 'postgres', '--', 'test', '-x', data], { cwd: '/' }).exitCode === 0
    if (!traversable || home.length >= 80) home = `/var/tmp/platform-${name}`
  }
  rmSync(home, { recursive: true, force: true })
  await run(asRoot ? ['install', '-d', '-o', 'postgres', '-g', 'postgres', '-m', '700', home] : ['install', '-d', '-m', '700', home], 'mkdir')
  return home
}

/**
 * Starts the server of `home`/data on a free port and waits until it accepts connections. `url` is any URL of the
 * wanted user and database: its host and port become the server's. `settings` are passed as `-c name=value`.
 */
export async function startServer(bin: string, home: string, url: string, settings: Record<string, string> = {}, from?: number): Promise<OwnPostgres> {
  const port = await serverPort(from)
  const options = { listen_addresses: '127.0.0.1', unix_socket_directories: '', ...settings }
  // Bun opens a file given as stderr without truncating it: a server started again in this home (another port) must not
  // find the last one's log under its own.
  writeFileSync(join(home, 'postgres.log'), '')
  const proc = Bun.spawn(asPostgres([join(bin, 'postgres'), '-D', join(home, 'data'), '-p', String(port),
    ...Object.entries(options).flatMap(([name, value]) => ['-c', `${name}=${value}`])]), {
    cwd: '/', stdout: 'ignore', stderr: Bun.file(join(home, 'postgres.log')), // PostgreSQL logs to stderr
  })
  const own = new URL(url)
  own.hostname = '127.0.0.1'
  own.port = String(port)
  const sql = postgres(own.toString(), { max: 2, onnotice: () => {}, connect_timeout: 2 })
  const kill = async () => {
    proc.kill('SIGKILL')
    await proc.exited
  }
  let stopped = false
  const stop = async () => {
    if (stopped) return
    stopped = true
    await sql.end({ timeout: 1 }).catch(() => {})
    proc.kill('SIGINT') // fast shutdown: disconnects clients instead of waiting for them
    const ended = await Promise.race([proc.exited.then(() => true), Bun.sleep(10_000).then(() => false)])
    if (!ended) await kill()
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
        // Free to a connect() is not free to bind(): a socket still bound to the port (a killed server's backend
        // ending, a port taken between the probe and the bind) makes the server exit at once. Take the next one.
        if (proc.exitCode !== null && log.includes('Address already in use') && port < 55534) {
          await sql.end({ timeout: 0 }).catch(() => {})
          return startServer(bin, home, url, settings, port + 1)
        }
        await stop()
        throw new Error(`the server in ${home} did not accept connections on port ${port}: ${(error as Error).message}\n${log.slice(-2000)}`)
      }
      await Bun.sleep(50)
    }
  }
  return { url: own.toString(), port, sql, home, kill, stop }
}

/**
 * A new primary (initdb, trust authentication on loopback, user postgres; its URL names database `postgres`), ready to
 * be streamed from: wal_level replica and room for standbys. `settings` come on top (`-c name=value`).
 */
export async function startPrimary(settings: Record<string, string> = {}): Promise<OwnPostgres> {
  const bin = binaries()
  const home = await serverHome(`primary-${process.pid}`)
  await run(asPostgres([join(bin, 'initdb'), '-D', join(home, 'data'), '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8']), 'initdb')
  // fsync off: a SIGKILLed server loses nothing the kernel holds, and the tests share the disk with other work.
  return startServer(bin, home, 'postgres://postgres@127.0.0.1/postgres', {
    wal_level: 'replica', max_wal_senders: '4', hot_standby: 'on', fsync: 'off', ...settings,
  })
}
