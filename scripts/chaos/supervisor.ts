// The soak's processes: each platform process started as `bun run` would start it, SIGKILLed and started again on the
// same port (clients come back to the address they know), and its resident memory sampled from /proc.
import { readFileSync } from 'node:fs'

export interface MemberSpec {
  /** Unique within the soak: `public-1`, `gateway-2`. */
  name: string
  script: string
  env: Record<string, string>
  /** The port it serves on, probed at /readyz after each start; none for processes without one (aggregator, archiver). */
  port?: number
}

export interface MemorySample { atMs: number; rssKiB: number; incarnation: number }

interface Member extends MemberSpec {
  proc?: ReturnType<typeof Bun.spawn>
  incarnation: number
  memory: MemorySample[]
}

const READY_MS = 20_000

/** Resident set size of a live process, KiB (null once it is gone). */
function rssKiB(pid: number): number | null {
  try {
    const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
    return match ? Number(match[1]) : null
  } catch {
    return null
  }
}

export class Supervisor {
  private readonly members = new Map<string, Member>()
  private readonly started = performance.now()

  constructor(private readonly baseEnv: Record<string, string | undefined>) {
    // A run that fails half-way must not leave its processes behind (they would hold ports and the output pipe).
    process.once('exit', () => {
      for (const member of this.members.values()) member.proc?.kill('SIGKILL')
    })
  }

  get names(): string[] {
    return [...this.members.keys()]
  }

  url(name: string): string {
    return `http://127.0.0.1:${this.member(name).port}`
  }

  /** Whether the process is running (started and not seen to exit). */
  alive(name: string): boolean {
    const proc = this.member(name).proc
    return proc !== undefined && proc.exitCode === null && proc.signalCode === null
  }

  async add(spec: MemberSpec): Promise<void> {
    this.members.set(spec.name, { ...spec, incarnation: 0, memory: [] })
    await this.start(spec.name)
  }

  /** SIGKILL: no handler runs, in-flight work is cut wherever it is. */
  async kill(name: string): Promise<void> {
    const proc = this.member(name).proc
    if (!proc) return
    proc.kill('SIGKILL')
    await proc.exited
  }

  async restart(name: string): Promise<void> {
    await this.kill(name)
    await this.start(name)
  }

  /** One sample of every live process's memory. */
  sampleMemory(): void {
    const atMs = performance.now() - this.started
    for (const member of this.members.values()) {
      const rss = member.proc?.pid ? rssKiB(member.proc.pid) : null
      if (rss !== null) member.memory.push({ atMs, rssKiB: rss, incarnation: member.incarnation })
    }
  }

  memory(): Record<string, MemorySample[]> {
    return Object.fromEntries([...this.members.values()].map((m) => [m.name, m.memory]))
  }

  incarnations(name: string): number {
    return this.member(name).incarnation
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.members.values()].map(async (member) => {
      member.proc?.kill('SIGTERM')
      await member.proc?.exited
    }))
  }

  private member(name: string): Member {
    const member = this.members.get(name)
    if (!member) throw new Error(`no process ${name} in the soak`)
    return member
  }

  private async start(name: string): Promise<void> {
    const member = this.member(name)
    member.incarnation++
    member.proc = Bun.spawn(['bun', 'run', member.script], {
      env: { ...this.baseEnv, ...member.env, PROCESS_NAME: name },
      stdout: 'ignore',
      stderr: process.env.CHAOS_STDERR ? 'inherit' : 'ignore',
    })
    if (member.port === undefined) return
    const deadline = Date.now() + READY_MS
    for (;;) {
      try {
        if ((await fetch(`http://127.0.0.1:${member.port}/readyz`)).ok) return
      } catch {}
      if (member.proc.exitCode !== null) throw new Error(`${name} exited (${member.proc.exitCode}) while starting`)
      if (Date.now() > deadline) throw new Error(`${name} did not answer /readyz on port ${member.port} in ${READY_MS} ms`)
      await Bun.sleep(50)
    }
  }
}
