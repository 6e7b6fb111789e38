// Reads every page of a paginated list operation (limit/after/has_more, docs/architecture.md "Lists").
import { api } from '../../api'

/** All items of `operationId`'s list under `member`, page after page (ids as cursors). */
export async function readAll<T extends { id: string }>(operationId: string, member: string, path?: Record<string, string>): Promise<T[]> {
  const items: T[] = []
  for (let after: string | undefined; ;) {
    const page = await api.run<Record<string, unknown> & { has_more: boolean }>(operationId, { path, query: { limit: 100, after } })
    const batch = page[member] as T[]
    items.push(...batch)
    if (!page.has_more || !batch.length) return items
    after = batch.at(-1)!.id
  }
}
