// Realtime namespaces of a product and their policy (presence, client events, history, archive).
import { type PageRequest, PAGE_DEFAULT } from '../../../shared/catalog/pagination'
import { insertUnderCeiling } from '../../../shared/db/ceiling'
import { sql } from '../../../shared/db/client'
import { keysetPage } from '../../../shared/db/keyset'
import { conflict, notFound } from '../../../shared/errors'
import { publishInvalidation } from '../../../shared/cache/invalidation'
import { markNamespaceDeleted } from '../../../shared/realtime/archive'
import { isPgError } from '../../../shared/db/error-codes'

/** History is kept for up to `ttlSeconds` (30 days at most) and `size` entries per channel; null keeps nothing. */
export interface HistoryPolicy {
  ttlSeconds: number
  size: number
}

/** What a namespace allows on its channels. Stored as plain columns where 0 means "off". */
export interface NamespacePolicy {
  presence: boolean
  /** Whether browser connections may publish (ephemeral client events). */
  clientEvents: boolean
  history: HistoryPolicy | null
  archive: { retentionDays: number } | null
}

export interface Namespace extends NamespacePolicy {
  id: string
  name: string
  createdAt: Date
  updatedAt: Date
}

const namespaceFields = (row: Record<string, any>): Namespace => ({
  id: row.id,
  name: row.name,
  presence: row.presence,
  clientEvents: row.client_events,
  history: row.history_ttl_seconds > 0 ? { ttlSeconds: row.history_ttl_seconds, size: row.history_size } : null,
  archive: row.archive_days > 0 ? { retentionDays: row.archive_days } : null,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
})

/** The stored columns for the policy fields present in `input` (absent fields are left out, so they keep their value). */
function policyColumns(input: Partial<NamespacePolicy>): Record<string, boolean | number> {
  const columns: Record<string, boolean | number> = {}
  if (input.presence !== undefined) columns.presence = input.presence
  if (input.clientEvents !== undefined) columns.client_events = input.clientEvents
  if (input.history !== undefined) {
    columns.history_ttl_seconds = input.history?.ttlSeconds ?? 0
    columns.history_size = input.history?.size ?? 0
  }
  if (input.archive !== undefined) columns.archive_days = input.archive?.retentionDays ?? 0
  return columns
}

export async function createNamespace(productId: string, input: { name: string } & Partial<NamespacePolicy>): Promise<Namespace> {
  const columns = { presence: false, client_events: false, history_ttl_seconds: 0, history_size: 0, archive_days: 0, ...policyColumns(input) }
  let row
  const count = (q: typeof sql) => q<{ n: number }[]>`select count(*)::int as n from realtime_namespaces where product_id = ${productId}`
  try {
    ;[row] = await insertUnderCeiling(productId, 'namespaces', count, (tx) => tx`
      insert into realtime_namespaces ${sql({ product_id: productId, name: input.name, ...columns })}
      returning *`)
  } catch (error) {
    if (isPgError(error, 'uniqueViolation')) {
      throw conflict(`Namespace "${input.name}" already exists in this product`, [{ path: '/body/name', message: 'already exists' }])
    }
    throw error
  }
  await publishInvalidation({ kind: 'namespaces', productId })
  return namespaceFields(row!)
}

/** The product's namespaces, by name (byte order, so the listing is the same under any database collation). */
export async function listNamespaces(productId: string, page: PageRequest = { limit: PAGE_DEFAULT }): Promise<Namespace[]> {
  const rows = await keysetPage({
    what: 'namespace', order: { key: ['name collate "C"', 'id'], descending: false },
    cursor: (after) => sql`from realtime_namespaces where id = ${after} and product_id = ${productId}`,
    rows: sql`select * from realtime_namespaces where product_id = ${productId}`,
  }, page)
  return rows.map(namespaceFields)
}

export async function getNamespace(productId: string, name: string): Promise<Namespace> {
  const [row] = await sql`select * from realtime_namespaces where product_id = ${productId} and name = ${name}`
  if (!row) throw notFound('Namespace')
  return namespaceFields(row)
}

/** Changes only the supplied policy fields; nothing supplied changes nothing (and announces nothing). */
export async function updateNamespace(productId: string, name: string, input: Partial<NamespacePolicy>): Promise<Namespace> {
  const columns = policyColumns(input)
  if (Object.keys(columns).length === 0) return getNamespace(productId, name)
  const [row] = await sql`
    update realtime_namespaces set ${sql(columns)}, updated_at = now()
    where product_id = ${productId} and name = ${name} returning *`
  if (!row) throw notFound('Namespace')
  await publishInvalidation({ kind: 'namespaces', productId })
  return namespaceFields(row)
}

/**
 * Deletes the namespace; its grants go with it (foreign key cascade, same statement), and its archive is marked for
 * deletion in the same transaction (never answered again; the archiver's sweeper deletes the rows).
 */
export async function deleteNamespace(productId: string, name: string): Promise<void> {
  const row = await sql.begin(async (tx) => {
    const [deleted] = await tx`delete from realtime_namespaces where product_id = ${productId} and name = ${name} returning id`
    if (deleted) await markNamespaceDeleted(productId, name, tx)
    return deleted
  })
  if (!row) throw notFound('Namespace')
  await publishInvalidation({ kind: 'namespaces', productId })
}
