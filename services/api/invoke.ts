// The one entry point for running an operation, used by REST routes and MCP tool calls alike: authenticate, count the
// request against its credential's budget, refuse what the credential can never call (authorize.ts), validate, resolve
// the product and the caller's access to it, count it against the organization's budget, then run the handler.
import { rateClassOf, type AnyOperation, type Context, type Principal } from '../../shared/catalog/operation'
import { validateInput } from '../../shared/catalog/validate'
import { config } from '../../shared/config'
import { badRequest, forbidden, notFound } from '../../shared/errors'
import { hitWindow, tooMany } from '../../shared/fixed-window'
import { isUuid } from '../../shared/ids'
import { authenticate } from './accounts/authenticate'
import { refusal } from './authorize'
import { timedQuery } from './analytics/prometheus'
import { isMember, productAccess } from './accounts/products'
import { limitCredential, limitOrganization, withOrganizationSlot } from './limits'

export interface RawInput {
  params?: Record<string, unknown>
  query?: Record<string, unknown>
  body?: unknown
}

export interface CallerHeaders {
  authorization: string | null
  /** `X-Product-Id`: the product a login session acts on. */
  productId: string | null
  requestId: string
  /** The client's address (shared/http/serve.ts clientIp): unauthenticated operations are rate limited by it. */
  clientIp: string
}

export async function invoke(op: AnyOperation, raw: RawInput, caller: CallerHeaders): Promise<unknown> {
  if (op.auth === 'none') await limitAnonymous(caller.clientIp)
  const principal = op.auth === 'none' ? null : await authenticate(caller.authorization)
  // Every authenticated request counts, a refused or invalid one too: each costs at least the token lookup.
  if (principal) await limitCredential(op, principal)
  // Before the input is read: a credential that can never call the operation learns that first, whatever it sent.
  const refused = principal && refusal(op, principal)
  if (refused) throw refused
  const input = validateInput(op, raw)
  canonicalUuids(op, input.params as Record<string, unknown> | undefined)
  const header = caller.productId?.toLowerCase() ?? null
  const product = op.auth === 'product' ? await resolveProduct(op, principal!, input.params, header) : null
  const organizationId = product?.organizationId ?? (principal ? await organizationNamed(principal, input.params) : null)
  if (organizationId) await limitOrganization(op, organizationId)
  const ctx: Context = { principal, productId: product?.productId ?? null, requestId: caller.requestId }
  if (organizationId && product && rateClassOf(op) === 'analytics') {
    return withOrganizationSlot(organizationId, () => timedQuery(op.id, async () => op.handler(input as never, ctx)))
  }
  return op.handler(input as never, ctx)
}

/**
 * The organization a non-product operation acts on (members of `/organizations/{organizationId}`), when the session
 * belongs to it; other operations outside a product (products, organizations, auth) count per credential only.
 */
async function organizationNamed(principal: Principal, params: unknown): Promise<string | null> {
  const named = (params as { organizationId?: string } | undefined)?.organizationId
  if (!named || principal.kind !== 'session') return null
  return (await isMember(principal.userId, named)) ? named : null
}

/** Sign-up and login hash a password with argon2id each time: per-IP fixed windows bound guessing and CPU alike. */
async function limitAnonymous(ip: string): Promise<void> {
  const { count, retryAfter } = await hitWindow(`auth:rl:ip:${ip}`, 60, 'sign-in rate limit')
  const limit = config.authRequestsPerMinute
  if (count > limit) throw tooMany('rate_limited', `More than ${limit} sign-ups or logins per minute from this address`, retryAfter, { limit })
}

/**
 * UUIDs are case-insensitive; ids in caches, invalidation messages and comparisons are lower-case. Canonicalized once
 * here, so `X-Product-Id: <UPPER>` and `/products/<UPPER>` reach the same product and the same cache entries.
 */
function canonicalUuids(op: AnyOperation, params: Record<string, unknown> | undefined): void {
  const properties = ((op.params as { properties?: Record<string, { format?: string }> } | undefined)?.properties) ?? {}
  for (const [name, schema] of Object.entries(properties)) {
    if (schema.format === 'uuid' && typeof params?.[name] === 'string') params[name] = (params[name] as string).toLowerCase()
  }
}

async function resolveProduct(
  op: AnyOperation, principal: Principal, params: unknown, header: string | null,
): Promise<{ productId: string; organizationId: string }> {
  const fromPath = (params as { productId?: string } | undefined)?.productId
  if (principal.kind === 'platform_key') {
    const requested = fromPath ?? header
    // Another product's resources are invisible, not forbidden.
    if (requested && requested !== principal.productId) throw notFound('Product')
    return { productId: principal.productId, organizationId: principal.organizationId }
  }
  const requested = fromPath ?? header
  if (!requested) {
    throw badRequest('A login session must name its product in the X-Product-Id header', [
      { path: '/header/X-Product-Id', message: 'is required' },
    ])
  }
  if (!isUuid(requested)) {
    throw badRequest('X-Product-Id must be a uuid', [{ path: '/header/X-Product-Id', message: 'must match format "uuid"' }])
  }
  const access = await productAccess(principal.userId, requested)
  if (!access) throw notFound('Product')
  if (op.ownerOnly && access.role !== 'owner') throw forbidden(`${op.id} needs an owner of the product's organization`)
  return { productId: requested, organizationId: access.organizationId }
}
