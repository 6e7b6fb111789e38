// Who made a dashboard version, as a person reads it: versions name a user id, and the product's organization's members
// list (organization_members_list) turns ids into emails. A user who left, or a list the reader may not see, stays an id.
import { api } from '../../api'
import { readAll } from '../../lists'

const MAX_MEMBERS = 500 // enough to name the authors of any organization this console is meant for

export async function memberEmails(productId: string): Promise<Map<string, string>> {
  const emails = new Map<string, string>()
  try {
    const { organizationId } = await api.run<{ organizationId: string }>('organization_products_get', { path: { productId } })
    const members = await readAll<{ userId: string; email: string }>('organization_members_list', 'members', {
      path: { organizationId }, max: MAX_MEMBERS, cursor: (member) => member.userId,
    })
    for (const member of members) emails.set(member.userId, member.email)
  } catch {
    // Names are a courtesy: the history is shown with ids rather than not at all.
  }
  return emails
}

/** A version's author: the member's email, else the start of the user id, else (a platform key) "a key". */
export const authorOf = (emails: Map<string, string>, userId: string | null) =>
  userId === null ? 'a platform key' : emails.get(userId) ?? `user ${userId.slice(0, 8)}`
