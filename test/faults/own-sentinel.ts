// A Redis Sentinel of a test file's own (Debian's redis-server in sentinel mode) watching one master on loopback, with
// timings small enough that a failover takes a few seconds: the master is judged down after `downAfterMs` without an
// answer, and with a quorum of one this sentinel alone decides and leads the failover.
// A sentinel whose own process stalls for 2 s (a loaded CI machine; its configuration file fsynced at each step of a
// failover) takes the gap for a clock jump and enters TILT mode: by default it then does nothing for 30 s, a failover
// in progress included (a clean-clone CI run of test/faults/redis-sentinel.test.ts saw 20 s of 503 from that, and a
// 2.5 s SIGSTOP of the sentinel reproduces it). Here TILT lasts two ping periods, and the directory it rewrites is in
// memory where the machine has /dev/shm: Sentinel's own safety, not the platform's behaviour, is what is shortened.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { redisCli } from '../cluster/redis-cluster'

export interface SentinelSetup {
  /** The port this sentinel listens on. */
  port: number
  /** The master's name in the sentinel's configuration (the `<master-name>` of a `redis+sentinel://` URL). */
  name: string
  /** The master's port on 127.0.0.1. */
  masterPort: number
  /** The password of the master and its replicas, if they require one. */
  password?: string
  /** No answer from the master for this long and it is down. Default 1000. */
  downAfterMs?: number
  /** A failover that has not finished in this time is given up (and another not started for twice as long). Default 5000. */
  failoverTimeoutMs?: number
}

/** A new directory in /dev/shm where the machine lets one be made there, else in the temporary directory. */
function inMemoryIfPossible(prefix: string): string {
  try {
    return mkdtempSync(join('/dev/shm', prefix))
  } catch {
    return mkdtempSync(join(tmpdir(), prefix))
  }
}

/** How long TILT mode lasts after a stall (Sentinel's default 30 000): two of its 1 s pings, to read the servers anew. */
const TILT_PERIOD_MS = 2000

export class OwnSentinel {
  private proc: ReturnType<typeof Bun.spawn> | undefined
  /** Sentinel rewrites its configuration file as it learns: a directory of its own, removed on stop. */
  private readonly dir = inMemoryIfPossible('sentinel-')

  constructor(readonly setup: SentinelSetup) {}

  async start(): Promise<void> {
    const { port, name, masterPort, password, downAfterMs = 1000, failoverTimeoutMs = 5000 } = this.setup
    const file = join(this.dir, 'sentinel.conf')
    writeFileSync(file, [
      `port ${port}`, 'bind 127.0.0.1', 'daemonize no', `dir ${this.dir}`,
      `sentinel monitor ${name} 127.0.0.1 ${masterPort} 1`,
      `sentinel down-after-milliseconds ${name} ${downAfterMs}`,
      `sentinel failover-timeout ${name} ${failoverTimeoutMs}`,
      ...(password === undefined ? [] : [`sentinel auth-pass ${name} ${password}`]),
    ].join('\n') + '\n')
    // Its log (what it saw and decided: +sdown, +selected-slave, +switch-master) is kept for a failing test to print.
    this.proc = Bun.spawn(['redis-server', file, '--sentinel'], { stdout: Bun.file(join(this.dir, 'sentinel.log')), stderr: 'inherit' })
    for (const deadline = Date.now() + 10_000; ; await Bun.sleep(50)) {
      if ((await this.command('PING').catch(() => '')).trim() === 'PONG') break
      if (Date.now() > deadline) throw new Error(`redis-server --sentinel did not answer on ${port}`)
    }
    const tilt = (await this.command('SENTINEL', 'DEBUG', 'tilt-period', TILT_PERIOD_MS)).trim()
    if (tilt !== 'OK') throw new Error(`SENTINEL DEBUG tilt-period answered ${tilt}`)
  }

  async stop(): Promise<void> {
    this.proc?.kill('SIGKILL')
    await this.proc?.exited
    this.proc = undefined
    rmSync(this.dir, { recursive: true, force: true })
  }

  /**
   * The port of the master this sentinel has switched to: it changes with the `+switch-master` it announces to its
   * clients. (GET-MASTER-ADDR-BY-NAME names a promoted replica earlier, while the other replicas are being moved to it.)
   */
  async masterPort(): Promise<number> {
    return Number(this.fields(await this.command('SENTINEL', 'MASTER', this.setup.name)).get('port'))
  }

  /** The last `lines` events of its log (`+sdown`, `+tilt`, `-failover-abort-…`: lines with a `+` or `-` event), for a failing test to print. */
  logTail(lines = 40): string {
    try {
      const events = readFileSync(join(this.dir, 'sentinel.log'), 'utf8').split('\n').filter((line) => / [#*] [+-]/.test(line))
      return events.slice(-lines).join('\n')
    } catch (error) {
      return `(no sentinel log: ${error})`
    }
  }

  /** How many replicas of the master this sentinel knows. */
  async replicaCount(): Promise<number> {
    return Number(this.fields(await this.command('SENTINEL', 'MASTER', this.setup.name)).get('num-slaves'))
  }

  /** redis-cli prints a map reply as its fields and values, one a line. */
  private fields(reply: string): Map<string, string> {
    const lines = reply.split('\n').map((line) => line.trim())
    return new Map(lines.flatMap((line, i) => (i % 2 === 0 && i + 1 < lines.length ? [[line, lines[i + 1]!]] : [])))
  }

  /** One command, as redis-cli prints its reply. */
  command(...args: (string | number)[]): Promise<string> {
    return redisCli(this.setup.port, ...args)
  }
}
