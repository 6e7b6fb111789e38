// Ordered funnels: the identities that did step 1 in the range, and of those, who did each next step after the one
// before, within the window from their first step. One LATERAL subquery per step, each an index range scan on
// (product, identity, event, time) (migration 0006).
import type { Entity } from './entity'
import { filterSql, invalid, Params, parseRange, resolveEntity, resolveField, runQuery } from './plan'
import type { Funnel } from './query-schemas'

export interface FunnelStepResult {
  step: number
  entity: string
  event: string
  count: number
  /** Of those who reached the previous step (null for the first, or when nobody reached the previous one). */
  conversionFromPrevious: number | null
  conversionFromFirst: number | null
}

export interface FunnelResult {
  identity: string
  windowDays: number
  range: { from: string; to: string }
  steps: FunnelStepResult[]
  /** With `breakdown`: the funnel per value of that dimension on the first step (at most 50 values, largest first). */
  breakdown?: { value: string | null; steps: FunnelStepResult[] }[]
  /** The share of identities counted when a sample was asked for (counts scaled up from it); null when exact. */
  sampled: number | null
  /** Every write acknowledged before this instant is counted; later ones may not be (docs/analytics.md, "Reads on a replica"). */
  as_of: string
}

const DEFAULT_WINDOW_DAYS = 14
/** A sample is a number of these parts of the identities' hash space. */
const SAMPLE_PARTS = 1024
const MAX_BREAKDOWN_VALUES = 50

function stepEntity(funnel: Funnel, i: number, path: string): Entity {
  const entity = resolveEntity(funnel.steps[i]!.entity, `${path}/steps/${i}/entity`)
  if (!entity.event || !entity.time) throw invalid(`${path}/steps/${i}/entity`, `has no events to make a funnel step of`)
  if (!entity.identity[funnel.identity]) throw invalid(`${path}/identity`, `is not an identity kind of ${entity.entity} (step ${i + 1}); it has ${entity.identityKinds.join(', ') || 'none'}`)
  return entity
}

/** Checks every name against the catalog, and the range (a relative one against now), without running anything. */
export function checkFunnel(funnel: Funnel, path = '/body', now = new Date()): void {
  parseRange(funnel.range, `${path}/range`, now)
  const params = new Params()
  funnel.steps.forEach((step, i) => {
    const entity = stepEntity(funnel, i, path)
    step.filters?.forEach((f, k) => filterSql(entity, f, `${path}/steps/${i}/filters/${k}`, params))
  })
  if (funnel.breakdown) resolveField(stepEntity(funnel, 0, path), funnel.breakdown, `${path}/breakdown`, params)
}

const ratio = (a: number, b: number | undefined) => (b === undefined || b === 0 ? null : a / b)

function stepsOf(funnel: Funnel, counts: number[]): FunnelStepResult[] {
  return counts.map((count, i) => ({
    step: i + 1, entity: funnel.steps[i]!.entity, event: funnel.steps[i]!.event, count,
    conversionFromPrevious: i === 0 ? null : ratio(count, counts[i - 1]),
    conversionFromFirst: i === 0 ? null : ratio(count, counts[0]),
  }))
}

/** A funnel as SQL: text with `$n` placeholders and their values, and what the answer says besides its counts. */
export interface FunnelPlan {
  text: string
  params: Params
  windowDays: number
  range: { from: string; to: string }
  /** The rows are one per breakdown value (at most MAX_BREAKDOWN_VALUES, largest first), else one row. */
  breakdown: boolean
  /** Parts of SAMPLE_PARTS counted: SAMPLE_PARTS when exact. */
  parts: number
}

