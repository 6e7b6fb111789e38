// One keyset page and its cursor in one statement: a cursor deleted between a lookup and the list query would compare
// with NULL and silently answer an empty last page; here the statement itself says whether the cursor was there.
import type postgres from 'postgres'
import { type PageRequest, unknownCursor } from '../catalog/pagination'
import { sql } from './client'

type Fragment = postgres.PendingQuery<postgres.Row[]>

export interface KeysetOrder {
  /**
   * The sort key, unique per row, as SQL expressions (constants of the code, never input), e.g. ['created_at', 'id']
   * or ['g.pattern collate "C"', 'g.id']: the listing sorts by them and the cursor row is selected by them, so a table
   * alias they use must be declared in both `cursor` and `rows`.
   */
  key: readonly [string, ...string[]]
  descending: boolean
}

/** Most lists: newest first, by creation time then id. */
export const NEWEST_FIRST: KeysetOrder = { key: ['created_at', 'id'], descending: true }

export interface KeysetQuery {
  /** What the 400 calls the cursor: "unknown <what>" (`unknownCursor`). */
  what: string
  order: KeysetOrder
  /**
   * Where the cursor row may be found, from the FROM on, with `after` bound: the rows the caller may name, for
   * instance sql`from mail_templates where id = ${after} and product_id = ${productId}`. It may name a row the
   * listing filters out (a revoked key, a dashboard outside the filter): its position in the order is what counts.
   */
  cursor: (after: string) => Fragment
  /** The listing up to the end of its WHERE clause: sql`select … from … where …`. */
  rows: Fragment
}

/**
 * The page of `rows` after `page.after` in `order`, at most `page.limit + 1` rows (the extra one says more follow).
 * When the cursor names no row (never one, another product's, or deleted meanwhile): 400 naming /query/after.
 */
export async function keysetPage(query: KeysetQuery, page: PageRequest): Promise<postgres.Row[]> {
  const { key, descending } = query.order
  const statement = (position: Fragment | null) => sql`
    ${query.rows}
    ${position ? sql`and (${columns(key)}) ${sql.unsafe(descending ? '<' : '>')} ${position}` : sql``}
    order by ${columns(key, descending ? ' desc' : '')} limit ${page.limit + 1}`
  if (!page.after) return [...(await statement(null))]
  // The list runs as a lateral subquery of the one row that says whether the cursor exists; its rows keep their order
  // (page_position). With no row after the cursor, the join still answers that one row, page columns null.
  const rows = await sql`
    with cursor as materialized (select ${columns(key)} ${query.cursor(page.after)})
    select (select count(*) from cursor)::int as cursor_found, page.*
    from (select 1) as one
    left join lateral (
      select true as in_page, row_number() over () as page_position, listed.*
      from (${statement(sql`(select * from cursor)`)}) as listed
    ) as page on true
    order by page.page_position`
  if (!rows[0]?.cursor_found) throw unknownCursor(query.what)
  return rows.filter((row) => row.in_page).map(({ cursor_found: _found, in_page: _in, page_position: _position, ...row }) => row)
}

/** `a, b` (each with `suffix`) as one fragment; fragments are built per statement, postgres.js consumes them. */
const columns = (key: KeysetOrder['key'], suffix = '') =>
  key.map((column) => sql.unsafe(column + suffix)).reduce((list, column) => sql`${list}, ${column}`)
