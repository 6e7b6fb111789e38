// DOM building without HTML strings: every text the page shows goes in as a text node, so nothing an API returns
// (a dashboard title, an email subject, a channel payload) can ever become markup or script.
type Child = Node | string | number | null | undefined | false
type Attributes = Record<string, string | number | boolean | null | undefined | EventListener>

/** An element with attributes (`on<event>` functions become listeners; false/null/undefined are left out) and children. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attributes: Attributes = {}, ...children: (Child | Child[])[]): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag)
  for (const [name, value] of Object.entries(attributes)) {
    if (value === false || value === null || value === undefined) continue
    if (typeof value === 'function') element.addEventListener(name.slice(2), value)
    else element.setAttribute(name, value === true ? '' : String(value))
  }
  append(element, ...children)
  return element
}

export function append(parent: Node, ...children: (Child | Child[])[]): void {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue
    parent.appendChild(child instanceof Node ? child : document.createTextNode(String(child)))
  }
}

/** Replaces everything inside `parent` with `children`. */
export function replace(parent: Node, ...children: (Child | Child[])[]): void {
  while (parent.firstChild) parent.removeChild(parent.firstChild)
  append(parent, ...children)
}

/**
 * A table of rows; each column names its header and how a row shows in it. Each cell carries its column's name
 * (`data-label`), so a narrow screen shows a row as a card of labelled lines instead of a table wider than it
 * (console.css).
 */
export function table<T>(rows: T[], columns: [string, (row: T) => Child | Child[]][], attributes: Attributes = {}): HTMLTableElement {
  return h('table', attributes,
    h('thead', {}, h('tr', {}, columns.map(([title]) => h('th', {}, title)))),
    h('tbody', {}, rows.map((row) => h('tr', {}, columns.map(([title, cell]) => h('td', { 'data-label': title }, cell(row)))))),
  )
}

// Where a long value may wrap: after an @, a dot, a slash and the like, so an address or a URL breaks between its
// parts (at "@customer-", not "custo|mer").
const BREAK_AFTER = /([@./_\-?&=+:,])/

/** `text` with a break opportunity (<wbr>) after each separator: wraps there first, mid-word only when it must. */
export function breakable(text: string): (string | HTMLElement)[] {
  return text.split(BREAK_AFTER).flatMap((part, i) => (i % 2 === 1 ? [part, document.createElement('wbr')] : part ? [part] : []))
}

const COUNT = new Intl.NumberFormat('en-US')
/** A whole number as the console writes every number: grouped digits ("86,400"). */
export const count = (value: number) => COUNT.format(value)

/** A date as the reader's local time, to the second. */
export const when = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : '—')
