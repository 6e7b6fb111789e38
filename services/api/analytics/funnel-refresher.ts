// The background refresh of kept funnel results: the API workers recompute the funnel insights that dashboards use
// before their kept results go stale (older than half ANALYTICS_FUNNEL_RESULT_TTL_MS), so a dashboard's funnels answer
// from kept results. One worker at a time (a PostgreSQL advisory lock); a bounded batch a round, oldest first, at most
// one insight per product. docs/analytics.md, "Kept funnel results".
import { config } from '../../../shared/config'
import { sql } from '../../../shared/db/client'
import { describeError, log } from '../../../shared/log'
import { QUERY_HASH, refreshResult } from './insight-results'
import { countFunnelRefresh, queryOutcome, type RefreshOutcome } from './prometheus'
import type { Funnel } from './semantic/query-schemas'

/** The advisory lock one worker's round holds (727001 migrations, 727002 partitions, 727003 rollup sets). */
const REFRESH_LOCK = 727_004

export interface RefreshRoundOptions {
  /** The clock: read once to choose the insights, then once per insight computed. */
  clock?: () => Date
  /** ANALYTICS_FUNNEL_RESULT_TTL_MS: results older than half of it are refreshed. */
  ttlMs?: number
  /** ANALYTICS_FUNNEL_REFRESH_BATCH: most insights a round takes up. */
  batch?: number
  /** Aborted: the round stops after the insight in progress. */
  signal?: AbortSignal
}

export interface RefreshRound {
  /** false: another worker held the lock (or the batch is 0), and this round did nothing. */
  ran: boolean
  refreshed: { insightId: string; productId: string; outcome: RefreshOutcome }[]
}

/**
 * Funnel insights some dashboard uses whose kept result is missing, of another query, or computed before `staleAfter`,
 * and that no run is computing now: the oldest of each product (a failed refresh counts as its time, so it goes behind
 * the product's others), then the oldest products first, at most `batch`.
 */
export async function dueInsights(staleAfter: Date, batch: number) {
  return sql<{ id: string; product_id: string; query: Funnel }[]>`
    select id, product_id, query from (
      select distinct on (i.product_id) i.id, i.product_id, i.query, greatest(r.computed_at, r.failed_at) as done_at
      from analytics_insights i left join analytics_insight_results r on r.insight_id = i.id
      where i.kind = 'funnel' and exists (select 1 from analytics_dashboard_insights di where di.insight_id = i.id)
        and (r.result is null or r.computed_at <= ${staleAfter} or r.query_hash is distinct from ${QUERY_HASH})
        and (r.refreshing_until is null or r.refreshing_until < now())
      order by i.product_id, done_at asc nulls first, i.id
    ) due
    order by done_at asc nulls first, id
    limit ${batch}`
}

/**
 * One round: unless another worker's round holds the lock, refreshes the due insights one after the other, each under
 * the analytics statement timeout. A failure is logged and counted, and the round goes on.
 */
export async function refreshRound(options: RefreshRoundOptions = {}): Promise<RefreshRound> {
  const clock = options.clock ?? (() => new Date())
  const ttlMs = options.ttlMs ?? config.analytics.funnelResultTtlMs
  const batch = options.batch ?? config.analytics.funnelRefreshBatch
  const staleAfter = (now: Date) => new Date(now.getTime() - ttlMs / 2)
  if (batch === 0) return { ran: false, refreshed: [] }
  // A session lock on a connection of its own, held for the round: a worker that dies frees it with its connection.
  const connection = await sql.reserve()
  try {
    const [row] = await connection`select pg_try_advisory_lock(${REFRESH_LOCK}) as locked`
    if (!row?.locked) return { ran: false, refreshed: [] }
    try {
      const refreshed: RefreshRound['refreshed'] = []
      for (const due of await dueInsights(staleAfter(clock()), batch)) {
        if (options.signal?.aborted) break
        const now = clock()
        let outcome: RefreshOutcome
        try {
          const done = await refreshResult(due.product_id, { id: due.id, query: due.query }, now, staleAfter(now))
          outcome = done === 'computed' ? 'ok' : done
        } catch (error) {
          outcome = queryOutcome(error)
          // A refusal (a saved query the catalog no longer plans, a product at its query limit) needs no stack.
          const cause = outcome === 'refused' ? { error: (error as Error).message } : describeError(error)
          log('warn', 'funnel insight not refreshed', { insight_id: due.id, product_id: due.product_id, outcome, ...cause })
        }
        countFunnelRefresh(outcome)
        refreshed.push({ insightId: due.id, productId: due.product_id, outcome })
      }
      return { ran: true, refreshed }
    } finally {
      await connection`select pg_advisory_unlock(${REFRESH_LOCK})`
    }
  } finally {
    connection.release()
  }
}

/**
 * Runs a round every `intervalMs` after the previous one ended (never two at once on a worker); a failing round is
 * logged and the next one comes. Started by services/api/main.ts, not by the app, so tests of the app run no rounds.
 */
export function startFunnelRefresher(intervalMs = config.analytics.funnelRefreshIntervalMs, round: RefreshRoundOptions = {}) {
  const stopping = new AbortController()
  let timer: ReturnType<typeof setTimeout> | undefined
  let running: Promise<void> | undefined
  const tick = () => {
    running = refreshRound({ ...round, signal: stopping.signal })
      .then(() => undefined, (error) => log('warn', 'funnel refresh round failed', describeError(error)))
      .finally(() => {
        running = undefined
        if (!stopping.signal.aborted) timer = setTimeout(tick, intervalMs)
      })
  }
  timer = setTimeout(tick, intervalMs)
  return {
    /** Stops after the insight in progress. */
    async stop(): Promise<void> {
      stopping.abort()
      clearTimeout(timer)
      await running
    },
  }
}
