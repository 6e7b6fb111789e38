// A table that stays inside a phone's width: at narrow widths each row becomes a card and each cell shows its column's
// name beside it (area.css, `.fluid-table`), so a long channel name wraps instead of widening the page.
import { h } from '../../dom'

type Cell = Node | string
export type Column<T> = [title: string, cell: (row: T) => Cell | Cell[], className?: string]

export function fluidTable<T>(rows: T[], columns: Column<T>[], attributes: Record<string, string>, rowAttributes: (row: T) => Record<string, string> = () => ({})): HTMLTableElement {
  return h('table', { class: 'fluid-table', ...attributes },
    h('thead', {}, h('tr', {}, columns.map(([title, , className]) => h('th', { class: className }, title)))),
    h('tbody', {}, rows.map((row) => h('tr', rowAttributes(row), columns.map(([title, cell, className]) =>
      h('td', { 'data-label': title, class: className }, cell(row)))))))
}

const COUNT = new Intl.NumberFormat('en-US')
/** A count as a reader reads it: 12,345. */
export const count = (n: number) => COUNT.format(n)
