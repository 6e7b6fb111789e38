// The semantic catalog: the chartable entities of a product, each declared once by the area that owns its data
// (shared/analytics/entities/*.ts), with the SQL behind every name. Queries are built from these fixed SQL pieces only;
// names from a request are looked up here and never reach SQL themselves.
import { eventsEntities } from './entities/tracking'
import { mailEntities } from './entities/mail'
import { realtimeEntities } from './entities/realtime'

export const IDENTITY_KINDS = ['email', 'phone', 'users_id', 'anonymous_id'] as const
export type IdentityKind = (typeof IDENTITY_KINDS)[number]
export const METRIC_TYPES = ['count', 'sum', 'avg', 'ratio'] as const
export type MetricType = (typeof METRIC_TYPES)[number]

export interface Dimension {
  name: string
  description: string
  /** SQL over the entity's rows (alias `s`). */
  sql: string
}

export interface Metric {
  name: string
  type: MetricType
  description: string
  /**
   * SQL aggregate over the rows (alias `s`). For `ratio`: `numerator` and `denominator`, both counts, divided in the
   * query (null where the denominator is 0).
   */
  sql?: string
  numerator?: string
  denominator?: string
}

export interface Entity {
  entity: string
  extensionSlug: string
  entityName: string
  description: string
  timeColumn: string | null
  propertiesColumn: string | null
  dimensions: Dimension[]
  metrics: Metric[]
  identityKinds: IdentityKind[]
  /** A FROM item giving the rows, aliased `s`, with a `product_id` column. */
  source: string
  /** SQL of the time column (a timestamptz), or null when the entity has none. */
  time: string | null
  /** SQL of the properties column (jsonb), or null. */
  properties: string | null
  /** SQL of each identity kind, for funnels. */
  identity: Partial<Record<IdentityKind, string>>
  /** SQL naming the event of a row, for funnel steps; null when the entity has no events. */
  event: string | null
  /** SQL of a unique key of a row, ordering rows of equal time (a funnel step that repeats the step before); null without events. */
  rowId: string | null
}

export const ENTITIES: readonly Entity[] = [...eventsEntities, ...mailEntities, ...realtimeEntities]
const byName = new Map(ENTITIES.map((e) => [e.entity, e]))

export const entityNamed = (name: string): Entity | undefined => byName.get(name)

/**
 * The product's usage cycle: the calendar month (UTC) that contains `now`. Every product has the same cycle today; the
 * catalog answers it so a dashboard can chart "this cycle" without knowing the rule.
 */
export function currentCycle(now = new Date()): { from: string; to: string } {
  const from = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1))
  const to = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1))
  return { from: from.toISOString(), to: to.toISOString() }
}

/** The catalog object exactly as the spec lists its fields (no SQL leaves this module). */
export function catalogOf(productId: string, now = new Date()) {
  return {
    product_id: productId,
    generated_at: now.toISOString(),
    cycle: currentCycle(now),
    entities: ENTITIES.map((e) => ({
      entity: e.entity, extensionSlug: e.extensionSlug, entityName: e.entityName, description: e.description,
      timeColumn: e.timeColumn, propertiesColumn: e.propertiesColumn,
      dimensions: e.dimensions.map(({ name, description }) => ({ name, description })),
      metrics: e.metrics.map(({ name, type, description }) => ({ name, type, description })),
      identityKinds: [...e.identityKinds],
    })),
  }
}
