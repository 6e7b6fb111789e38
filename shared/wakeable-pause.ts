// A pause a background loop sleeps in between rounds, which its stop() can cut short: the archiver and the aggregator
// stop within one round, not one idle interval.

export interface WakeablePause {
  /** Resolves after `ms`, or at once when woken. */
  pause(ms: number): Promise<void>
  /** Ends the pause in progress, if any. */
  wake(): void
}

export function wakeablePause(): WakeablePause {
  let wake: (() => void) | undefined
  return {
    pause: (ms) => new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms)
      wake = () => (clearTimeout(timer), resolve())
    }),
    wake: () => wake?.(),
  }
}
