// Periodic background rounds (sweeps) that talk to a backend: a round still running when the next is due is skipped,
// not doubled, so a slow PostgreSQL or Redis never piles rounds (and their queries) up.

/** Runs `round` every `ms` milliseconds, never two at once; a failing round is the round's own business. */
export function everyUnlessRunning(ms: number, round: () => Promise<unknown>): ReturnType<typeof setInterval> {
  let running: Promise<unknown> | undefined
  return setInterval(() => {
    running ??= round().catch(() => undefined).finally(() => (running = undefined))
  }, ms)
}
