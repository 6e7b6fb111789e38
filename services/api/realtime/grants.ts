// Realtime grants, stored per product (management side). What a grant governs, and the pure check applied at token
// issue, live in shared/realtime/grants.ts.
import { type PageRequest, PAGE_DEFAULT } from '../../../shared/catalog/pagination'
import { insertUnderCeiling } from '../../../shared/db/ceiling'
import { sql } from '../../../shared/db/client'
import { keysetPage } from '../../../shared/db/keyset'
import { conflict, notFound, unprocessable } from '../../../shared/errors'
import { OPS, type Op } from '../../../shared/realtime/names'
import { publishInvalidation } from '../../../shared/cache/invalidation'
import { isPgError } from '../../../shared/db/error-codes'

export interface Grant {
  id: string
  /** `namespace:segment[:segment...]`, a segment being concrete or `*` (exactly one segment). */
  pattern: string
  /** The pattern's first segment: the namespace the grant belongs to. */
  namespace: string
  /** In OPS order, no duplicates. */
  ops: Op[]
  createdAt: Date
}

/** The namespace a channel name or grant pattern belongs to: its first segment. */
const firstSegment = (name: string) => name.split(':', 1)[0]!

const grantFields = (row: Record<string, any>): Grant => ({
  id: row.id, pattern: row.pattern, namespace: firstSegment(row.pattern), ops: row.ops, createdAt: row.created_at,
})

const normalizeOps = (ops: readonly Op[]) => OPS.filter((op) => ops.includes(op))

/** Adds a grant to the namespace named by the pattern's first segment, which must be registered in the product. */
export async function createGrant(productId: string, input: { pattern: string; ops: Op[] }): Promise<Grant> {
  const namespace = firstSegment(input.pattern)
  let row
  const count = (q: typeof sql) => q<{ n: number }[]>`select count(*)::int as n from realtime_grants where product_id = ${productId}`
  try {
    // One statement: the namespace lookup and the insert cannot be split by a concurrent namespace delete.
    ;[row] = await insertUnderCeiling(productId, 'grants', count, (tx) => tx`
      insert into realtime_grants (product_id, namespace_id, pattern, ops)
      select ${productId}, id, ${input.pattern}, ${normalizeOps(input.ops)} from realtime_namespaces
      where product_id = ${productId} and name = ${namespace}
      returning id, pattern, ops, created_at`)
  } catch (error) {
    if (isPgError(error, 'uniqueViolation')) {
      throw conflict(`A grant with pattern "${input.pattern}" already exists`, [{ path: '/body/pattern', message: 'already exists' }])
    }
    throw error
  }
  if (!row) {
    throw unprocessable(`Namespace "${namespace}" is not registered in this product`, [
      { path: '/body/pattern', message: `names namespace "${namespace}", which is not registered` },
    ])
  }
  await publishInvalidation({ kind: 'namespaces', productId })
  return grantFields(row)
}

/** The product's grants, optionally of one namespace only, by pattern. */
export async function listGrants(productId: string, namespace?: string, page: PageRequest = { limit: PAGE_DEFAULT }): Promise<Grant[]> {
  const rows = await keysetPage({
    what: 'grant', order: { key: ['g.pattern collate "C"', 'g.id'], descending: false },
    cursor: (after) => sql`from realtime_grants g where g.id = ${after} and g.product_id = ${productId}`,
    rows: sql`
      select g.id, g.pattern, g.ops, g.created_at from realtime_grants g
      join realtime_namespaces n on n.id = g.namespace_id
      where g.product_id = ${productId} ${namespace === undefined ? sql`` : sql`and n.name = ${namespace}`}`,
  }, page)
  return rows.map(grantFields)
}

export async function deleteGrant(productId: string, grantId: string): Promise<void> {
  const [row] = await sql`delete from realtime_grants where id = ${grantId} and product_id = ${productId} returning id`
  if (!row) throw notFound('Grant')
  await publishInvalidation({ kind: 'namespaces', productId })
}
