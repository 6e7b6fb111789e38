// One keyset page and its cursor in one statement: a cursor deleted between a lookup and the list query would compare
// with NULL and silently answer an empty last page; here the statement itself says whether the cursor was there.
import type postgres from 'postgres'
import { unknownCursor } from '../catalog/pagination'
import { sql } from './client'

type Fragment = postgres.PendingQuery<postgres.Row[]>

/**
 * Runs `list(position)` after the cursor row, or `list(null)` without one. `cursor` selects the cursor's sort key (the
 * columns `list` compares, in the same order) among the rows the caller may name, for instance
 * sql`select created_at, id from mail_templates where id = ${after} and product_id = ${productId}`; `list` compares its
 * own sort key with `position` (a row subquery): sql`and (created_at, id) < ${position}`. When the cursor names no row
 * (never one, another product's, or deleted meanwhile), 400 naming /query/after (`unknownCursor(what)`).
 */
export async function keysetPage(what: string, cursor: Fragment | null, list: (position: Fragment | null) => Fragment): Promise<postgres.Row[]> {
  if (!cursor) return [...(await list(null))]
  // The list runs as a lateral subquery of the one row that says whether the cursor exists; its rows keep their order
  // (page_position). With no row after the cursor, the join still answers that one row, page columns null.
  const rows = await sql`
    with cursor as materialized (${cursor})
    select (select count(*) from cursor)::int as cursor_found, page.*
    from (select 1) as one
    left join lateral (
      select true as in_page, row_number() over () as page_position, listed.*
      from (${list(sql`(select * from cursor)`)}) as listed
    ) as page on true
    order by page.page_position`
  if (!rows[0]?.cursor_found) throw unknownCursor(what)
  return rows.filter((row) => row.in_page).map(({ cursor_found: _found, in_page: _in, page_position: _position, ...row }) => row)
}
