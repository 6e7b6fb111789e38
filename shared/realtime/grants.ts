// What delegated tokens may carry on a channel: the namespace policy, narrowed by the namespace's grants.
//
// What a grant governs: a namespace with no grants lets delegated tokens carry every operation its policy allows on any
// of its channels; once a namespace has at least one grant, a token may carry an operation on a channel of that
// namespace only if some grant of the namespace matches the channel (`*` = exactly one segment, equal segment count)
// and lists that operation. Grants narrow what end users can be delegated; they never widen the namespace policy, and
// they do not restrict the backend's own API-key calls.
import { grantMatches, OPS, type Op } from './names'

/** The parts of a namespace policy that decide which operations can be delegated. */
export interface DelegationPolicy {
  presence: boolean
  clientEvents: boolean
  history: { ttlSeconds: number; size: number } | null
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
  policy: DelegationPolicy,
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

