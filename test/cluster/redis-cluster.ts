// A real three-master Redis Cluster on loopback for one test file: Debian's redis-server in cluster mode, joined with
// `redis-cli --cluster create`. A node's port is at most 55535: its cluster bus listens 10 000 higher.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const run = async (argv: string[]) => {
  const proc = Bun.spawn(argv, { stdout: 'pipe', stderr: 'pipe' })
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited])
  if (code !== 0) throw new Error(`${argv.join(' ')} exited ${code}: ${err || out}`)
  return out
}

/** One command to the redis-server on 127.0.0.1:`port`, as redis-cli prints its reply; throws when it fails to answer. */
export const redisCli = (port: number, ...command: (string | number)[]) =>
  run(['redis-cli', '-h', '127.0.0.1', '-p', String(port), ...command.map(String)])

/** Ports handed out in this process, so two nodes never get the same one (or one another's bus port). */
const taken = new Set<number>()

/**
 * A port and its bus port (+10 000) both free, below Linux's ephemeral range (32768 up) so an outgoing connection
 * cannot take a killed node's port before it restarts, and at most 55535.
 */
async function clusterPort(): Promise<number> {
  for (;;) {
    const port = 12_000 + Math.floor(Math.random() * 10_000)
    if ([port, port + 10_000].some((candidate) => taken.has(candidate) || taken.has(candidate - 10_000))) continue
    const free = [port, port + 10_000].every((candidate) => {
      try {
        Bun.listen({ hostname: '127.0.0.1', port: candidate, socket: { data() {} } }).stop(true)
        return true
      } catch {
        return false
      }
    })
    if (free) {
      taken.add(port)
      return port
    }
  }
}

export class RedisCluster {
  private readonly procs: ReturnType<typeof Bun.spawn>[] = []
  private dir = ''
  ports: number[] = []

  /** `redis+cluster://` with every node: the platform's REDIS_URL for this cluster. */
  get url(): string {
    return `redis+cluster://${this.ports.map((port) => `127.0.0.1:${port}`).join(',')}`
  }

  /** `masters` masters, each with `replicas` replicas (which take over when their master fails). */
  async start(masters = 3, replicas = 0): Promise<void> {
    this.dir = mkdtempSync(join(tmpdir(), 'redis-cluster-'))
    for (let i = 0; i < masters * (1 + replicas); i++) {
      const port = await clusterPort()
      this.ports.push(port)
      this.procs.push(this.spawnNode(port))
    }
    for (const port of this.ports) await this.until(port, async () => (await this.cli(port, 'PING')).trim() === 'PONG')
    await run(['redis-cli', '--cluster', 'create', ...this.ports.map((port) => `127.0.0.1:${port}`), '--cluster-replicas', String(replicas), '--cluster-yes'])
    await this.untilWhole()
    // A replica is in sync once its master reports it online.
    if (replicas) for (const port of this.ports) await this.until(port, async () => !(await this.cli(port, 'INFO', 'replication')).includes('role:master') || (await this.cli(port, 'INFO', 'replication')).includes(`connected_slaves:${replicas}`))
  }

  /** One command on one node, as redis-cli prints its reply. */
  cli(port: number, ...command: string[]): Promise<string> {
    return redisCli(port, ...command)
  }

  /** One command on the first node that answers (some may have been killed). */
  async anyNode(...command: string[]): Promise<string> {
    for (const port of this.ports) {
      const reply = await this.cli(port, ...command).catch(() => undefined)
      if (reply !== undefined) return reply
    }
    throw new Error('no node of the cluster answers')
  }

  /** Keys on each node (DBSIZE), in port order. */
  async sizes(): Promise<number[]> {
    return Promise.all(this.ports.map(async (port) => Number((await this.cli(port, 'DBSIZE')).trim())))
  }

