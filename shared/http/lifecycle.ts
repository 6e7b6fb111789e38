// How every process ends: SIGTERM or SIGINT runs its shutdown once and exits 0; a stray rejection inside a library (a
// driver's background work on a dying connection) is logged loudly instead of ending a process that is serving, since
// under foreman one exiting process stops the whole cluster.
import { describeError, log } from '../log'

/** Longest a process spends shutting down before it exits anyway (a process may ask for longer: the mailer). */
const SHUTDOWN_TIMEOUT_MS = 10_000

/** Installs the process handlers; `shutdown` stops accepting, drains and releases connections, then the process exits 0. */
export function onShutdown(shutdown: () => Promise<void>, timeoutMs = SHUTDOWN_TIMEOUT_MS): void {
  let stopping = false
  const stop = async (signal: string) => {
    if (stopping) return
    stopping = true
    log('info', 'shutting down', { signal })
    // Bounded: a backing service that stopped answering (a dead link never closes) must not keep the process alive.
    const late = Bun.sleep(timeoutMs).then(() => log('warn', 'shutdown did not finish in time; exiting', { timeoutMs }))
    await Promise.race([shutdown().catch((error) => log('error', 'shutdown', describeError(error))), late])
    process.exit(0)
  }
  process.on('unhandledRejection', (error) => log('error', 'unhandled rejection', describeError(error)))
  process.on('SIGTERM', () => void stop('SIGTERM'))
  process.on('SIGINT', () => void stop('SIGINT'))
}
