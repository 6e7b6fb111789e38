// A redis-server of a test file's own, without persistence: stopping it (SIGKILL, as in a crash) and starting it again
// empties it, unless it is started again from the dump an explicit SAVE left (a restart from an older RDB file). With `--replicaof` among its arguments it is a replica; `command` speaks to it through redis-cli. With a
// password it requires it of its clients and gives it to its master (a replica's link).
import { mkdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { redisCli } from '../cluster/redis-cluster'

export class OwnRedis {
  private proc: ReturnType<typeof Bun.spawn> | undefined
  /**
   * Its working directory, its own and emptied at each start: a replica's full sync leaves a dump.rdb there, which any
   * server started in the same directory would load (in a shared /tmp, a server of another test file, "empty").
   */
  private readonly dir = join(tmpdir(), `own-redis-${process.pid}-${crypto.randomUUID()}`)
  constructor(readonly port: number, private readonly args: string[] = [], private readonly password?: string) {}

  get url() {
    return `redis://127.0.0.1:${this.port}`
  }

  /** Starts it empty, or (`fromDump`) from the dump.rdb a SAVE left in its directory, as a restarted server would. */
  async start(fromDump = false): Promise<void> {
    const auth = this.password === undefined ? [] : ['--requirepass', this.password, '--masterauth', this.password]
    if (!fromDump) {
      rmSync(this.dir, { recursive: true, force: true })
      mkdirSync(this.dir)
    }
    this.proc = Bun.spawn(['redis-server', '--bind', '127.0.0.1', '--port', String(this.port), '--save', '', '--appendonly', 'no',
      '--daemonize', 'no', '--dir', this.dir, ...auth, ...this.args], { stdout: 'ignore', stderr: 'inherit' })
    for (const deadline = Date.now() + 10_000; ; await Bun.sleep(50)) {
      if (await this.ping()) return
      if (Date.now() > deadline) throw new Error(`redis-server did not answer on ${this.port}`)
    }
  }

  /** Killed as in a crash (SIGKILL): its clients' connections close, and everything it held is gone. */
  async stop(): Promise<void> {
    this.proc?.kill('SIGKILL')
    await this.proc?.exited
    this.proc = undefined
    rmSync(this.dir, { recursive: true, force: true })
  }

  /** Killed as in a crash (SIGKILL), its directory (and a dump a SAVE left there) kept for start(true). */
  async crash(): Promise<void> {
    this.proc?.kill('SIGKILL')
    await this.proc?.exited
    this.proc = undefined
  }

  /** Whether its link to its master is up (a replica's; INFO replication). */
  async linkUp(): Promise<boolean> {
    return (await this.command('INFO', 'replication')).includes('master_link_status:up')
  }

  /**
   * Until each replica has applied everything this master had written when asked (its INFO offsets). Not WAIT: WAIT
   * counts only the writes of the connection that sends it, and redis-cli's own connection has written nothing, so it
   * answers at once, whatever the workers wrote and the replicas hold.
   */
  async replicatedTo(replicas: OwnRedis[], timeoutMs = 10_000): Promise<void> {
    const target = infoNumber(await this.command('INFO', 'replication'), 'master_repl_offset')
    const deadline = Date.now() + timeoutMs
    for (const replica of replicas) {
      while (infoNumber(await replica.command('INFO', 'replication'), 'slave_repl_offset') < target) {
        if (Date.now() > deadline) throw new Error(`a replica did not apply the master's writes up to offset ${target} within ${timeoutMs} ms`)
        await Bun.sleep(10)
      }
    }
  }

  /** Keys held now (DBSIZE of database 0). */
  async size(): Promise<number> {
    return Number((await this.command('DBSIZE')).trim())
  }

  /** One command, as redis-cli prints its reply. */
  command(...args: (string | number)[]): Promise<string> {
    const auth = this.password === undefined ? [] : ['--no-auth-warning', '-a', this.password]
    return redisCli(this.port, ...auth, ...args)
  }

  private ping = async () => (await this.command('PING').catch(() => '')).trim() === 'PONG'
}

/** A numeric field of an INFO reply; -1 when absent (a replica that has not synced yet has no offset). */
function infoNumber(info: string, field: string): number {
  const found = new RegExp(`^${field}:(\\d+)`, 'm').exec(info)
  return found ? Number(found[1]) : -1
}
