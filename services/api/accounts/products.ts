// Products, owned by organizations; a user reaches a product through membership of its organization.
import { checkOrganizationCeiling } from '../../../shared/db/ceiling'
import { sql } from '../../../shared/db/client'
import { keysetPage } from '../../../shared/db/keyset'
import { type PageRequest, PAGE_DEFAULT } from '../../../shared/catalog/pagination'
import { notFound } from '../../../shared/errors'

export interface Product {
  id: string
  name: string
  organizationId: string
  createdAt: Date
}

const productFields = (row: Record<string, any>): Product => ({
  id: row.id, name: row.name, organizationId: row.organization_id, createdAt: row.created_at,
})

/** The user's role in the organization owning the product, and that organization; null when they cannot reach it. */
export async function productAccess(userId: string, productId: string): Promise<{ role: 'owner' | 'member'; organizationId: string } | null> {
  const [row] = await sql`
    select m.role, p.organization_id from products p join organization_members m on m.organization_id = p.organization_id
    where p.id = ${productId} and m.user_id = ${userId}`
  return row ? { role: row.role as 'owner' | 'member', organizationId: row.organization_id as string } : null
}

export async function userCanAccessProduct(userId: string, productId: string): Promise<boolean> {
  return (await productAccess(userId, productId)) !== null
}

/** Whether the user belongs to the organization (for counting its requests against the organization's budget). */
export async function isMember(userId: string, organizationId: string): Promise<boolean> {
  const [row] = await sql`select 1 from organization_members where organization_id = ${organizationId} and user_id = ${userId}`
  return row !== undefined
}

/** Creates a product in one of the user's organizations (their first one when none is named). */
export async function createProduct(userId: string, input: { name: string; organizationId?: string }): Promise<Product> {
  const [membership] = input.organizationId
    ? await sql`select organization_id from organization_members where user_id = ${userId} and organization_id = ${input.organizationId}`
    : await sql`select organization_id from organization_members where user_id = ${userId} order by created_at limit 1`
  if (!membership) throw notFound('Organization')
  const organizationId = membership.organization_id as string
  const [row] = await sql.begin(async (tx) => {
    await checkOrganizationCeiling(tx, organizationId, 'organizationProducts', (q) => q<{ n: number }[]>`
      select count(*)::int as n from products where organization_id = ${organizationId}`)
    return tx`
      insert into products (organization_id, name, created_by) values (${organizationId}, ${input.name}, ${userId})
      returning id, name, organization_id, created_at`
  })
  return productFields(row!)
}

/** Newest first; `page.after` a product the user reaches. At most `page.limit + 1` rows. */
export async function listProductsOfUser(userId: string, page: PageRequest = { limit: PAGE_DEFAULT }): Promise<Product[]> {
  const rows = await keysetPage({
    what: 'product', order: { key: ['p.created_at', 'p.id'], descending: true },
    cursor: (after) => sql`
      from products p join organization_members m on m.organization_id = p.organization_id
      where p.id = ${after} and m.user_id = ${userId}`,
    rows: sql`
      select p.id, p.name, p.organization_id, p.created_at from products p
      join organization_members m on m.organization_id = p.organization_id
      where m.user_id = ${userId}`,
  }, page)
  return rows.map(productFields)
}

export async function getProduct(productId: string): Promise<Product | null> {
  const [row] = await sql`select id, name, organization_id, created_at from products where id = ${productId}`
  return row ? productFields(row) : null
}

/** Oldest first; `page.after` an organization the user belongs to. At most `page.limit + 1` rows. */
export async function listOrganizationsOfUser(userId: string, page: PageRequest = { limit: PAGE_DEFAULT }) {
  const rows = await keysetPage({
    what: 'organization', order: { key: ['o.created_at', 'o.id'], descending: false },
    cursor: (after) => sql`
      from organizations o join organization_members m on m.organization_id = o.id
      where o.id = ${after} and m.user_id = ${userId}`,
    rows: sql`
      select o.id, o.name, m.role, o.created_at from organizations o
      join organization_members m on m.organization_id = o.id where m.user_id = ${userId}`,
  }, page)
  return rows.map((r) => ({ id: r.id as string, name: r.name as string, role: r.role as string, createdAt: r.created_at as Date }))
}
