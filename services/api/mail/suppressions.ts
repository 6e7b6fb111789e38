// The suppression list read and pruned by the product: the addresses the mailer put there (a recipient refused for
// good), newest first, and removing one so that the next email to it is attempted again.
import type { PageRequest } from '../../../shared/catalog/pagination'
import { sql } from '../../../shared/db/client'
import { keysetPage } from '../../../shared/db/keyset'
import { notFound } from '../../../shared/errors'

export interface Suppression {
  /** The address as the mailer recorded it (lower case). */
  address: string
  /** Why: the SMTP server's refusal. */
  reason: string
  createdAt: Date
}

const out = (row: Record<string, any>): Suppression => ({ address: row.address, reason: row.reason, createdAt: row.created_at })

/** The product's suppressed addresses, newest first; the cursor is an address of the list. */
export async function listSuppressions(productId: string, page: PageRequest): Promise<Suppression[]> {
  const rows = await keysetPage({
    what: 'suppressed address', order: { key: ['created_at', 'address'], descending: true },
    cursor: (after) => sql`from mail_suppressions where product_id = ${productId} and address = ${after}`,
    rows: sql`select address, reason, created_at from mail_suppressions where product_id = ${productId}`,
  }, page)
  return rows.map(out)
}

/**
 * Takes `address` (any case) off the product's list: the mailer attempts it again from the next email. 404 when it is
 * not on this product's list, another product's entry included.
 */
export async function removeSuppression(productId: string, address: string): Promise<Suppression> {
  const [row] = await sql`
    delete from mail_suppressions where product_id = ${productId} and address = ${address.toLowerCase()}
    returning address, reason, created_at`
  if (!row) throw notFound('Suppressed address')
  return out(row)
}
