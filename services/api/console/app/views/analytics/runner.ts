// Runs a dashboard's insights within what the API allows one product: at most two analytics queries at once
// (ANALYTICS_MAX_CONCURRENT_PER_PRODUCT), so a dashboard of many tiles queues its runs instead of drawing 429s; a
// 429 that still happens (another tab, an agent on the same product) is retried after the pause the API asks for, a
// few times. Queued runs can be dropped: when the reader leaves, or a restore redraws the dashboard (the old tiles'
// runs must not go ahead of the new ones).
import { api, ConsoleApiError } from '../../api'
import type { InsightRun } from './charts'

const AT_ONCE = 2
const ATTEMPTS = 5
// When a 429's body names no pause: the Retry-After the API gives too_many_queries (1 s), longer on each attempt.
// (The Retry-After header itself is not readable here: app/api.ts keeps only the body.)
const PAUSE_MS = 1000
const MAX_PAUSE_MS = 60_000

/** A run dropped before it started (the reader left, or the dashboard was redrawn). */
export class RunCancelled extends Error {
  constructor() {
    super('cancelled')
  }
}

/** What a run asks besides the insight (analytics_insight_run's body): another range, or a new funnel result. */
export interface RunBody {
  range?: { from: string; to?: string }
  refresh?: boolean
}

export interface Runner {
  run(insightId: string, body?: RunBody): Promise<InsightRun>
  /** Drops every run not yet started, and every retry not yet sent; runs after this are queued as usual. */
  clear(): void
  /** clear(), and nothing starts after this (the reader left the view). */
  stop(): void
}

/** How long to wait before retrying a 429: the body's `retryAfter` (seconds) when it has one. */
export function retryPause(error: ConsoleApiError, attempt: number): number {
  const seconds = (error.body as { retryAfter?: unknown }).retryAfter
  return typeof seconds === 'number' && Number.isFinite(seconds) && seconds >= 0
    ? Math.min(seconds * 1000, MAX_PAUSE_MS)
    : PAUSE_MS * attempt
}

const runInsight = (insightId: string, body: RunBody = {}) => api.run<InsightRun>('analytics_insight_run', { path: { id: insightId }, body })
const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

export function createRunner(call = runInsight, sleep = pause): Runner {
  let running = 0
  let generation = 0 // a run started under an older generation was cleared
  let stopped = false
  const waiting: { start: () => void; cancel: () => void }[] = []
  const slot = () => new Promise<void>((resolve, reject) => {
    const start = () => { running++; resolve() }
    if (running < AT_ONCE) start()
    else waiting.push({ start, cancel: () => reject(new RunCancelled()) })
  })
  const release = () => {
    running--
    waiting.shift()?.start()
  }
  const clear = () => {
    generation++
    for (const entry of waiting.splice(0)) entry.cancel()
  }
  return {
    clear,
    async run(insightId, body) {
      const mine = generation
      const cancelled = () => stopped || mine !== generation
      for (let attempt = 1; ; attempt++) {
        await slot()
        let wait: number
        try {
          if (cancelled()) throw new RunCancelled()
          return await call(insightId, body)
        } catch (error) {
          if (cancelled() || !(error instanceof ConsoleApiError) || error.status !== 429 || attempt >= ATTEMPTS) throw error
          wait = retryPause(error, attempt)
        } finally {
          release()
        }
        await sleep(wait)
        if (cancelled()) throw new RunCancelled()
      }
    },
    stop() {
      stopped = true
      clear()
    },
  }
}
