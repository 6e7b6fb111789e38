// What the insight builder edits, as plain data, and the API's query shapes made from it (docs/analytics.md, "Metric
// queries" and "Funnels"): the form only holds text, and these functions decide what each text means. The API still
// checks every name against the catalog and answers a 400 naming the field; nothing here second-guesses it.
import type { Funnel, MetricQuery } from '../../../../analytics/semantic/query-schemas'
import type { Range } from './range'

export type { Funnel, MetricQuery }
export type Filter = NonNullable<MetricQuery['filters']>[number]
export type FilterOp = Filter['op']

export const FILTER_OPS: [FilterOp, string][] = [
  ['equals', 'equals'], ['notEquals', 'does not equal'], ['in', 'is one of'], ['contains', 'contains'],
  ['gt', '>'], ['gte', '≥'], ['lt', '<'], ['lte', '≤'], ['set', 'is set'], ['notSet', 'is not set'],
]
export const BUCKETS = ['hour', 'day', 'week', 'month'] as const
/** The API's bounds (query-schemas.ts), so the form offers no more than a query may hold. */
export const LIMITS = { metrics: 10, dimensions: 3, filters: 20, stepFilters: 10, steps: 10, minSteps: 2, windowDays: 90, inValues: 100 } as const

/** A filter as typed: `value` is text; `in` takes a comma-separated list. */
export interface FilterDraft { field: string; op: FilterOp; value: string }

export interface MetricDraft {
  entity: string
  metrics: string[]
  dimensions: string[]
  filters: FilterDraft[]
  bucket: '' | (typeof BUCKETS)[number]
  timezone: string
  range: Range
}

export interface StepDraft { entity: string; event: string; filters: FilterDraft[] }

export interface FunnelDraft {
  steps: StepDraft[]
  identity: string
  windowDays: number
  breakdown: string
  range: Range
}

const NUMERIC: FilterOp[] = ['gt', 'gte', 'lt', 'lte']

/** A filter's value as the API takes it: none for set / notSet, a list for in, a number for comparisons. */
export function filterOf(draft: FilterDraft): Filter {
  const field = draft.field.trim()
  if (draft.op === 'set' || draft.op === 'notSet') return { field, op: draft.op }
  if (draft.op === 'in') return { field, op: 'in', value: draft.value.split(',').map((part) => part.trim()).filter(Boolean) }
  const text = draft.value.trim()
  // A comparison of text that is no number is sent as typed: the API says it never matches rather than the page refusing.
  return { field, op: draft.op, value: NUMERIC.includes(draft.op) && text !== '' && Number.isFinite(Number(text)) ? Number(text) : draft.value }
}

/** A filter as the form shows it. */
export function filterDraftOf(filter: Filter): FilterDraft {
  const value = filter.value === undefined ? '' : Array.isArray(filter.value) ? filter.value.join(', ') : String(filter.value)
  return { field: filter.field, op: filter.op, value }
}

export function metricQueryOf(draft: MetricDraft): MetricQuery {
  const dimensions = draft.dimensions.map((dimension) => dimension.trim()).filter(Boolean)
  return {
    entity: draft.entity,
    metrics: draft.metrics,
    ...(dimensions.length ? { dimensions } : {}),
    range: draft.range,
    ...(draft.bucket ? { bucket: draft.bucket, timezone: draft.timezone.trim() || 'UTC' } : {}),
    ...(draft.filters.length ? { filters: draft.filters.map(filterOf) } : {}),
  }
}

export function funnelOf(draft: FunnelDraft): Funnel {
  const breakdown = draft.breakdown.trim()
  return {
    steps: draft.steps.map((step) => ({
      entity: step.entity, event: step.event.trim(), ...(step.filters.length ? { filters: step.filters.map(filterOf) } : {}),
    })),
    identity: draft.identity as Funnel['identity'],
    windowDays: draft.windowDays,
    range: draft.range,
    ...(breakdown ? { breakdown } : {}),
  }
}

/**
 * A saved metric query as the form edits it. What the form has no control for (`limit`, `exact`) is kept by the
 * caller and sent back unchanged (see keepUnshown).
 */
export function metricDraftOf(query: MetricQuery): MetricDraft {
  return {
    entity: query.entity, metrics: [...query.metrics], dimensions: [...(query.dimensions ?? [])],
    filters: (query.filters ?? []).map(filterDraftOf), bucket: query.bucket ?? '', timezone: query.timezone ?? 'UTC', range: { ...query.range },
  }
}

export function funnelDraftOf(funnel: Funnel): FunnelDraft {
  return {
    steps: funnel.steps.map((step) => ({ entity: step.entity, event: step.event, filters: (step.filters ?? []).map(filterDraftOf) })),
    identity: funnel.identity, windowDays: funnel.windowDays ?? 14, breakdown: funnel.breakdown ?? '', range: { ...funnel.range },
  }
}

/** The fields of a saved query the builder does not show (a metric query's `limit` and `exact`, a funnel's `sample`), kept on save. */
export function keepUnshown<T extends object>(built: T, saved: object | undefined): T {
  if (!saved) return built
  const kept = Object.fromEntries(Object.entries(saved).filter(([key]) => ['limit', 'exact', 'sample'].includes(key)))
  return { ...built, ...kept }
}

/** One line saying what a query is: for the insights list. */
export function summaryOf(kind: 'metric' | 'funnel', query: unknown): string {
  if (kind === 'funnel') {
    const funnel = query as Funnel
    return `${funnel.steps.map((step) => step.event).join(' → ')} · by ${funnel.identity}`
  }
  const metric = query as MetricQuery
  const by = metric.dimensions?.length ? ` by ${metric.dimensions.join(', ')}` : ''
  return `${metric.metrics.join(', ')} of ${metric.entity}${by}${metric.bucket ? ` per ${metric.bucket}` : ''}`
}
