// How the inspector writes channel data and times as text (never markup: a payload is shown, never interpreted).
// A payload is whatever a product's backend or clients published (up to the inline cap, 256 KB): the page shows a
// bounded amount of it, so a hostile or merely huge one cannot freeze the tab.
import { h } from '../../dom'

/** The most characters of one payload the page shows; the rest is cut, with a note saying how much. */
export const SHOWN_PAYLOAD_CHARS = 16 * 1024
/** Deeper than this, indentation alone would dwarf the data (it grows with depth × lines): shown compact instead. */
export const PRETTY_MAX_DEPTH = 32

/** How deeply a JSON text nests its arrays and objects, read in one pass (strings skipped). */
function nesting(json: string): number {
  let depth = 0
  let deepest = 0
  for (let i = 0, inString = false; i < json.length; i++) {
    const c = json[i]
    if (inString) {
      if (c === '\\') i++
      else if (c === '"') inString = false
    } else if (c === '"') inString = true
    else if (c === '[' || c === '{') deepest = Math.max(deepest, ++depth)
    else if (c === ']' || c === '}') depth--
  }
  return deepest
}

const kb = (chars: number) => `${Math.ceil(chars / 1024)} KB`

/** `text` cut to SHOWN_PAYLOAD_CHARS (never inside a surrogate pair), and what the reader should know about it. */
function bounded(text: string, notes: string[]): { text: string; note: string | null } {
  if (text.length > SHOWN_PAYLOAD_CHARS) {
    const end = /[\uD800-\uDBFF]/.test(text[SHOWN_PAYLOAD_CHARS - 1]!) ? SHOWN_PAYLOAD_CHARS - 1 : SHOWN_PAYLOAD_CHARS
    notes.push(`Showing the first ${kb(end)} of ${kb(text.length)}.`)
    text = `${text.slice(0, end)}…`
  }
  return { text, note: notes.length ? notes.join(' ') : null }
}

/**
 * A payload as readable text: JSON pretty-printed, or the stored object an over-cap publish was delivered as. A large
 * or deeply nested one is shown compact, and anything past SHOWN_PAYLOAD_CHARS is cut; `note` says which.
 */
export function payloadText(entry: { data?: unknown; ref?: unknown }): { text: string; note: string | null } {
  const [prefix, value] = entry.ref !== undefined ? ['stored payload ', entry.ref] : ['', entry.data]
  let compact: string
  try {
    compact = JSON.stringify(value) ?? 'null'
  } catch {
    return { text: '', note: 'This payload cannot be shown: it nests too deeply to be written out.' }
  }
  const depth = nesting(compact)
  if (depth > PRETTY_MAX_DEPTH) return bounded(prefix + compact, [`Nested ${depth} levels deep: shown compact.`])
  // Pretty-printing only what can be shown: past a few times the shown size it would be cut anyway.
  if (compact.length > 4 * SHOWN_PAYLOAD_CHARS) return bounded(prefix + compact, ['Large: shown compact.'])
  return bounded(prefix + JSON.stringify(value, null, 2), [])
}

/** A payload on the page: its text in a `pre.data`, then the note if it was cut or shown compact. */
export function payloadBlock(entry: { data?: unknown; ref?: unknown }): Node[] {
  const { text, note } = payloadText(entry)
  return [h('pre', { class: 'data' }, text), ...(note ? [h('p', { class: 'muted payload-note', 'data-testid': 'payload-note' }, note)] : [])]
}

/** A moment as the reader's local clock time to the millisecond: "18:24:31.708". */
export const clockTime = (date: Date): string =>
  `${date.toLocaleTimeString(undefined, { hour12: false })}.${String(date.getMilliseconds()).padStart(3, '0')}`
