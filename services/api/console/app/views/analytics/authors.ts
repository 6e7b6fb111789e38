// Who made a dashboard version, as a person reads it: versions name a user id, and the product's organization's members
// list (organization_members_list) turns ids into emails. A user who left, or a list the reader may not see, stays an id.
import { api } from '../../api'

const MAX_PAGES = 5 // 500 members: enough to name the authors of any organization this console is meant for

export async function memberEmails(productId: string): Promise<Map<string, string>> {
  const emails = new Map<string, string>()
  try {
    const { organizationId } = await api.run<{ organizationId: string }>('organization_products_get', { path: { productId } })
    let after: string | undefined
    for (let page = 0; page < MAX_PAGES; page++) {
      const { members, has_more } = await api.run<{ members: { userId: string; email: string }[]; has_more: boolean }>(
        'organization_members_list', { path: { organizationId }, query: { limit: 100, after } })
      for (const member of members) emails.set(member.userId, member.email)
      if (!has_more || !members.length) break
      after = members.at(-1)!.userId
    }
  } catch {
    // Names are a courtesy: the history is shown with ids rather than not at all.
  }
  return emails
}

/** A version's author: the member's email, else the start of the user id, else (a platform key) "a key". */
export const authorOf = (emails: Map<string, string>, userId: string | null) =>
  userId === null ? 'a platform key' : emails.get(userId) ?? `user ${userId.slice(0, 8)}`
