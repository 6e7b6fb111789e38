// One pagination style for every list of the platform (docs/architecture.md, "Lists"), the public email list's own:
// query `limit` (1..100) and `after` (the id of the last item of the previous page), answer `has_more`. Keyset pages in
// a stable order with a unique tiebreaker, so an item is never skipped nor repeated while the walk goes on.
import Type, { type TSchema } from 'typebox'
import { badRequest } from '../errors'
import { Uuid } from './schemas'

/** Items per page when `limit` is left out, and the most one page holds. */
export const PAGE_DEFAULT = 50
export const PAGE_MAX = 100

/** A page asked for: how many, and after which item (its id, or a dashboard version's number). */
export interface PageRequest<C = string> {
  limit: number
  after?: C
}

/**
 * The query members of a paginated list. `cursor` is the schema of `after` (a uuid unless the list's items are named
 * otherwise). Extra filters (a dashboard's `tag`, `q`) go beside these.
 */
export function pageQuery(what: string): { limit: ReturnType<typeof Limit>; after: ReturnType<typeof UuidCursor> }
export function pageQuery<C extends TSchema>(what: string, cursor: C): { limit: ReturnType<typeof Limit>; after: ReturnType<typeof Type.Optional<C>> }
export function pageQuery(what: string, cursor?: TSchema) {
  return { limit: Limit(), after: Type.Optional(cursor ?? Uuid(`The id of the last ${what} of the previous page: the page after it`)) }
}

const Limit = () => Type.Optional(Type.Integer({
  minimum: 1, maximum: PAGE_MAX, default: PAGE_DEFAULT, description: 'Items per page',
}))
const UuidCursor = () => Type.Optional(Uuid())

/** The member every paginated answer carries beside its list. */
export const HasMore = () =>
  Type.Boolean({ description: 'More items follow this page: ask again with `after` set to the last item of this one' })

/**
 * The page the query asks for, with the default limit filled in. A uuid cursor is lower-cased (uuids are
 * case-insensitive; ids are compared lower-case), so `after=<UPPER>` names the same item in code as in SQL.
 */
export const pageOf = <C = string>(query: { limit?: number; after?: C } | undefined): PageRequest<C> => ({
  limit: query?.limit ?? PAGE_DEFAULT,
  ...(query?.after !== undefined ? { after: (typeof query.after === 'string' ? query.after.toLowerCase() : query.after) as C } : {}),
})

/**
 * List functions read one row more than the page holds: that row only says whether more follow. Cuts it off.
 * Example: `const { items, has_more } = cutPage(await listX(productId, page), page)`.
 */
export function cutPage<T>(rows: readonly T[], page: PageRequest<unknown>): { items: T[]; has_more: boolean } {
  return { items: rows.slice(0, page.limit), has_more: rows.length > page.limit }
}

type Lister<T> = (page: PageRequest) => Promise<readonly T[]>

/** The page `query` asks for, read with `list`, cut, and shown with `out`. */
async function readPage<T, Out>(query: { limit?: number; after?: string } | undefined, list: Lister<T>, out: (item: T) => Out) {
  const page = pageOf(query)
  const { items, has_more } = cutPage(await list(page), page)
  return { items: items.map(out), has_more }
}

/**
 * A list body in the platform's shape: `{ [member]: items, has_more }`.
 * Example: `listed('namespaces', query, (page) => listNamespaces(productId, page), namespaceOut)`.
 */
export async function listed<Member extends string, T, Out>(
  member: Member, query: { limit?: number; after?: string } | undefined, list: Lister<T>, out: (item: T) => Out,
): Promise<Record<Member, Out[]> & { has_more: boolean }> {
  const { items, has_more } = await readPage(query, list, out)
  return { [member]: items, has_more } as Record<Member, Out[]> & { has_more: boolean }
}

/** A list body in Resend's shape, for Mail: `{ object: 'list', has_more, data }`, in that order. */
export async function listObject<T, Out>(query: { limit?: number; after?: string } | undefined, list: Lister<T>, out: (item: T) => Out) {
  const { items, has_more } = await readPage(query, list, out)
  return { object: 'list' as const, has_more, data: items }
}

/** `after` names no item of this list (never one, deleted since, or another product's): 400 naming /query/after. */
export const unknownCursor = (what: string) =>
  badRequest(`after names no ${what} of this list; start again without it`, [{ path: '/query/after', message: `names no ${what} of this list` }])

/** Throws unknownCursor unless the cursor lookup found its row. */
export function requireCursor(found: readonly unknown[], what: string): void {
  if (found.length === 0) throw unknownCursor(what)
}
