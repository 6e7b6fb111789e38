// A time range as the analytics API takes it (`{from, to?}`: ISO-8601, `now`, or relative like -7d), picked from
// presets or typed; the API checks the text and names the field when it is wrong, so the page never guesses a parse.
import { h } from '../../dom'

export interface Range { from: string; to?: string }

const PRESETS: [string, string][] = [
  ['-24h', 'Last 24 hours'], ['-7d', 'Last 7 days'], ['-30d', 'Last 30 days'], ['-3m', 'Last 3 months'], ['-12m', 'Last 12 months'],
]
const CUSTOM = 'custom'
const OWN = 'own'
/** The longest range text the API takes (query-schemas.ts Range). */
const MAX_LENGTH = 40

export interface RangePicker {
  element: HTMLElement
  /** The range picked; undefined for "each insight's own" (only where offered). */
  value(): Range | undefined
}

/**
 * Presets, or Custom with from and to as typed. `own` offers "each insight's own range" (a dashboard), the default then;
 * `onChange` is called on every change of the picked range.
 */
export function rangePicker(initial: Range | undefined, onChange: () => void, options: { own?: boolean; name?: string } = {}): RangePicker {
  const preset = initial === undefined ? OWN : !initial.to && PRESETS.some(([from]) => from === initial.from) ? initial.from : CUSTOM
  const select = h('select', { 'data-field': 'range', 'aria-label': options.name ?? 'Range' },
    options.own ? h('option', { value: OWN }, "Each insight's own range") : null,
    PRESETS.map(([from, label]) => h('option', { value: from }, label)),
    h('option', { value: CUSTOM }, 'Custom…'))
  select.value = preset
  const from = h('input', { 'data-field': 'range-from', 'aria-label': 'From', placeholder: '2026-11-01T00:00:00Z or -7d', maxlength: MAX_LENGTH, value: initial?.from ?? '-7d' })
  const to = h('input', { 'data-field': 'range-to', 'aria-label': 'To', placeholder: 'now', maxlength: MAX_LENGTH, value: initial?.to ?? '' })
  const custom = h('span', { class: 'range-custom' }, from, h('span', { class: 'muted' }, 'to'), to)
  const show = () => { custom.hidden = select.value !== CUSTOM }
  show()
  select.addEventListener('change', () => { show(); onChange() })
  from.addEventListener('change', onChange)
  to.addEventListener('change', onChange)
  return {
    element: h('span', { class: 'range-picker' }, select, custom),
    value() {
      if (select.value === OWN) return undefined
      if (select.value !== CUSTOM) return { from: select.value }
      const end = to.value.trim()
      return { from: from.value.trim(), ...(end ? { to: end } : {}) }
    },
  }
}

/** A range as a person reads it: a preset's name, else "from … to …". */
export function describeRange(range: Range): string {
  const preset = !range.to && PRESETS.find(([from]) => from === range.from)
  return preset ? preset[1] : `${range.from} to ${range.to ?? 'now'}`
}
