// The filter rows of the insight builder (a field, an operator, a value), for a metric query and for each funnel step.
import { h } from '../../dom'
import { FILTER_OPS, type FilterDraft } from './query'

export interface FilterRowsOptions {
  /** Where the rows live in the draft: edited in place. */
  filters: FilterDraft[]
  /** The most rows the API takes here. */
  max: number
  /** The id of a datalist of the entity's fields, offered while typing a field. */
  fields: string
  /** A value changed (no redraw needed). */
  changed: () => void
  /** A row was added or removed: the form is drawn again. */
  redraw: () => void
  /** Names the rows in the page (data-filters), e.g. "query" or "step-2". */
  name: string
}

/** The rows, each with Remove, and Add filter while under the bound. */
export function filterRows(options: FilterRowsOptions): HTMLElement {
  const { filters } = options
  const rows = filters.map((filter, index) => {
    const field = h('input', { 'data-field': 'filter-field', 'aria-label': 'Filter field', list: options.fields, value: filter.field, placeholder: 'event or properties.plan', maxlength: 211 })
    const op = h('select', { 'data-field': 'filter-op', 'aria-label': 'Operator' }, FILTER_OPS.map(([value, label]) => h('option', { value }, label)))
    op.value = filter.op
    const value = h('input', { 'data-field': 'filter-value', 'aria-label': 'Value', value: filter.value, maxlength: 1000 })
    const showValue = () => {
      value.hidden = filter.op === 'set' || filter.op === 'notSet'
      value.placeholder = filter.op === 'in' ? 'a, b, c' : 'value'
    }
    showValue()
    field.addEventListener('input', () => { filter.field = field.value; options.changed() })
    op.addEventListener('change', () => { filter.op = op.value as FilterDraft['op']; showValue(); options.changed() })
    value.addEventListener('input', () => { filter.value = value.value; options.changed() })
    return h('div', { class: 'filter-row', 'data-filter': index }, field, op, value,
      h('button', { type: 'button', class: 'secondary small', 'data-action': 'remove-filter', 'aria-label': 'Remove filter', onclick: () => { filters.splice(index, 1); options.redraw() } }, 'Remove'))
  })
  return h('div', { class: 'filters', 'data-filters': options.name },
    rows,
    filters.length < options.max
      ? h('button', { type: 'button', class: 'link', 'data-action': 'add-filter', onclick: () => { filters.push({ field: '', op: 'equals', value: '' }); options.redraw() } }, '+ Add filter')
      : h('span', { class: 'muted' }, `At most ${options.max} filters.`))
}
