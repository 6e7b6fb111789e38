// Kept funnel results: the last result of each funnel insight, answered by its runs while fresher than
// ANALYTICS_FUNNEL_RESULT_TTL_MS, as PostHog keeps insight results with their "computed ... ago". One run computes a
// stale result at a time (a lease on its row); the others wait for it. docs/analytics.md, "Kept funnel results".
import { config } from '../../../shared/config'
import { sql } from '../../../shared/db/client'
import { notFound } from '../../../shared/errors'
import type { Insight } from './insights'
import { countFunnelAnswer } from './prometheus'
import { runFunnel, type FunnelResult } from './semantic/funnel'
import type { Funnel } from './semantic/query-schemas'
import { isPgError } from '../../../shared/db/error-codes'

/**
 * The hash of an insight row `i`'s kind and query, in SQL so that reads, writes and the background refresher agree on
 * it without a round trip: jsonb's text is canonical (keys sorted, no spaces chosen by a client). The leading `1` is
 * the results' version: raise it when what a kept result holds, or how a funnel counts, changes, and every result kept
 * before is computed again at its next run.
 */
export const QUERY_HASH = sql`sha256(convert_to('1:' || i.kind || ':' || i.query::text, 'UTF8'))`

/** How long a run computing a result holds its row: its statement timeout and a margin, so a crashed run frees it. */
const leaseMs = () => config.analytics.queryTimeoutMs + 5000

/** Between two looks at a result another run is computing. */
const WAIT_POLL_MS = 50

/** What an insight run answers besides its kind and id. */
export interface KeptAnswer {
  result: FunnelResult
  /** When the result was computed: relative ranges were taken from this instant. */
  computedAt: Date
  /** true: a kept result (computed by an earlier run or the background refresh); false: computed for this run. */
  cached: boolean
}

/** What keeping a result needs of an insight. */
export type KeptInsight = Pick<Insight, 'id' | 'query'>

export interface FunnelRunOptions {
  /** The run's clock: freshness is judged and relative ranges taken from it. Default: now. */
  now?: Date
  /** ANALYTICS_FUNNEL_RESULT_TTL_MS. */
  ttlMs?: number
  /** Compute a new result whatever is kept. */
  refresh?: boolean
}

/** The kept result of the insight's current query, when computed after `freshAfter`. */
export async function keptResult(insightId: string, freshAfter: Date): Promise<KeptAnswer | null> {
  const [row] = await sql`
    select r.result, r.computed_at from analytics_insight_results r join analytics_insights i on i.id = r.insight_id
    where r.insight_id = ${insightId} and r.result is not null and r.query_hash = ${QUERY_HASH} and r.computed_at > ${freshAfter}`
  return row ? { result: row.result as FunnelResult, computedAt: row.computed_at as Date, cached: true } : null
}

/**
 * Takes the lease on the insight's result row (making the row when there is none): true when this run may compute it,
 * false while another run holds an unexpired lease. An insight deleted meanwhile is 404.
 */
export async function claimResult(productId: string, insightId: string, holdMs = leaseMs()): Promise<boolean> {
  try {
    const rows = await sql`
      insert into analytics_insight_results (insight_id, product_id, refreshing_until)
      values (${insightId}, ${productId}, now() + ${holdMs} * interval '1 millisecond')
      on conflict (insight_id) do update set refreshing_until = excluded.refreshing_until
      where analytics_insight_results.refreshing_until is null or analytics_insight_results.refreshing_until < now()
      returning insight_id`
    return rows.length === 1
  } catch (error) {
    if (isPgError(error, 'foreignKeyViolation')) throw notFound('Insight') // deleted meanwhile
    throw error
  }
}

export async function releaseResult(insightId: string): Promise<void> {
  await sql`update analytics_insight_results set refreshing_until = null where insight_id = ${insightId} and refreshing_until is not null`
}

/**
 * Computes the funnel as of `now` and keeps the result, unless the insight's query changed meanwhile (then the result
 * is answered, not kept: it is not the insight's any more) or a later computation was kept already.
 */
