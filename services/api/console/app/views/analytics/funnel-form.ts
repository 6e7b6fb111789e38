// The funnel builder: ordered steps (an event of an entity with identities, each with its own filters), the identity
// they are joined on, the conversion window, a breakdown and the range. It edits a FunnelDraft in place.
import { h, replace } from '../../dom'
import { type Catalog, fieldsOf } from './catalog'
import { filterRows } from './filters'
import { type FunnelDraft, LIMITS, type StepDraft } from './query'
import { rangePicker } from './range'

/** Entities a funnel step can be: with a time column and at least one identity kind to join on. */
export const withEvents = (catalog: Catalog) => catalog.entities.filter((entity) => entity.timeColumn !== null && entity.identityKinds.length > 0)

const newStep = (entity: string): StepDraft => ({ entity, event: '', filters: [] })

export function newFunnelDraft(catalog: Catalog): FunnelDraft {
  const entity = withEvents(catalog)[0]
  return {
    steps: [newStep(entity?.entity ?? ''), newStep(entity?.entity ?? '')],
    identity: entity?.identityKinds[0] ?? 'users_id', windowDays: 14, breakdown: '', range: { from: '-30d' },
  }
}

/** The identity kinds every step's entity has: the only ones the steps can be joined on. */
export function sharedIdentities(catalog: Catalog, draft: FunnelDraft): string[] {
  const kinds = draft.steps.map((step) => catalog.entities.find((entity) => entity.entity === step.entity)?.identityKinds ?? [])
  return (kinds[0] ?? []).filter((kind) => kinds.every((list) => list.includes(kind)))
}

/**
 * Draws the form into `root` (again on each structural change); `changed` on every edit. `events`: the id of a
 * datalist of event names seen lately, offered while typing a step.
 */
export function drawFunnelForm(root: HTMLElement, draft: FunnelDraft, catalog: Catalog, events: string, changed: () => void): void {
  const redraw = () => {
    drawFunnelForm(root, draft, catalog, events, changed)
    changed()
  }
  const entities = withEvents(catalog)
  const steps = draft.steps.map((step, index) => {
    const entity = h('select', { 'data-field': 'step-entity', 'aria-label': `Step ${index + 1} entity` }, entities.map((candidate) => h('option', { value: candidate.entity }, candidate.entity)))
    entity.value = step.entity
    entity.addEventListener('change', () => { step.entity = entity.value; step.filters = []; redraw() })
    const event = h('input', { 'data-field': 'step-event', 'aria-label': `Step ${index + 1} event`, list: events, value: step.event, placeholder: 'event name', maxlength: 200 })
    event.addEventListener('input', () => { step.event = event.value; changed() })
    const fields = `step-fields-${index}`
    const found = catalog.entities.find((candidate) => candidate.entity === step.entity)
    return h('li', { class: 'funnel-step-form', 'data-step-form': index + 1 },
      h('div', { class: 'step-head' },
        h('span', { class: 'step-number' }, `${index + 1}`), entity, event,
        draft.steps.length > LIMITS.minSteps
          ? h('button', { type: 'button', class: 'secondary small', 'data-action': 'remove-step', onclick: () => { draft.steps.splice(index, 1); redraw() } }, 'Remove')
          : null),
      h('datalist', { id: fields }, (found ? fieldsOf(found) : []).map((name) => h('option', { value: name }))),
      filterRows({ filters: step.filters, max: LIMITS.stepFilters, fields, changed, redraw, name: `step-${index + 1}` }))
  })
  const identities = sharedIdentities(catalog, draft)
  if (identities.length && !identities.includes(draft.identity)) draft.identity = identities[0]!
  const identity = h('select', { 'data-field': 'identity' }, identities.map((kind) => h('option', { value: kind }, kind)))
  identity.value = draft.identity
  identity.addEventListener('change', () => { draft.identity = identity.value; changed() })
  const windowDays = h('input', { type: 'number', 'data-field': 'window', min: 1, max: LIMITS.windowDays, step: 1, value: draft.windowDays })
  windowDays.addEventListener('change', () => { draft.windowDays = Number(windowDays.value); changed() })
  const first = catalog.entities.find((candidate) => candidate.entity === draft.steps[0]?.entity)
  const breakdown = h('input', { 'data-field': 'breakdown', list: 'breakdown-fields', value: draft.breakdown, placeholder: 'none, or properties.source', maxlength: 211 })
  breakdown.addEventListener('input', () => { draft.breakdown = breakdown.value; changed() })
  const range = rangePicker(draft.range, () => { draft.range = range.value()!; changed() })
  replace(root,
    h('fieldset', {}, h('legend', {}, `Steps (${LIMITS.minSteps} to ${LIMITS.steps}, in order)`),
      h('ol', { class: 'funnel-steps-form' }, steps),
      draft.steps.length < LIMITS.steps
        ? h('button', { type: 'button', class: 'link', 'data-action': 'add-step', onclick: () => { draft.steps.push(newStep(draft.steps.at(-1)?.entity ?? entities[0]?.entity ?? '')); redraw() } }, '+ Add step')
        : null),
    h('datalist', { id: 'breakdown-fields' }, (first ? fieldsOf(first) : []).map((name) => h('option', { value: name }))),
    h('div', { class: 'form-row' },
      h('label', {}, 'Joined on', identity),
      h('label', {}, `Window (days, 1 to ${LIMITS.windowDays})`, windowDays),
      h('label', {}, 'Breakdown', breakdown),
      h('label', { class: 'range-label' }, 'Range', range.element)),
  )
}
