// The shapes of a metric query and a funnel, as requests and as saved insights. Names are checked against the catalog
// by the planners (./metric-query.ts, ./funnel.ts), not here.
import Type, { type Static } from 'typebox'
import { Strict } from '../../../../shared/catalog/schemas'
import { IDENTITY_KINDS } from './entity'

export const FILTER_OPS = ['equals', 'notEquals', 'in', 'contains', 'gt', 'gte', 'lt', 'lte', 'set', 'notSet'] as const
export const BUCKETS = ['hour', 'day', 'week', 'month'] as const
export type Bucket = (typeof BUCKETS)[number]

// 211: `properties.` and a property key of up to 200 characters, as capture takes them.
const Name = (description: string) => Type.String({ minLength: 1, maxLength: 211, description })
const Scalar = Type.Union([Type.String({ maxLength: 1000 }), Type.Number(), Type.Boolean()])

export const Filter = Strict({
  field: Name('A dimension of the entity, or properties.<key> for a property'),
  op: Type.Unsafe<(typeof FILTER_OPS)[number]>(Type.Union(FILTER_OPS.map((o) => Type.Literal(o)))),
  value: Type.Optional(Type.Union([Scalar, Type.Array(Scalar, { minItems: 1, maxItems: 100 })], {
    description: 'Required except for set / notSet; an array for in',
  })),
})
export type Filter = Static<typeof Filter>

export const Range = Strict({
  from: Type.String({ minLength: 2, maxLength: 40, description: 'An ISO-8601 time, or relative to now: -24h, -7d, -4w, -3m (months)' }),
  to: Type.Optional(Type.String({ minLength: 2, maxLength: 40, description: 'The same forms, or now (the default)' })),
}, 'The time range: from (inclusive) to (exclusive)')
export type Range = Static<typeof Range>

export const MetricQuery = Strict({
  entity: Name('An entity of the catalog'),
  metrics: Type.Array(Name('A metric of the entity'), { minItems: 1, maxItems: 10 }),
  dimensions: Type.Optional(Type.Array(Name('A dimension of the entity, or properties.<key>'), { maxItems: 3 })),
  range: Range,
  bucket: Type.Optional(Type.Unsafe<(typeof BUCKETS)[number]>(Type.Union(BUCKETS.map((b) => Type.Literal(b)), { description: 'Group by time; empty buckets answer 0' }))),
  timezone: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'IANA time zone the buckets are cut in (default UTC)' })),
  filters: Type.Optional(Type.Array(Filter, { maxItems: 20 })),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000, description: 'Most rows answered (default 10 000)' })),
  exact: Type.Optional(Type.Boolean({
    description: 'Count distinct identities exactly from raw events (slower over long ranges). Default false: they may come '
      + 'from rollup sketches, within about 2 %, and the answer then says approximate: true',
  })),
})
export type MetricQuery = Static<typeof MetricQuery>

export const FunnelStep = Strict({
  entity: Name('An entity with events'),
  event: Type.String({ minLength: 1, maxLength: 200, description: 'The event that makes this step' }),
  filters: Type.Optional(Type.Array(Filter, { maxItems: 10 })),
})

export const Funnel = Strict({
  steps: Type.Array(FunnelStep, { minItems: 2, maxItems: 10 }),
  identity: Type.Unsafe<(typeof IDENTITY_KINDS)[number]>(Type.Union(IDENTITY_KINDS.map((k) => Type.Literal(k)), { description: 'Whose steps are joined: one identity kind' })),
  windowDays: Type.Optional(Type.Integer({ minimum: 1, maximum: 90, description: 'Conversion window from the first step, in days (default 14)' })),
  range: Range,
  breakdown: Type.Optional(Name('A dimension of the first step\'s entity, or properties.<key>: one funnel per value')),
  sample: Type.Optional(Type.Number({
    exclusiveMinimum: 0, maximum: 1,
    description: 'Count only this share of identities (the same ones every run: chosen by a hash of the identity, in steps of '
      + '1/1024) and scale the counts up: faster over many identities, and the answer says sampled. Default 1: exact',
  })),
})
export type Funnel = Static<typeof Funnel>
