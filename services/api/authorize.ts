// What a credential may call, decided from the operation's declaration alone (no input, no database): REST refuses with
// it before reading the input, and MCP lists only the tools it lets through, so the two can never disagree.
import { areaTag, type AnyOperation, type Principal } from '../../shared/catalog/operation'
import { type ApiError, forbidden } from '../../shared/errors'

/**
 * Why this principal can never call the operation, whatever the input: a platform key on a session-only or owner-only
 * operation, or on a product operation of an area it does not carry. Null when the declaration allows the call; the
 * product named, membership and the owner's role are checked per request (services/api/invoke.ts).
 */
export function refusal(op: AnyOperation, principal: Principal): ApiError | null {
  if (principal.kind !== 'platform_key') return null
  if (op.sessionOnly || op.ownerOnly) {
    return forbidden(`${op.id} needs ${op.ownerOnly ? "the owner's" : 'a'} platform login; platform API keys cannot call it`)
  }
  if (op.auth === 'product' && !principal.areas.includes(op.area)) {
    return forbidden(`This platform key does not carry the ${areaTag(op.area)} area`)
  }
  return null
}
