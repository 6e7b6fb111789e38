// The query builder of a metric insight, over the catalog: entity, metrics, dimensions, filters, bucket, time zone
// and range. It edits a MetricDraft in place and says when it changed; the builder previews and saves.
import { h, replace } from '../../dom'
import { type Catalog, type Entity, fieldsOf } from './catalog'
import { filterRows } from './filters'
import { BUCKETS, LIMITS, type MetricDraft } from './query'
import { rangePicker } from './range'

/** Entities a metric query can run over: those with a time column (the range needs one). */
export const chartable = (catalog: Catalog) => catalog.entities.filter((entity) => entity.timeColumn !== null)

/** A new metric draft: the first chartable entity's first metric, per day over the last 7 days, in the reader's zone. */
export function newMetricDraft(catalog: Catalog): MetricDraft {
  const entity = chartable(catalog)[0]
  return {
    entity: entity?.entity ?? '', metrics: entity?.metrics[0] ? [entity.metrics[0].name] : [], dimensions: [], filters: [],
    bucket: 'day', timezone: Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC', range: { from: '-7d' },
  }
}

const ZONES = (() => {
  try {
    return Intl.supportedValuesOf('timeZone')
  } catch {
    return ['UTC']
  }
})()

/** Draws the form into `root` (again on each structural change); `changed` on every edit. */
export function drawMetricForm(root: HTMLElement, draft: MetricDraft, catalog: Catalog, changed: () => void): void {
  const redraw = () => {
    drawMetricForm(root, draft, catalog, changed)
    changed()
  }
  const entities = chartable(catalog)
  const entity: Entity | undefined = entities.find((candidate) => candidate.entity === draft.entity)
  const fields = `fields-${draft.entity}`
  const entitySelect = h('select', { 'data-field': 'entity' }, entities.map((candidate) => h('option', { value: candidate.entity }, `${candidate.entityName} (${candidate.entity})`)))
  entitySelect.value = draft.entity
  entitySelect.addEventListener('change', () => {
    const next = entities.find((candidate) => candidate.entity === entitySelect.value)!
    Object.assign(draft, { entity: next.entity, metrics: next.metrics[0] ? [next.metrics[0].name] : [], dimensions: [], filters: [] })
    redraw()
  })
  const boxes: HTMLInputElement[] = []
  const limitBoxes = () => { for (const box of boxes) box.disabled = !box.checked && draft.metrics.length >= LIMITS.metrics }
  const metrics = (entity?.metrics ?? []).map((metric) => {
    const box = h('input', { type: 'checkbox', 'data-metric': metric.name, checked: draft.metrics.includes(metric.name) })
    boxes.push(box)
    box.addEventListener('change', () => {
      // In the catalog's order, so the same choice is the same query.
      const chosen = new Set(draft.metrics)
      if (box.checked) chosen.add(metric.name)
      else chosen.delete(metric.name)
      draft.metrics = entity!.metrics.map((m) => m.name).filter((name) => chosen.has(name))
      limitBoxes()
      changed()
    })
    return h('label', { class: 'check', title: metric.description }, box, h('span', {}, metric.name), h('span', { class: 'muted' }, metric.type))
  })
  limitBoxes()
  const dimensions = draft.dimensions.map((dimension, index) => {
    const input = h('input', { 'data-field': 'dimension', 'aria-label': `Dimension ${index + 1}`, list: fields, value: dimension, placeholder: 'event or properties.plan', maxlength: 211 })
    input.addEventListener('input', () => { draft.dimensions[index] = input.value; changed() })
    return h('div', { class: 'dimension-row' }, input,
      h('button', { type: 'button', class: 'secondary small', 'data-action': 'remove-dimension', onclick: () => { draft.dimensions.splice(index, 1); redraw() } }, 'Remove'))
  })
  const bucket = h('select', { 'data-field': 'bucket' }, h('option', { value: '' }, 'None (totals)'), BUCKETS.map((name) => h('option', { value: name }, name)))
  bucket.value = draft.bucket
  const timezone = h('input', { 'data-field': 'timezone', list: 'time-zones', value: draft.timezone, maxlength: 64 })
  const zoneLabel = h('label', {}, 'Time zone', timezone)
  zoneLabel.hidden = !draft.bucket
  bucket.addEventListener('change', () => {
    draft.bucket = bucket.value as MetricDraft['bucket']
    zoneLabel.hidden = !draft.bucket
    changed()
  })
  timezone.addEventListener('input', () => { draft.timezone = timezone.value; changed() })
  const range = rangePicker(draft.range, () => { draft.range = range.value()!; changed() })
  replace(root,
    h('datalist', { id: fields }, (entity ? fieldsOf(entity) : []).map((name) => h('option', { value: name }))),
    h('datalist', { id: 'time-zones' }, ZONES.map((zone) => h('option', { value: zone }))),
    h('label', {}, 'Entity', entitySelect),
    h('fieldset', { class: 'metrics-choice' }, h('legend', {}, `Metrics (1 to ${LIMITS.metrics})`), metrics),
    h('fieldset', {}, h('legend', {}, `Break down by (at most ${LIMITS.dimensions})`), dimensions,
      draft.dimensions.length < LIMITS.dimensions
        ? h('button', { type: 'button', class: 'link', 'data-action': 'add-dimension', onclick: () => { draft.dimensions.push(''); redraw() } }, '+ Add dimension')
        : null),
    h('fieldset', {}, h('legend', {}, 'Filters'), filterRows({ filters: draft.filters, max: LIMITS.filters, fields, changed, redraw, name: 'query' })),
    h('div', { class: 'form-row' }, h('label', {}, 'Bucket', bucket), zoneLabel, h('label', { class: 'range-label' }, 'Range', range.element)),
  )
}
