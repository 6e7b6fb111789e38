// When a webhook delivery is attempted: at once, then after each delay of the schedule Svix and Resend use (5 s, 5 min,
// 30 min, 2 h, 5 h, 10 h, 10 h), eight attempts in all over about 27.6 hours. parseRetryDelays reads a shorter one for
// the tests (WEBHOOK_RETRY_SCHEDULE, shared/config.ts). Imports nothing: the config module reads it.

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const

/** Delays before the 2nd, 3rd, … attempt, in ms. */
export const DEFAULT_RETRY_DELAYS_MS: readonly number[] = [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000]

/** Most delays a schedule may have (each one an attempt: bounds the attempts recorded per delivery). */
export const MAX_RETRIES = 20
/** Longest single delay: a timer much longer would not fire when asked (past about 24.8 days it fires at once). */
export const MAX_DELAY_MS = 86_400_000

/**
 * Reads a schedule written as comma-separated durations with a unit (`ms`, `s`, `m`, `h`), e.g. `5s,5m,30m,2h`.
 * Throws naming the variable and the part it cannot read.
 * @example parseRetryDelays('50ms,100ms', 'WEBHOOK_RETRY_SCHEDULE') // [50, 100]
 */
export function parseRetryDelays(text: string, variable: string): number[] {
  const parts = text.split(',').map((part) => part.trim())
  if (parts.length > MAX_RETRIES) throw new Error(`${variable} has ${parts.length} delays; at most ${MAX_RETRIES}`)
  return parts.map((part) => {
    const match = /^(\d{1,9})(ms|s|m|h)$/.exec(part)
    if (!match) throw new Error(`${variable}: "${part}" is not a duration such as 500ms, 5s, 5m or 2h`)
    const ms = Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS]
    if (ms < 1 || ms > MAX_DELAY_MS) throw new Error(`${variable}: "${part}" must be between 1ms and 24h`)
    return ms
  })
}

/** The delay before the next attempt after `attemptsMade` attempts, or null when the schedule is spent. */
export function nextRetryDelay(attemptsMade: number, delays: readonly number[] = DEFAULT_RETRY_DELAYS_MS): number | null {
  return attemptsMade >= 1 && attemptsMade <= delays.length ? delays[attemptsMade - 1]! : null
}
