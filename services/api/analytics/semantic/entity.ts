// What an entity of the semantic catalog is: its names and descriptions as the catalog lists them, and the fixed SQL
// behind each. Its own file so the catalog and the entity files that fill it import this, not each other.

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
  /** Its rows are counted in analytics_event_rollups (only tracked events): the planner may read them (./rollup-path.ts). */
  rollups?: true
}

/** The fields of an entity whose rows carry no properties and name nobody: it charts, but no funnel joins it by identity. */
export const NO_PROPERTIES_OR_IDENTITY: Pick<Entity, 'propertiesColumn' | 'properties' | 'identityKinds' | 'identity'> = {
  propertiesColumn: null, properties: null, identityKinds: [], identity: {},
}

/** The fields of an entity whose rows are not events: it is no funnel step. */
export const NOT_EVENTS: Pick<Entity, 'event' | 'rowId'> = { event: null, rowId: null }
