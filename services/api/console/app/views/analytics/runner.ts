// Runs a dashboard's insights within what the API allows one product: at most two analytics queries at once
// (ANALYTICS_MAX_CONCURRENT_PER_PRODUCT), so a dashboard of many tiles queues its runs instead of drawing 429s; a
// 429 that still happens (another tab, an agent on the same product) is retried after a pause, a few times.
import { api, ConsoleApiError } from '../../api'
import type { InsightRun } from './charts'

const AT_ONCE = 2
const ATTEMPTS = 5
const PAUSE_MS = 1000 // the API's Retry-After for too_many_queries and rate_limited

export interface Runner {
  run(insightId: string): Promise<InsightRun>
  /** Nothing queued starts after this (the reader left the view). */
  stop(): void
}

export function createRunner(): Runner {
  let running = 0
  let stopped = false
  const waiting: (() => void)[] = []
  const slot = () => new Promise<void>((resolve) => {
    if (running < AT_ONCE) { running++; resolve() } else waiting.push(() => { running++; resolve() })
  })
  const release = () => {
    running--
    waiting.shift()?.()
  }
  return {
    async run(insightId) {
      for (let attempt = 1; ; attempt++) {
        await slot()
        try {
          if (stopped) throw new Error('stopped')
          return await api.run<InsightRun>('analytics_insight_run', { path: { id: insightId } })
        } catch (error) {
          if (stopped || !(error instanceof ConsoleApiError) || error.status !== 429 || attempt >= ATTEMPTS) throw error
        } finally {
          release()
        }
        await new Promise((resolve) => setTimeout(resolve, PAUSE_MS * attempt))
      }
    },
    stop() {
      stopped = true
    },
  }
}