export async function computeResult(productId: string, insight: KeptInsight, now: Date): Promise<KeptAnswer> {
  const started = performance.now()
  const result = await runFunnel(productId, insight.query as Funnel, '/query', now)
  const durationMs = Math.round(performance.now() - started)
  await sql`
    insert into analytics_insight_results (insight_id, product_id, query_hash, result, computed_at, duration_ms, refreshing_until)
    select i.id, i.product_id, ${QUERY_HASH}, ${result as never}::jsonb, ${now}, ${durationMs}, null
    from analytics_insights i where i.id = ${insight.id} and i.product_id = ${productId} and i.query = ${insight.query as never}::jsonb
    on conflict (insight_id) do update set query_hash = excluded.query_hash, result = excluded.result,
      computed_at = excluded.computed_at, duration_ms = excluded.duration_ms, refreshing_until = null, failed_at = null
    where analytics_insight_results.result is null or analytics_insight_results.computed_at <= excluded.computed_at
      or analytics_insight_results.query_hash is distinct from excluded.query_hash`
  return { result, computedAt: now, cached: false }
}

/**
 * Waits while another run holds the lease (at most its length): its result once kept and fresher than `freshAfter`,
 * or null when the lease ended without one (that run failed) or the wait ran out.
 */
async function awaitResult(insightId: string, freshAfter: Date, waitMs = leaseMs()): Promise<KeptAnswer | null> {
  const deadline = Date.now() + waitMs
  for (;;) {
    const kept = await keptResult(insightId, freshAfter)
    if (kept) return kept
    const [row] = await sql`select refreshing_until > now() as busy from analytics_insight_results where insight_id = ${insightId}`
    if (!row?.busy || Date.now() >= deadline) return null
    await Bun.sleep(WAIT_POLL_MS)
  }
}

/** Computes while holding the lease when `claimed`, releasing it however the computation ends. */
async function computeHolding(productId: string, insight: KeptInsight, now: Date, claimed: boolean): Promise<KeptAnswer> {
  try {
    return await computeResult(productId, insight, now)
  } finally {
    if (claimed) await releaseResult(insight.id).catch(() => undefined) // the lease expires anyway
  }
}

/**
 * A run of a funnel insight: its kept result when fresher than the TTL, else (or with `refresh`) a new one, computed,
 * kept and answered. A stale result that another run is computing is waited for, not computed twice.
 */
export async function runFunnelInsight(productId: string, insight: KeptInsight, options: FunnelRunOptions = {}): Promise<KeptAnswer> {
  const now = options.now ?? new Date()
  const freshAfter = new Date(now.getTime() - (options.ttlMs ?? config.analytics.funnelResultTtlMs))
  if (options.refresh) {
    // A refresh is never shared: a computation already under way began before it was asked for.
    const claimed = await claimResult(productId, insight.id)
    countFunnelAnswer('computed')
    return computeHolding(productId, insight, now, claimed)
  }
  const kept = await keptResult(insight.id, freshAfter)
  if (kept) {
    countFunnelAnswer('kept')
    return kept
  }
  // Whoever takes the lease computes; the others wait for its result. A run that finds the lease free again without a
  // result (that run failed, or kept its result and let go between two looks) tries again, for at most one lease.
  const deadline = Date.now() + leaseMs()
  for (;;) {
    if (await claimResult(productId, insight.id)) {
      // Kept by another run between the look above and the lease: answer it.
      const justKept = await keptResult(insight.id, freshAfter)
      if (justKept) {
        await releaseResult(insight.id)
        countFunnelAnswer('awaited')
        return justKept
      }
      countFunnelAnswer('computed')
      return computeHolding(productId, insight, now, true)
    }
    const awaited = await awaitResult(insight.id, freshAfter, Math.max(0, deadline - Date.now()))
    if (awaited) {
      countFunnelAnswer('awaited')
      return awaited
    }
    if (Date.now() >= deadline) {
      countFunnelAnswer('computed')
      return computeHolding(productId, insight, now, false)
    }
  }
}

/**
 * The background refresh of one insight: computes it as of `now` unless another run holds its lease ('busy') or it
 * was computed after `staleAfter` meanwhile ('fresh').
 */
export async function refreshResult(productId: string, insight: KeptInsight, now: Date, staleAfter: Date): Promise<'computed' | 'busy' | 'fresh'> {
  if (!(await claimResult(productId, insight.id))) return 'busy'
  if (await keptResult(insight.id, staleAfter)) {
    await releaseResult(insight.id)
    return 'fresh'
  }
  try {
    await computeHolding(productId, insight, now, true)
  } catch (error) {
    await sql`update analytics_insight_results set failed_at = ${now} where insight_id = ${insight.id}`.catch(() => undefined)
    throw error
  }
  return 'computed'
}
