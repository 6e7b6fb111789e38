// A real PostgreSQL hot standby of a primary, on loopback, for tests of reads on a replica and of failover: a base
// backup (pg_basebackup -R -X stream) started with the primary's own major version of the server binaries, as the
// `postgres` user when the tests run as root (../own-postgres.ts), and stopped and removed by stop().
import { join } from 'node:path'
import postgres from 'postgres'
import { asPostgres, binaries, run, serverHome, startServer, type OwnPostgres } from '../own-postgres'

export interface Standby extends OwnPostgres {
  /** The standby's URL: the primary's, with the standby's port. */
  url: string
  /** A small pool on the standby (read-only until promoted), ended by stop(). */
  sql: postgres.Sql
  /** How long the base backup took, ms (the primary's whole cluster is copied: every database on it). */
  backupMs: number
}

/**
 * Starts a hot standby of `primaryUrl` and waits until it accepts connections. `settings` are passed as `-c name=value`
 * (e.g. max_standby_streaming_delay). `name` tells apart two standbys of one test run.
 */
export async function startStandby(primaryUrl: string, settings: Record<string, string> = {}, name = 'standby'): Promise<Standby> {
  const primary = new URL(primaryUrl)
  const probe = postgres(primaryUrl, { max: 1, onnotice: () => {} })
  const [row] = await probe`select current_setting('server_version_num')::int / 10000 as version`
  await probe.end()
  const bin = binaries(Number(row!.version))
  const home = await serverHome(`${name}-${process.pid}`)

  const started = performance.now()
  await run(asPostgres([join(bin, 'pg_basebackup'), '-h', primary.hostname, '-p', primary.port || '5432', '-U', decodeURIComponent(primary.username || 'postgres'),
    '-D', join(home, 'data'), '-R', '-X', 'stream', '-c', 'fast']), 'pg_basebackup')
  const backupMs = performance.now() - started

  const server = await startServer(bin, home, primaryUrl, settings)
  return { ...server, backupMs }
}
