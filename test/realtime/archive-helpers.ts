// Helpers for the archive tests: the archiver as a real process, and waiting for what it writes.
import { randomUUID } from 'node:crypto'
import { sql } from '../../shared/db/client'

/** The archiver as a real process, its JSON log lines collected. */
export interface ArchiverProcess {
  proc: ReturnType<typeof Bun.spawn>
  logs(): Record<string, any>[]
}

const running = new Set<ReturnType<typeof Bun.spawn>>()
process.once('exit', () => {
  for (const proc of running) proc.kill('SIGKILL')
})

/** `bun run services/archiver/main.ts` with quick rounds and claims, a consumer name of its own, and `env` on top. */
export function startArchiver(env: Record<string, string> = {}): ArchiverProcess {
  const proc = Bun.spawn(['bun', 'run', 'services/archiver/main.ts'], {
    env: { ...process.env, ARCHIVER_IDLE_MS: '20', ARCHIVER_CLAIM_IDLE_MS: '1000', ARCHIVER_CONSUMER: `test-${randomUUID()}`, ...env },
    stdout: 'pipe',
    stderr: 'inherit',
  })
  running.add(proc)
  void proc.exited.then(() => running.delete(proc))
  let text = ''
  void (async () => {
    const decoder = new TextDecoder()
    for await (const chunk of proc.stdout as ReadableStream<Uint8Array>) text += decoder.decode(chunk, { stream: true })
  })()
  return { proc, logs: () => text.split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line)) }
}

/** Polls `check` until it answers something truthy (returned), or fails naming `what`. */
export async function until<T>(what: string, check: () => Promise<T | undefined | false>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (value) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await Bun.sleep(50)
  }
}

/** Rows the archive holds for one channel. */
export const archivedCount = async (productId: string, channel: string) =>
  Number((await sql`select count(*)::int as n from realtime_archive where product_id = ${productId} and channel = ${channel}`)[0]!.n)
