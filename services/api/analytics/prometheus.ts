// The analytics queries' Prometheus metrics (docs/metrics.md), not the analytics metrics a query computes: how long
// each query operation runs once it holds its slot, by catalog operation id and outcome, the queries refused for want
// of a slot, by scope, and which server answered each read (primary or replica) and why, with the replica's lag. Every label is an operation id of the catalog or a fixed
// word: never a product, insight or dashboard id, nor a server's address.
import { ApiError } from '../../../shared/errors'
import { counter, DURATION_BUCKETS, gauge, histogram } from '../../../shared/metrics/registry'

/** Past 10 s: ANALYTICS_QUERY_TIMEOUT_MS (10 s by default) may be raised. */
const QUERY_BUCKETS = [...DURATION_BUCKETS, 30, 60]

const durations = histogram('analytics_query_duration_seconds',
  'Analytics operations run in a slot, by operation id and outcome (ok, timeout: its statement timeout, refused: a 4xx, error)',
  ['operation', 'outcome'], QUERY_BUCKETS)
const refused = counter('analytics_queries_refused_total', 'Analytics operations refused with too_many_queries, by scope (organization, worker)', ['scope'])

/** What became of one run: `refused` for an answer the caller can act on (4xx), `error` for anything else. */
export function queryOutcome(error: unknown): 'timeout' | 'refused' | 'error' {
  if (error instanceof ApiError && error.code === 'query_timeout') return 'timeout'
  return error instanceof ApiError && error.status < 500 ? 'refused' : 'error'
}

/** Runs one analytics operation (`operation`: its catalog id), timing it under its outcome. */
export async function timedQuery<T>(operation: string, run: () => Promise<T>): Promise<T> {
  const started = performance.now()
  let outcome = 'ok'
  try {
    return await run()
  } catch (error) {
    outcome = queryOutcome(error)
    throw error
  } finally {
    durations.observe({ operation, outcome }, (performance.now() - started) / 1000)
  }
}

export const countRefusal = (scope: 'organization' | 'worker') => refused.inc({ scope })

const reads = counter('analytics_reads_total',
  'Analytics reads (metric queries, funnels, insight runs) by the server that answered (primary, replica) and why (no_replica, fresh, within_lag, lagging, not_standby, unavailable, conflict)',
  ['server', 'reason'])
const replicaLag = gauge('analytics_replica_lag_seconds',
  'How far the analytics replica was behind the primary at the last read that measured it: 0 when it had replayed everything, else the age of its last replayed commit')

/** One analytics read, where it ran and why; `lagMs`: the replica's lag when that read measured it. */
export function countRead(server: 'primary' | 'replica', reason: string, lagMs: number | null): void {
  reads.inc({ server, reason })
  if (lagMs !== null) replicaLag.set(lagMs / 1000)
}

export type FunnelAnswer = 'kept' | 'awaited' | 'computed'
const funnelAnswers = counter('analytics_funnel_results_total',
  'Funnel insight runs by how they were answered: kept (a kept result younger than ANALYTICS_FUNNEL_RESULT_TTL_MS), awaited (the result another run was computing), computed (for this run)',
  ['answer'])

/** One run of a funnel insight, by how it was answered (docs/analytics.md, "Kept funnel results"). */
export const countFunnelAnswer = (answer: FunnelAnswer) => funnelAnswers.inc({ answer })

export type RefreshOutcome = 'ok' | 'busy' | 'fresh' | 'timeout' | 'refused' | 'error'
const refreshes = counter('analytics_funnel_refreshes_total',
  'Background refreshes of funnel insights that dashboards use, by outcome: ok, busy (another run was computing it), fresh (computed meanwhile), timeout, refused (a 4xx such as too_many_queries), error',
  ['outcome'])

/** One insight the background refresh took up, by what became of it. */
export const countFunnelRefresh = (outcome: RefreshOutcome) => refreshes.inc({ outcome })
