// Organization membership: who can reach the organization's products. Owners manage members; the last owner stays.
import { publishInvalidation } from '../../../shared/cache/invalidation'
import { sql } from '../../../shared/db/client'
import { keysetPage } from '../../../shared/db/keyset'
import { type PageRequest, PAGE_DEFAULT } from '../../../shared/catalog/pagination'
import { conflict, forbidden, notFound } from '../../../shared/errors'

export type Role = 'owner' | 'member'

export interface Member {
  userId: string
  email: string
  name: string | null
  role: Role
  joinedAt: Date
}

const memberFields = (row: Record<string, any>): Member => ({
  userId: row.user_id, email: row.email, name: row.name, role: row.role, joinedAt: row.created_at,
})

/** The caller's role in the organization; an organization they do not belong to is not found. */
async function roleOf(organizationId: string, userId: string): Promise<Role> {
  const [row] = await sql`select role from organization_members where organization_id = ${organizationId} and user_id = ${userId}`
  if (!row) throw notFound('Organization')
  return row.role
}

async function requireOwner(organizationId: string, userId: string): Promise<void> {
  if ((await roleOf(organizationId, userId)) !== 'owner') throw forbidden('Only an owner of the organization can manage its members')
}

/** By the time they joined, oldest first; `page.after` is a member's user id. At most `page.limit + 1` rows. */
export async function listMembers(organizationId: string, callerId: string, page: PageRequest = { limit: PAGE_DEFAULT }): Promise<Member[]> {
  await roleOf(organizationId, callerId)
  const rows = await keysetPage({
    what: 'member', order: { key: ['m.created_at', 'm.user_id'], descending: false },
    cursor: (after) => sql`from organization_members m where m.organization_id = ${organizationId} and m.user_id = ${after}`,
    rows: sql`
      select m.user_id, u.email, u.name, m.role, m.created_at from organization_members m join users u on u.id = m.user_id
      where m.organization_id = ${organizationId}`,
  }, page)
  return rows.map(memberFields)
}

/** Adds an existing user by email. */
export async function addMember(organizationId: string, callerId: string, input: { email: string; role?: Role }): Promise<Member> {
  await requireOwner(organizationId, callerId)
  const [user] = await sql`select id from users where lower(email) = lower(${input.email})`
  if (!user) throw notFound('User with this email')
  const [row] = await sql`
    insert into organization_members (organization_id, user_id, role) values (${organizationId}, ${user.id}, ${input.role ?? 'member'})
    on conflict do nothing returning user_id, role, created_at`
  if (!row) throw conflict('This user is already a member', [{ path: '/body/email', message: 'is already a member' }])
  const [member] = await sql`
    select m.user_id, u.email, u.name, m.role, m.created_at from organization_members m join users u on u.id = m.user_id
    where m.organization_id = ${organizationId} and m.user_id = ${user.id}`
  return memberFields(member!)
}

/** Removes a member (owners only, or a member leaving); the organization always keeps at least one owner. */
export async function removeMember(organizationId: string, callerId: string, userId: string): Promise<void> {
  if (callerId !== userId) await requireOwner(organizationId, callerId)
  else await roleOf(organizationId, callerId)
  await sql.begin(async (tx) => {
    // Lock the organization's memberships so two concurrent removals cannot both pass the last-owner check.
    const members = await tx`select user_id, role from organization_members where organization_id = ${organizationId} for update`
    const target = members.find((m) => m.user_id === userId)
    if (!target) throw notFound('Member')
    if (target.role === 'owner' && members.filter((m) => m.role === 'owner').length === 1) {
      throw conflict('An organization keeps at least one owner', [{ path: '/path/userId', message: 'is the last owner' }])
    }
    await tx`delete from organization_members where organization_id = ${organizationId} and user_id = ${userId}`
  })
  // The user's sessions may hold console tokens for the organization's products: gateways check them again at once.
  await publishInvalidation({ kind: 'member_removed', userId })
}