/** Resolves and checks every name and the range, and builds the SQL (no database needed); a failure is a 400 naming the field. */
export function planFunnel(productId: string, funnel: Funnel, path = '/body', now = new Date()): FunnelPlan {
  const entities = funnel.steps.map((_, i) => stepEntity(funnel, i, path))
  const { from, to } = parseRange(funnel.range, `${path}/range`, now)
  const windowDays = funnel.windowDays ?? DEFAULT_WINDOW_DAYS
  const params = new Params()
  const product = params.add(productId)
  const window = `(${params.add(windowDays)}::int * interval '1 day')`
  const condition = (i: number) => {
    const step = funnel.steps[i]!
    const entity = entities[i]!
    return [
      `s.product_id = ${product}`, `${entity.event} = ${params.add(step.event)}`,
      ...(step.filters ?? []).map((f, k) => filterSql(entity, f, `${path}/steps/${i}/filters/${k}`, params)),
    ].join(' and ')
  }
  const first = entities[0]!
  const who = first.identity[funnel.identity]!
  const breakdown = funnel.breakdown ? resolveField(first, funnel.breakdown, `${path}/breakdown`, params) : null
  // A step that repeats the step before (same entity and event) must be a later row than the one that step matched,
  // never the same row again; rows of equal time are told apart by their key. So that step also answers its row's key.
  const repeats = (i: number) => i > 0 && entities[i]!.rowId !== null && entities[i] === entities[i - 1] && funnel.steps[i]!.event === funnel.steps[i - 1]!.event
  const answersRow = (i: number) => i + 1 < entities.length && repeats(i + 1)
  // A sample keeps the identities whose hash falls in the first `parts` of SAMPLE_PARTS: the same ones every run, so
  // a sampled funnel does not move from one run to the next by chance.
  const parts = funnel.sample === undefined ? SAMPLE_PARTS : Math.min(SAMPLE_PARTS, Math.max(1, Math.round(funnel.sample * SAMPLE_PARTS)))
  const sample = parts < SAMPLE_PARTS ? ` and (hashtext(${who}) & ${SAMPLE_PARTS - 1}) < ${params.add(parts)}` : ''
  // Step 1: each identity's first occurrence in the range (and, with a breakdown, that occurrence's value).
  const firstOrder = `${first.time}${answersRow(0) ? `, ${first.rowId}` : ''}`
  const firstStep = `select ${who} as who, min(${first.time}) as t1${breakdown ? `, (array_agg(${breakdown} order by ${firstOrder}))[1] as value` : ''}
      ${answersRow(0) ? `, (array_agg(${first.rowId} order by ${firstOrder}))[1] as r1` : ''}
    from ${first.source} where ${condition(0)} and ${who} is not null${sample}
      and ${first.time} >= ${params.add(from.toISOString())}::timestamptz and ${first.time} < ${params.add(to.toISOString())}::timestamptz
    group by ${who}`
  // Each later step: the first such event at or after the previous step, and within the window from step 1. The
  // constant bounds (from, to + window) say nothing new, but let PostgreSQL drop, when planning, the month partitions
  // no step can reach: otherwise every lookup of every identity would walk all of them to prune them at run time.
  const stepsFrom = params.add(from.toISOString())
  const stepsTo = params.add(to.toISOString())
  const laterals = entities.slice(1).map((entity, k) => {
    const i = k + 1
    const [previous, previousRow] = i === 1 ? ['f.t1', 'f.r1'] : [`l${i - 1}.t`, `l${i - 1}.r`]
    const where = `${condition(i)} and ${entity.identity[funnel.identity]} = f.who
        and ${entity.time} >= ${stepsFrom}::timestamptz and ${entity.time} <= ${stepsTo}::timestamptz + ${window}
        and ${entity.time} >= ${previous} and ${entity.time} <= f.t1 + ${window}
        ${repeats(i) ? `and (${entity.time}, ${entity.rowId}) > (${previous}, ${previousRow})` : ''}`
    const pick = answersRow(i)
      ? `select ${entity.time} as t, ${entity.rowId} as r from ${entity.source} where ${where} order by ${entity.time}, ${entity.rowId} limit 1`
      : `select min(${entity.time}) as t from ${entity.source} where ${where}`
    return `left join lateral (${pick}) l${i} on true`
  })
  const counts = ['count(*)::float8 as c0', ...entities.slice(1).map((_, k) => `count(l${k + 1}.t)::float8 as c${k + 1}`)]
  const text = `with f as (${firstStep})
    select ${breakdown ? 'f.value, ' : ''}${counts.join(', ')} from f ${laterals.join(' ')}
    ${breakdown ? `group by f.value order by c0 desc, f.value limit ${MAX_BREAKDOWN_VALUES}` : ''}`
  return { text, params, windowDays, range: { from: from.toISOString(), to: to.toISOString() }, breakdown: breakdown !== null, parts }
}

export async function runFunnel(productId: string, funnel: Funnel, path = '/body', now = new Date()): Promise<FunnelResult> {
  const { text, params, windowDays, range, breakdown, parts } = planFunnel(productId, funnel, path, now)
  const rows = await runQuery(productId, text, params, `${path}/range`)
  const steps = funnel.steps
  // A sample's counts scaled up to the whole (rounded), and its conversions computed from them.
  const scale = (count: number) => (parts === SAMPLE_PARTS ? count : Math.round((count * SAMPLE_PARTS) / parts))
  const countsOf = (row: Record<string, unknown>) => steps.map((_, i) => scale(Number(row[`c${i}`] ?? 0)))
  const result: FunnelResult = {
    identity: funnel.identity, windowDays, range, steps: [], sampled: parts === SAMPLE_PARTS ? null : parts / SAMPLE_PARTS, as_of: rows.asOf.toISOString(),
  }
  if (!breakdown) {
    result.steps = stepsOf(funnel, rows[0] ? countsOf(rows[0]) : steps.map(() => 0))
    return result
  }
  // Each identity has one breakdown value, so the overall funnel is the sum of the groups (over the values answered).
  result.breakdown = rows.map((row) => ({ value: (row.value as string | null) ?? null, steps: stepsOf(funnel, countsOf(row)) }))
  const totals = steps.map((_, i) => rows.reduce((sum, row) => sum + Number(row[`c${i}`] ?? 0), 0))
  result.steps = stepsOf(funnel, totals)
  return result
}
