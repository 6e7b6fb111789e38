// Reads a paginated list operation whole: every list of the platform pages the same way (`limit`, `after` = the last
// item's id, `has_more`; docs/architecture.md "Lists"), and keeps its items under a member of its own name.
import { api } from './api'

export interface ReadAllOptions<T> {
  path?: Record<string, string>
  /** Stop once this many items are read (the list's own ceiling, or what the view needs). */
  max?: number
  /** The cursor an item gives the next page, when it is not `id` (members: `userId`). */
  cursor?: (item: T) => string
}

/** Every item of `operationId`'s list under `member` (`data` for the `{object: "list", data}` shape), page after page. */
export async function readAll<T>(operationId: string, member: string, options: ReadAllOptions<T> = {}): Promise<T[]> {
  const cursor = options.cursor ?? ((item: T) => (item as { id: string }).id)
  const items: T[] = []
  for (let after: string | undefined; items.length < (options.max ?? Infinity);) {
    const page = await api.run<Record<string, unknown> & { has_more: boolean }>(operationId, { path: options.path, query: { limit: 100, after } })
    const batch = page[member] as T[]
    items.push(...batch)
    if (!page.has_more || !batch.length) break
    after = cursor(batch.at(-1)!)
  }
  return items
}
