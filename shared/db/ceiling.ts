// Ceilings on how many items of each kind a product holds, and products an organization holds (config.ceilings),
// checked in the insert's own transaction under a lock on the owner's row, so concurrent creates cannot pass together.
import type postgres from 'postgres'
import { config, type Config } from '../config'
import { ApiError } from '../errors'
import { tooMany } from '../fixed-window'
import { sql } from './client'

export type Ceiling = keyof Config['ceilings']
type Tx = postgres.TransactionSql

/** What each ceiling counts, and the variable that sets it (named in the 409, so an operator knows what to raise). */
export const CEILINGS: Record<Ceiling, { what: string; variable: string; owner?: 'organization' }> = {
  mailDomains: { what: 'sending domains', variable: 'PRODUCT_MAX_MAIL_DOMAINS' },
  mailTemplates: { what: 'email templates', variable: 'PRODUCT_MAX_MAIL_TEMPLATES' },
  mailKeys: { what: 'active sending API keys', variable: 'PRODUCT_MAX_MAIL_KEYS' },
  publicKeys: { what: 'active Realtime API keys', variable: 'PRODUCT_MAX_PUBLIC_KEYS' },
  captureKeys: { what: 'active publishable capture keys', variable: 'PRODUCT_MAX_CAPTURE_KEYS' },
  platformKeys: { what: 'active platform API keys', variable: 'PRODUCT_MAX_PLATFORM_KEYS' },
  namespaces: { what: 'namespaces', variable: 'PRODUCT_MAX_NAMESPACES' },
  grants: { what: 'grants', variable: 'PRODUCT_MAX_GRANTS' },
  dashboards: { what: 'dashboards', variable: 'PRODUCT_MAX_DASHBOARDS' },
  insights: { what: 'insights', variable: 'PRODUCT_MAX_INSIGHTS' },
  webhookEndpoints: { what: 'webhook endpoints in this area', variable: 'PRODUCT_MAX_WEBHOOK_ENDPOINTS' },
  organizationProducts: { what: 'products', variable: 'ORGANIZATION_MAX_PRODUCTS', owner: 'organization' },
}

/** 409 limit_reached: the product (or organization) already holds its ceiling of this kind; deleting one makes room. */
export const limitReached = (ceiling: Ceiling, limit: number) =>
  new ApiError('limit_reached',
    `This ${CEILINGS[ceiling].owner ?? 'product'} already has ${limit} ${CEILINGS[ceiling].what}, the most it may hold`
      + (CEILINGS[ceiling].owner ? '' : '; delete one to make room'),
    { resource: ceiling, limit })

/** Counts rows of the kind: a fragment `select count(*)::int as n from ... where product_id = ...`. */
export type Counter = (q: postgres.Sql) => Promise<readonly { n: number }[]>

/** Refuses (409) when `count`, run on `q`, says the owner already holds the ceiling's limit. */
async function refuseAtCeiling(q: postgres.Sql, ceiling: Ceiling, count: Counter): Promise<void> {
  const limit = config.ceilings[ceiling]
  const [row] = await count(q)
  if ((row?.n ?? 0) >= limit) throw limitReached(ceiling, limit)
}

// A transaction runs tagged templates as the pool does.
const asSql = (tx: Tx) => tx as unknown as postgres.Sql

/**
 * Inside the insert's transaction: locks the product row, then counts. `for no key update` serializes creates of one
 * product against each other but not against inserts elsewhere that only hold the product as a foreign key (key
 * share), such as captured events and queued emails.
 */
export async function checkCeiling(tx: Tx, productId: string, ceiling: Ceiling, count: Counter): Promise<void> {
  await tx`select 1 from products where id = ${productId} for no key update`
  await refuseAtCeiling(asSql(tx), ceiling, count)
}

/** The same for the products of an organization, under a lock on the organization row. */
export async function checkOrganizationCeiling(tx: Tx, organizationId: string, ceiling: Ceiling, count: Counter): Promise<void> {
  await tx`select 1 from organizations where id = ${organizationId} for no key update`
  await refuseAtCeiling(asSql(tx), ceiling, count)
}

/** Runs `insert` in a transaction that first checks the ceiling (see checkCeiling). */
export function insertUnderCeiling<T>(productId: string, ceiling: Ceiling, count: Counter, insert: (tx: Tx) => Promise<T>): Promise<T> {
  return sql.begin(async (tx) => {
    await checkCeiling(tx, productId, ceiling, count)
    return insert(tx)
  }) as Promise<T>
}

/**
 * A cheap early refusal without the lock, for creates that do costly work before their transaction (a domain's RSA
 * key): a product at its ceiling does not get to spend the work. The locked check still decides.
 */
export async function precheckCeiling(ceiling: Ceiling, count: Counter): Promise<void> {
  await refuseAtCeiling(sql, ceiling, count)
}

/** The key tables: a revoked key's row stays (revocation needs it), so their creation rate is bounded too. */
export type KeyTable = 'mail_api_keys' | 'public_keys' | 'platform_keys' | 'capture_keys'
const DAY_SECONDS = 86_400

/**
 * Runs a key's `insert` in a transaction that first checks its ceiling of active keys (checkCeiling), then the keys of
 * the kind the product created in the last 24 hours, revoked ones included (config.keysCreatedPerDay): revoked rows
 * stay, so create and revoke in a loop would otherwise grow the table without bound. Beyond: 429 rate_limited with
 * Retry-After (until the oldest of those keys is a day old).
 */
export function insertKeyUnderCeilings<T>(
  productId: string, ceiling: Ceiling, table: KeyTable, count: Counter, insert: (tx: Tx) => Promise<T>,
): Promise<T> {
  return insertUnderCeiling(productId, ceiling, count, async (tx) => {
    const limit = config.keysCreatedPerDay
    const [recent] = await tx<{ n: number; wait: number | null }[]>`
      select count(*)::int as n, ceil(extract(epoch from min(created_at) + interval '1 day' - now()))::int as wait
      from ${tx(table)} where product_id = ${productId} and created_at > now() - interval '1 day'`
    if ((recent?.n ?? 0) >= limit) {
      const retryAfter = Math.min(DAY_SECONDS, Math.max(1, recent?.wait ?? DAY_SECONDS))
      throw tooMany('rate_limited', `This product created ${limit} ${CEILINGS[ceiling].what.replace('active ', '')} in the last 24 hours, `
        + `revoked ones included, the most it may; retry after ${retryAfter} s`, retryAfter, { resource: ceiling, limit, windowSeconds: DAY_SECONDS })
    }
    return insert(tx)
  })
}