  /** The node ("port") serving `slot` now, as the first node that answers (or the node `via`) sees it. */
  async ownerOf(slot: number, via?: number): Promise<number> {
    const shards = via === undefined ? await this.anyNode('CLUSTER', 'SLOTS') : await this.cli(via, 'CLUSTER', 'SLOTS')
    // redis-cli prints each range as: start, end, then per node host, port, id (one value a line).
    const lines = shards.split('\n').map((line) => line.trim()).filter(Boolean)
    for (let i = 0; i + 4 < lines.length; i++) {
      const [start, end, , port] = [Number(lines[i]), Number(lines[i + 1]), lines[i + 2], Number(lines[i + 3])]
      if (Number.isInteger(start) && Number.isInteger(end) && lines[i + 2] === '127.0.0.1' && start <= slot && slot <= end) return port
    }
    throw new Error(`no node serves slot ${slot}`)
  }

  /**
   * Until every node but those in `except` names `port` as serving `slot` (a replica learns a change by gossip, a moment
   * after its master). A node that answers nothing (silenced, or held by CLIENT PAUSE ALL) must be in `except`:
   * redis-cli waits for it with no timeout, and `until`'s deadline is looked at only between answers.
   */
  async untilServedBy(slot: number, port: number, except: number[] = []): Promise<void> {
    for (const node of this.ports) {
      if (!except.includes(node)) await this.until(node, async () => (await this.ownerOf(slot, node)) === port)
    }
  }

  /**
   * Moves one slot, with its keys, from the node serving it to `to`, the way `redis-cli --cluster reshard` does:
   * IMPORTING on the target, MIGRATING on the source, MIGRATE of every key, then the slot assigned on every node.
   * `whileMigrating` runs once both are marked and before any key moves (the source answers ASK for keys it lacks).
   */
  async migrateSlot(slot: number, to: number, whileMigrating?: () => Promise<void>): Promise<void> {
    const from = await this.ownerOf(slot)
    const id = async (port: number) => (await this.cli(port, 'CLUSTER', 'MYID')).trim()
    const [fromId, toId] = [await id(from), await id(to)]
    await this.cli(to, 'CLUSTER', 'SETSLOT', String(slot), 'IMPORTING', fromId)
    await this.cli(from, 'CLUSTER', 'SETSLOT', String(slot), 'MIGRATING', toId)
    await whileMigrating?.()
    for (;;) {
      const keys = (await this.cli(from, 'CLUSTER', 'GETKEYSINSLOT', String(slot), '100')).split('\n').map((k) => k.trim()).filter(Boolean)
      if (keys.length === 0) break
      await this.cli(from, 'MIGRATE', '127.0.0.1', String(to), '', '0', '5000', 'KEYS', ...keys)
    }
    // On every master (a replica refuses SETSLOT and follows its master).
    for (const port of await this.masters(to)) await this.cli(port, 'CLUSTER', 'SETSLOT', String(slot), 'NODE', toId)
    await this.untilServedBy(slot, to)
  }

  /** Starts one more node and makes it a replica of master `master`; resolves with its port once the master has it in sync. */
  async addReplica(master: number): Promise<number> {
    const port = await clusterPort()
    const members = [...this.ports]
    this.ports.push(port)
    this.procs.push(this.spawnNode(port))
    await this.until(port, async () => (await this.cli(port, 'PING')).trim() === 'PONG')
    await this.cli(port, 'CLUSTER', 'MEET', '127.0.0.1', String(master))
    const masterId = (await this.cli(master, 'CLUSTER', 'MYID')).trim()
    // Once it knows the master (the handshake done), it can follow it.
    await this.until(port, async () => (await this.cli(port, 'CLUSTER', 'REPLICATE', masterId)).startsWith('OK'))
    for (const member of members) {
      await this.until(member, async () => (await this.cli(member, 'CLUSTER', 'NODES')).split('\n').some((line) =>
        line.includes(`127.0.0.1:${port}@`) && line.includes(`slave ${masterId}`)))
    }
    await this.until(master, async () => new RegExp(`port=${port},state=online`).test(await this.cli(master, 'INFO', 'replication')))
    return port
  }

  /** Takes a node that serves no slot (a replica) out of the cluster: it is stopped, and every other node forgets it. */
  async removeNode(port: number): Promise<void> {
    const id = (await this.cli(port, 'CLUSTER', 'MYID')).trim()
    await this.kill(port)
    const index = this.ports.indexOf(port)
    this.ports.splice(index, 1)
    this.procs.splice(index, 1)
    for (const member of this.ports) await this.cli(member, 'CLUSTER', 'FORGET', id)
  }

