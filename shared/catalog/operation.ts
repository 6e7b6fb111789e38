// The operation catalog's types. Each operation is declared once (id = MCP tool name, method, path, area, schemas,
// handler); REST routes, the OpenAPI document and the MCP tool list are all generated from the same declarations.
import type { Static, TSchema } from 'typebox'

/** The spec's areas (OpenAPI tags). Platform keys are bound to a subset of them. */
export const AREAS = [
  'analytics', 'brain', 'consent', 'content', 'deployment', 'mail', 'observe',
  'organization', 'realtime', 'support', 'tracking', 'users', 'waitlist',
] as const
export type Area = (typeof AREAS)[number]

export const areaTag = (area: Area) => area[0]!.toUpperCase() + area.slice(1)

export type Method = 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE'

/**
 * Who may call an operation:
 * - `none`: no bearer token (sign-up, login);
 * - `principal`: any valid bearer token, session or platform key; no product context;
 * - `product`: a product context: the path's `productId`, else the session's `X-Product-Id`, else the platform key's own
 *   product. A platform key must carry the operation's area.
 */
export type AuthMode = 'none' | 'principal' | 'product'

/**
 * What an operation costs, for the platform API's rate limits (services/api/limits.ts, docs/architecture.md): `read`,
 * `write`, `expensive` (a key pair, DNS lookups, a bucket) and `analytics` (a query against the event store). Each class
 * has its own per-credential and per-organization budget, so a flood of reads cannot spend the budget of writes.
 */
export const RATE_CLASSES = ['read', 'write', 'expensive', 'analytics'] as const
export type RateClass = (typeof RATE_CLASSES)[number]

export type Principal =
  | { kind: 'session'; userId: string; sessionId: string }
  | { kind: 'platform_key'; keyId: string; productId: string; organizationId: string; areas: Area[] }

export interface Context {
  principal: Principal | null
  /** Set for `product` operations; the product every resource read or written must belong to. */
  productId: string | null
  requestId: string
}

type In<S extends TSchema | undefined> = S extends TSchema ? Static<S> : undefined

/**
 * Invariant in every schema, declared rather than measured. P, Q and B are invariant in truth (each is both a schema
 * handed out and the handler's input); R could be covariant, but measuring that means comparing TypeBox's `Static` of
 * two marker types, seconds of type check per program (lists of operations compare them), and no operation is ever
 * widened to another's response type.
 */
export interface Operation<
  in out P extends TSchema | undefined = TSchema | undefined,
  in out Q extends TSchema | undefined = TSchema | undefined,
  in out B extends TSchema | undefined = TSchema | undefined,
  in out R extends TSchema = TSchema,
> {
  /** Operation id and MCP tool name, `<area>_<resource>_<verb>`. */
  id: string
  method: Method
  /** OpenAPI-style path, parameters in braces: `/products/{productId}`. */
  path: string
  area: Area
  summary: string
  description?: string
  auth: AuthMode
  /** Refuse platform keys (403) even when their area matches: a login session only. */
  sessionOnly?: boolean
  /**
   * A login session of an *owner* of the product's organization only (implies sessionOnly): members get 403, platform
   * keys get 403. For credential management, which the spec reserves to "the owner's platform login".
   */
  ownerOnly?: boolean
  /** Rate-limit class; when left out, `read` for GET and `write` for every other method (see rateClassOf). */
  rateClass?: RateClass
  params?: P
  query?: Q
  body?: B
  response: R
  /**
   * Typed from the schemas and never the other way round: NoInfer keeps TypeScript from inferring P, Q, B or R back
   * through TypeBox's `Static` (a conditional type some thirty branches deep), which cost the type check seconds per
   * program and decided nothing, since every schema is given beside its handler.
   */
  handler: NoInfer<(input: { params: In<P>; query: In<Q>; body: In<B> }, ctx: Context) => Promise<Static<R>>>
}

export type AnyOperation = Operation<any, any, any, any>

/** Declares an operation with its handler's input and output typed from its schemas. */
export function defineOperation<
  P extends TSchema | undefined = undefined,
  Q extends TSchema | undefined = undefined,
  B extends TSchema | undefined = undefined,
  R extends TSchema = TSchema,
>(operation: Operation<P, Q, B, R>): Operation<P, Q, B, R> {
  return operation
}

/** The operation's rate-limit class: declared, else read for GET and write otherwise. */
export const rateClassOf = (op: { method: Method; rateClass?: RateClass }): RateClass =>
  op.rateClass ?? (op.method === 'GET' ? 'read' : 'write')

/** `ctx.productId` for operations declared with `auth: 'product'`. */
export function productOf(ctx: Context): string {
  if (!ctx.productId) throw new Error('operation declared without product context')
  return ctx.productId
}

/** The logged-in user of a session principal, or null for a platform key. */
export function userOf(ctx: Context): string | null {
  return ctx.principal?.kind === 'session' ? ctx.principal.userId : null
}

/**
 * Whether a request must carry a body: only when the body schema requires some field. A body whose every field is
 * optional (a PATCH) may be left out, and is then read as `{}`; OpenAPI and the MCP tool list say the same.
 */
export const bodyRequired = (schema: TSchema | undefined): boolean =>
  schema !== undefined && ((schema as { required?: string[] }).required?.length ?? 0) > 0
