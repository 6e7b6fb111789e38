// A table() (dom.ts) whose rows carry attributes of their own (`data-channel`) and whose cells may carry a class
// (`number`, `wide`): each cell keeps its column's name (`data-label`), so under 640 px a row is a card of labelled
// lines as every table of the console is (console.css), and a long channel name wraps instead of widening the page.
import { h } from '../../dom'

type Cell = Node | string
export type Column<T> = [title: string, cell: (row: T) => Cell | Cell[], className?: string]

export function fluidTable<T>(rows: T[], columns: Column<T>[], attributes: Record<string, string>, rowAttributes: (row: T) => Record<string, string> = () => ({})): HTMLTableElement {
  return h('table', { class: 'fluid-table', ...attributes },
    h('thead', {}, h('tr', {}, columns.map(([title, , className]) => h('th', { class: className }, title)))),
    h('tbody', {}, rows.map((row) => h('tr', rowAttributes(row), columns.map(([title, cell, className]) =>
      h('td', { 'data-label': title, class: className }, cell(row)))))))
}