  /** Kills one node (SIGKILL: no goodbye to its clients, its data gone, as in a crash). */
  async kill(port: number): Promise<void> {
    const proc = this.procs[this.ports.indexOf(port)]!
    proc.kill('SIGKILL')
    await proc.exited
  }

  /**
   * Stops one node's process (SIGSTOP) without ending it: its sockets stay open, nothing resets or closes them, and
   * nothing is answered: a silent link, as a hung host or a dropped path looks to its clients. Its data stays.
   */
  silence(port: number): void {
    this.procs[this.ports.indexOf(port)]!.kill('SIGSTOP')
  }

  /** Lets a silenced node run again (SIGCONT), with its data: it answers what it was sent meanwhile. */
  resume(port: number): void {
    this.procs[this.ports.indexOf(port)]!.kill('SIGCONT')
  }

  /** Starts a killed node again, empty, on its port with its cluster config: it takes its slots back. */
  async restart(port: number): Promise<void> {
    this.procs[this.ports.indexOf(port)] = this.spawnNode(port)
    await this.untilWhole()
  }

  /** Resolves once every replica of master `port` has acknowledged all it was sent (async replication has caught up). */
  async synced(port: number): Promise<void> {
    await this.until(port, async () => {
      const info = await this.cli(port, 'INFO', 'replication')
      const offset = Number(/master_repl_offset:(\d+)/.exec(info)?.[1])
      const replicas = [...info.matchAll(/slave\d+:.*offset=(\d+)/g)].map((match) => Number(match[1]))
      return replicas.length > 0 && replicas.every((acknowledged) => acknowledged === offset)
    })
  }

  /** The masters that are not failed, by port, as node `via` sees them (CLUSTER NODES: id, address, flags, ...). */
  async masters(via: number): Promise<number[]> {
    return (await this.cli(via, 'CLUSTER', 'NODES')).split('\n').map((line) => line.trim().split(' ')).filter(([, , flags]) =>
      flags?.split(',').includes('master') && !flags.split(',').some((flag) => flag.startsWith('fail')))
      .map(([, address]) => Number(address!.split('@')[0]!.split(':')[1]))
  }

  /**
   * Without persistence, as the tests want a crash to lose data. `cluster-require-full-coverage no`: the nodes that
   * are up keep serving their slots while one is down (docs/realtime-data-plane.md#redis-cluster).
   * `repl-diskless-sync-delay 0`: a master sends a new replica its data at once; by default it waits 5 s for more
   * replicas to share the transfer, which every replica started or added paid in full (5 s of each addReplica).
   */
  private spawnNode(port: number) {
    return Bun.spawn([
      'redis-server', '--bind', '127.0.0.1', '--port', String(port), '--cluster-enabled', 'yes',
      '--cluster-config-file', `nodes-${port}.conf`, '--dir', this.dir, '--save', '', '--appendonly', 'no',
      '--cluster-require-full-coverage', 'no', '--cluster-node-timeout', '2000', '--repl-diskless-sync-delay', '0',
    ], { stdout: 'ignore', stderr: 'inherit' })
  }

  async stop(): Promise<void> {
    for (const proc of this.procs) proc.kill('SIGKILL')
    await Promise.all(this.procs.map((proc) => proc.exited))
    if (this.dir) rmSync(this.dir, { recursive: true, force: true })
  }

  /** Until every node reports the cluster whole (cluster_state:ok). */
  private async untilWhole(): Promise<void> {
    for (const port of this.ports) await this.until(port, async () => (await this.cli(port, 'CLUSTER', 'INFO')).includes('cluster_state:ok'))
  }

  private async until(port: number, ready: () => Promise<boolean>): Promise<void> {
    for (const deadline = Date.now() + 15_000; ; await Bun.sleep(100)) {
      if (await ready().catch(() => false)) return
      if (Date.now() > deadline) throw new Error(`redis cluster node ${port} not ready`)
    }
  }
}
