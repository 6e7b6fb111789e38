// Schema pieces several areas share.
import Type from 'typebox'
import { AREAS, type Area } from './operation'

export const Uuid = (description?: string) => Type.String({ format: 'uuid', ...(description ? { description } : {}) })
export const Timestamp = (description?: string) => Type.String({ format: 'date-time', ...(description ? { description } : {}) })
export const AreaName = Type.Unsafe<Area>(Type.Union(AREAS.map((a) => Type.Literal(a))))

/** Strict object: unknown fields are a 400 naming them. */
export const Strict = <T extends Parameters<typeof Type.Object>[0]>(properties: T, description?: string) =>
  Type.Object(properties, { additionalProperties: false, ...(description ? { description } : {}) })

export const ProductPath = Strict({ productId: Uuid('Product id') })

export const iso = (date: Date | string) => (date instanceof Date ? date : new Date(date)).toISOString()
