// Token issue: narrow the requested channels and operations by namespace policy and grants, then sign.
import { config } from '../config'
import { unprocessable } from '../errors'
import { namespaceOf, OPS, type Op } from './names'
import { signToken, type TokenChannel } from './tokens'
import { allowedOps } from './grants'
import { productPolicies, type ProductPolicies } from './policies'
import type { TokenIssueBody } from './request-schemas'

/** Why a requested channel or operation is not in the token. */
export type DropReason = 'namespace_not_registered' | 'not_allowed'

export interface Dropped {
  name: string
  /** The requested operations left out. */
  ops: Op[]
  reason: DropReason
}

/**
 * Narrowing (a)(b): a channel whose namespace is not registered is dropped; operations the namespace policy or its grants
 * do not allow are dropped; a channel left with no operation is dropped. A channel named twice gets the union of its ops.
 * Pure; the result keeps the request's channel order and OPS order within a channel.
 */
export function narrow(policies: ProductPolicies, requested: TokenIssueBody['channels']): { granted: TokenChannel[]; dropped: Dropped[] } {
  const merged = new Map<string, Set<Op>>()
  for (const channel of requested) {
    const ops = merged.get(channel.name) ?? new Set<Op>()
    for (const op of channel.ops) ops.add(op)
    merged.set(channel.name, ops)
  }
  const granted: TokenChannel[] = []
  const dropped: Dropped[] = []
  for (const [name, wanted] of merged) {
    const ops = OPS.filter((op) => wanted.has(op))
    const policy = policies.namespaces.get(namespaceOf(name))
    if (!policy) {
      dropped.push({ name, ops, reason: 'namespace_not_registered' })
      continue
    }
    const allowed = new Set(allowedOps(policy, policies.grants, name))
    const kept = ops.filter((op) => allowed.has(op))
    const refused = ops.filter((op) => !allowed.has(op))
    if (refused.length) dropped.push({ name, ops: refused, reason: 'not_allowed' })
    if (kept.length) granted.push({ name, ops: kept })
  }
  return { granted, dropped }
}

export interface IssueResult {
  token: string
  gatewayUrl: string
  /** ISO-8601. */
  expiresAt: string
  /** The identity the token carries (`ext:<subject>`), as shown on presence rosters. */
  subject: string
  /** What the token actually carries, after narrowing. */
  channels: TokenChannel[]
  /** What was asked for but left out, and why. */
  dropped: Dropped[]
}

/** Narrows, then signs; 422 when nothing is left (narrowing (c)). */
export async function issueToken(productId: string, apiKeyId: string, body: TokenIssueBody): Promise<IssueResult> {
  const { granted, dropped } = narrow(await productPolicies(productId), body.channels)
  if (granted.length === 0) {
    throw unprocessable('Every requested channel and operation was removed by namespace policy; the token would grant nothing', [
      ...dropped.map((d) => ({ path: `/body/channels/${body.channels.findIndex((c) => c.name === d.name)}`, message: d.reason === 'namespace_not_registered' ? 'namespace is not registered' : `operations not allowed: ${d.ops.join(', ')}` })),
    ])
  }
  const { token, claims, expiresAt } = await signToken({
    productId, apiKeyId, subject: body.subject, channels: granted, ttlSeconds: body.ttlSeconds, // signToken defaults it
  })
  return { token, gatewayUrl: config.gatewayUrl, expiresAt: expiresAt.toISOString(), subject: claims.sub, channels: granted, dropped }
}
