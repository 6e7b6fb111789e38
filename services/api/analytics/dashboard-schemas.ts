// Dashboard and tile schemas, exactly the spec's fields and bounds: the tiles of a 12-column grid, two kinds chosen by `type`.
import Type from 'typebox'
import { Strict, Uuid } from '../../../shared/catalog/schemas'

export const SLUG_PATTERN = '^[a-z0-9][a-z0-9-]{1,63}$'
export const MAX_TILES = 40
export const MAX_TAGS = 20

const Layout = Strict({
  x: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }),
  y: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }),
  w: Type.Integer({ minimum: 1, maximum: 12 }),
  h: Type.Integer({ minimum: 1, maximum: 12 }),
}, 'Position on the 12-column grid: all four fields, no others')
const Title = () => Type.Union([Type.String({ maxLength: 120 }), Type.Null()], { description: 'Default null' })

export const InsightTile = Strict({
  id: Type.Optional(Uuid('Assigned when absent')),
  type: Type.Literal('insight'),
  insight_id: Uuid('An insight of the same product'),
  title: Type.Optional(Title()),
  layout: Layout,
}, 'A tile showing one saved insight')
export const TextTile = Strict({
  id: Type.Optional(Uuid('Assigned when absent')),
  type: Type.Literal('text'),
  markdown: Type.String({ maxLength: 4000 }),
  title: Type.Optional(Title()),
  layout: Layout,
}, 'A tile of markdown text')
export const Tile = Type.Union([InsightTile, TextTile])
export const Tiles = Type.Array(Tile, { maxItems: MAX_TILES, description: `At most ${MAX_TILES} tiles; supplying them replaces the whole arrangement` })

export const DashboardName = () => Type.String({ minLength: 1, maxLength: 120 })
export const Tags = () => Type.Array(Type.String({ maxLength: 40 }), { maxItems: MAX_TAGS, description: `At most ${MAX_TAGS} tags of at most 40 characters` })
export const Slug = () => Type.String({ pattern: SLUG_PATTERN, description: 'The address the dashboard is read by; it cannot be changed' })
