// Realtime grants: which operations delegated tokens may carry on which channels of a namespace.
//
// What a grant governs: a namespace with no grants lets delegated tokens carry every operation its policy allows on any
// of its channels; once a namespace has at least one grant, a token may carry an operation on a channel of that
// namespace only if some grant of the namespace matches the channel (`*` = exactly one segment, equal segment count)
// and lists that operation. Grants narrow what end users can be delegated; they never widen the namespace policy, and
// they do not restrict the backend's own API-key calls.
import { sql } from '../../../shared/db/client'
import { conflict, notFound, unprocessable } from '../../../shared/errors'
import { grantMatches, OPS, type Op } from '../../../shared/realtime/names'
import { announce, isUniqueViolation, type NamespacePolicy } from './namespaces'

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

/**
 * The operations a delegated token may carry on `channel`: those the namespace policy allows (subscribe always;
 * presence only with presence on; publish only with client events on; history only when history is retained),
 * further narrowed by the namespace's grants when it has any (see the top of this module).
 *
 * Pure: `grants` may be the namespace's grants or all of the product's; grants of other namespaces are ignored.
 * The result is in OPS order. Example: policy {presence: false, clientEvents: true, history: null} with no grants
 * gives ['subscribe', 'publish'] on any channel of the namespace.
 */
export function allowedOps(
  policy: Pick<NamespacePolicy, 'presence' | 'clientEvents' | 'history'>,
  grants: readonly { pattern: string; ops: readonly Op[] }[],
  channel: string,
): Op[] {
  if (!channel.includes(':')) return [] // not a channel name: no namespace segment
  const byPolicy = OPS.filter((op) =>
    op === 'subscribe' ? true
      : op === 'presence' ? policy.presence
        : op === 'publish' ? policy.clientEvents
          : policy.history !== null && policy.history.ttlSeconds > 0 && policy.history.size > 0)
  const namespace = firstSegment(channel)
  const own = grants.filter((grant) => firstSegment(grant.pattern) === namespace)
  if (own.length === 0) return byPolicy
  const granted = new Set(own.filter((grant) => grantMatches(grant.pattern, channel)).flatMap((grant) => grant.ops))
  return byPolicy.filter((op) => granted.has(op))
}

const grantFields = (row: Record<string, any>): Grant => ({
  id: row.id, pattern: row.pattern, namespace: firstSegment(row.pattern), ops: row.ops, createdAt: row.created_at,
})

const normalizeOps = (ops: readonly Op[]) => OPS.filter((op) => ops.includes(op))

/** Adds a grant to the namespace named by the pattern's first segment, which must be registered in the product. */
export async function createGrant(productId: string, input: { pattern: string; ops: Op[] }): Promise<Grant> {
  const namespace = firstSegment(input.pattern)
  let row
  try {
    // One statement: the namespace lookup and the insert cannot be split by a concurrent namespace delete.
    ;[row] = await sql`
      insert into realtime_grants (product_id, namespace_id, pattern, ops)
      select ${productId}, id, ${input.pattern}, ${normalizeOps(input.ops)} from realtime_namespaces
      where product_id = ${productId} and name = ${namespace}
      returning id, pattern, ops, created_at`
  } catch (error) {
    if (isUniqueViolation(error)) {
      throw conflict(`A grant with pattern "${input.pattern}" already exists`, [{ path: '/body/pattern', message: 'already exists' }])
    }
    throw error
  }
  if (!row) {
    throw unprocessable(`Namespace "${namespace}" is not registered in this product`, [
      { path: '/body/pattern', message: `names namespace "${namespace}", which is not registered` },
    ])
  }
  await announce({ kind: 'namespaces', productId })
  return grantFields(row)
}

/** The product's grants, optionally of one namespace only, by pattern. */
export async function listGrants(productId: string, namespace?: string): Promise<Grant[]> {
  const rows = await sql`
    select g.id, g.pattern, g.ops, g.created_at from realtime_grants g
    join realtime_namespaces n on n.id = g.namespace_id
    where g.product_id = ${productId} ${namespace === undefined ? sql`` : sql`and n.name = ${namespace}`}
    order by g.pattern collate "C"`
  return rows.map(grantFields)
}

export async function deleteGrant(productId: string, grantId: string): Promise<void> {
  const [row] = await sql`delete from realtime_grants where id = ${grantId} and product_id = ${productId} returning id`
  if (!row) throw notFound('Grant')
  await announce({ kind: 'namespaces', productId })
}
