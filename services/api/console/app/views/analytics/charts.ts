// An insight's result drawn in a tile: a time series as lines, a breakdown as bars (uPlot on a canvas), a funnel as
// steps, a metric with neither as big numbers. Every chart has its numbers beside it in text (totals and a data table),
// so a reader, a screen reader and a test can read exactly what the API answered.
import uPlot from 'uplot'
import type { FunnelResult, FunnelStepResult } from '../../../../analytics/semantic/funnel'
import type { MetricResult } from '../../../../analytics/semantic/metric-query'
import { h } from '../../dom'

// The API's own result types (type-only: nothing of the server is bundled), so a change there fails the typecheck here.
export type { FunnelResult, MetricResult }
export type StepResult = FunnelStepResult
export type InsightRun =
  | { insight_id: string; kind: 'metric'; result: MetricResult }
  | { insight_id: string; kind: 'funnel'; result: FunnelResult }

/**
 * Metric types by entity, then metric name (from the catalog): a total is shown only for counts and sums, where adding
 * buckets means something. Two entities may name different metrics alike (`value` a sum here, an average there).
 * Undefined when the catalog could not be read: then no type is known and every line shows its latest value.
 */
export type MetricTypes = Map<string, Map<string, string>> | undefined

/** What a drawn chart holds on to: destroyed when its tile is redrawn or the view is left. */
export interface Drawn { destroy(): void }

// A tile is no place for ten thousand rows (the API's most): the table shows the first ones and says so.
const MAX_TABLE_ROWS = 500
// Nor for a line per value of a property with thousands of them: the lines with the largest totals are drawn (one
// colour each), and the tile says how many more there are.
export const MAX_LINES = 8
const COLORS = ['#3a5bd9', '#e8710a', '#12a150', '#c5221f', '#8e44ad', '#00838f', '#b08800', '#5f6368']
const color = (index: number) => COLORS[index % COLORS.length]!

const NUMBER = new Intl.NumberFormat('en-US', { maximumFractionDigits: 4 })
/** A value as the page shows it: grouped digits, at most four decimals; no value is a dash. */
export const formatNumber = (value: string | number | null | undefined) =>
  value === null || value === undefined || value === '' ? '—' : typeof value === 'number' ? NUMBER.format(value) : value
const PERCENT = new Intl.NumberFormat('en-US', { style: 'percent', maximumFractionDigits: 1 })
export const formatPercent = (value: number | null) => (value === null ? '—' : PERCENT.format(value))

/** A bucket's start as a date (and hour) in the query's own time zone, where its buckets were cut. */
export function formatBucket(iso: string, bucket: string | null, timeZone: string): string {
  const parts = Object.fromEntries(new Intl.DateTimeFormat('en-US', {
    timeZone, year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', hourCycle: 'h23',
  }).formatToParts(new Date(iso)).map((part) => [part.type, part.value]))
  const date = `${parts.year}-${parts.month}-${parts.day}`
  return bucket === 'hour' ? `${date} ${parts.hour}:${parts.minute}` : date
}

const AXIS_FORMATS: Record<string, Intl.DateTimeFormatOptions> = {
  hour: { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' },
  day: { month: 'short', day: 'numeric' },
  week: { month: 'short', day: 'numeric' },
  month: { month: 'short', year: 'numeric' },
}
const axisLabel = (seconds: number, bucket: string | null, timeZone: string) =>
  new Intl.DateTimeFormat('en-US', { ...AXIS_FORMATS[bucket ?? 'day'], timeZone }).format(new Date(seconds * 1000))

/** Draws an insight's run into `root` (which the tile sizes); returns what to destroy later. */
export function drawInsight(root: HTMLElement, run: InsightRun, types: MetricTypes): Drawn {
  if (run.kind === 'funnel') {
    root.append(funnelSteps(run.result))
    return { destroy() {} }
  }
  const result = run.result
  // Partial numbers are said on the chart itself, not only in the folded table.
  if (result.truncated) {
    root.append(h('p', { class: 'truncated', role: 'note', 'data-testid': 'truncated' },
      `Partial: more rows matched than the query's limit (${result.rows.length} shown); totals count only these.`))
  }
  if (result.bucket) return timeSeries(root, result, types)
  if (result.dimensions.length) return breakdown(root, result)
  root.append(h('div', { class: 'big-numbers', 'data-chart': 'numbers' }, result.metrics.map((metric) =>
    h('div', { class: 'big-number' },
      h('span', { class: 'value', 'data-metric': metric }, formatNumber(result.rows[0]?.[metric] ?? null)),
      h('span', { class: 'label' }, metric)))))
  return { destroy() {} }
}

interface Series { label: string; metric: string; values: (number | null)[] }

const dimensionLabel = (row: Record<string, unknown>, dimensions: string[]) =>
  dimensions.map((dimension) => (row[dimension] === null || row[dimension] === undefined ? '(none)' : String(row[dimension]))).join(' · ')

function timeSeries(root: HTMLElement, result: MetricResult, types: MetricTypes): Drawn {
  const buckets = [...new Set(result.rows.map((row) => String(row.bucket)))].sort()
  const index = new Map(buckets.map((bucket, i) => [bucket, i]))
  // One line per metric and combination of dimension values, in the order the rows first name them.
  const series = new Map<string, Series>()
  for (const row of result.rows) {
    const combination = dimensionLabel(row, result.dimensions)
    for (const metric of result.metrics) {
      const key = JSON.stringify([metric, combination])
      let line = series.get(key)
      if (!line) {
        const label = [result.metrics.length > 1 || !combination ? metric : '', combination].filter(Boolean).join(' · ')
        line = { label, metric, values: buckets.map(() => null) }
        series.set(key, line)
      }
      const value = row[metric]
      line.values[index.get(String(row.bucket))!] = value === null || value === undefined ? null : Number(value)
    }
  }
  const all = [...series.values()]
  // The largest totals first (stable, so equal ones keep the rows' order); only the first MAX_LINES are drawn.
  const ranked = all.map((line) => ({ line, rank: line.values.reduce<number>((sum, value) => sum + (value ?? 0), 0) }))
  const lines = all.length > MAX_LINES ? ranked.sort((a, b) => b.rank - a.rank).slice(0, MAX_LINES).map(({ line }) => line) : all
  const xs = buckets.map((bucket) => Date.parse(bucket) / 1000)
  const chart = h('div', { class: 'chart', 'data-chart': 'lines' })
  const legend = h('ul', { class: 'legend' }, lines.map((line, i) => {
    // Unknown type (no catalog, or a metric it does not list): the latest value, never a sum of averages or ratios.
    const type = types?.get(result.entity)?.get(line.metric)
    const additive = type === 'count' || type === 'sum'
    const shown = additive
      ? line.values.reduce<number>((sum, value) => sum + (value ?? 0), 0)
      : [...line.values].reverse().find((value) => value !== null) ?? null
    return h('li', { 'data-series': line.label },
      swatch(i), h('span', { class: 'series-label' }, line.label || line.metric), ' ',
      h('span', { class: 'muted' }, additive ? 'total ' : 'latest '),
      h('strong', { class: 'series-total' }, formatNumber(shown)))
  }))
  const hidden = all.length - lines.length
  const more = hidden
    ? h('p', { class: 'muted more-series', 'data-testid': 'more-series' }, `${hidden} more lines not drawn (smaller totals); run the insight through the API for all ${all.length}.`)
    : null
  const data = dataTable(
    ['bucket', ...lines.map((line) => line.label || line.metric)],
    buckets.map((bucket, row) => ({ key: bucket, cells: [formatBucket(bucket, result.bucket, result.timezone), ...lines.map((line) => formatNumber(line.values[row]))] })),
    result.truncated,
  )
  root.append(chart, legend, ...(more ? [more] : []), data)
  const plot = new uPlot({
    ...size(chart),
    legend: { show: false },
    tzDate: (seconds) => uPlot.tzDate(new Date(seconds * 1000), result.timezone),
    scales: { x: { time: true }, y: { range: (_u, min, max) => [Math.min(0, min), max > 0 ? max * 1.1 : 1] } },
    axes: [{
      ...axis(),
      // A tick per bucket while they fit; each labelled as its bucket reads in the query's zone (Nov 2, not 12am).
      ...(xs.length <= 16 ? { splits: () => xs } : {}),
      values: (_u, splits) => splits.map((split) => axisLabel(split, result.bucket, result.timezone)),
    }, valueAxis()],
    series: [{}, ...lines.map((line, i) => ({
      label: line.label || line.metric, stroke: color(i), width: 2,
      points: { show: buckets.length <= 40, size: 5, fill: color(i) },
    }))],
  }, [xs, ...lines.map((line) => line.values)], chart)
  return follow(chart, plot)
}

function breakdown(root: HTMLElement, result: MetricResult): Drawn {
  const labels = result.rows.map((row) => dimensionLabel(row, result.dimensions))
  // Bars of the first metric; every metric is in the table below.
  const metric = result.metrics[0]!
  const values = result.rows.map((row) => {
    const value = row[metric]
    return value === null || value === undefined ? null : Number(value)
  })
  const chart = h('div', { class: 'chart', 'data-chart': 'bars' })
  const data = dataTable(
    [...result.dimensions, ...result.metrics],
    result.rows.map((row, i) => ({
      key: labels[i]!,
      cells: [...result.dimensions.map((dimension) => row[dimension] === null ? '(none)' : String(row[dimension])), ...result.metrics.map((name) => formatNumber(row[name] ?? null))],
    })),
    result.truncated,
    true,
  )
  root.append(chart, data)
  const plot = new uPlot({
    ...size(chart),
    legend: { show: false },
    cursor: { show: false },
    scales: { x: { time: false, range: [-0.5, Math.max(labels.length, 1) - 0.5] }, y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] } },
    axes: [
      // At most about 24 labels, every n-th bar's when there are more bars.
      { ...axis(), splits: () => labels.map((_, i) => i).filter((i) => i % Math.ceil(labels.length / 24) === 0), values: (_u, splits) => splits.map((split) => labels[split] ?? ''), grid: { show: false } },
      valueAxis(),
    ],
    series: [{}, { label: metric, fill: `${color(0)}cc`, stroke: color(0), paths: uPlot.paths.bars!({ size: [0.6, 80] }), points: { show: false } }],
  }, [labels.map((_, i) => i), values], chart)
  return follow(chart, plot)
}

function funnelSteps(result: FunnelResult): HTMLElement {
  const first = result.steps[0]?.count ?? 0
  const list = h('ol', { class: 'funnel', 'data-chart': 'funnel' }, result.steps.map((step) => {
    const bar = h('div', { class: 'funnel-bar' })
    bar.style.width = `${first > 0 ? (step.count / first) * 100 : 0}%` // zero is drawn as zero
    return h('li', { 'data-step': step.step },
      h('div', { class: 'funnel-head' },
        h('span', { class: 'funnel-event' }, step.event),
        h('span', {},
          h('strong', { class: 'funnel-count' }, formatNumber(step.count)), ' ',
          h('span', { class: 'muted' }, step.conversionFromPrevious === null ? 'entered' : 'from previous '),
          step.conversionFromPrevious === null ? null : h('span', { class: 'funnel-conversion' }, formatPercent(step.conversionFromPrevious)),
          step.conversionFromFirst === null ? null : h('span', { class: 'muted' }, ' · overall ', h('span', { class: 'funnel-overall' }, formatPercent(step.conversionFromFirst))))),
      h('div', { class: 'funnel-track' }, bar))
  }))
  const parts: HTMLElement[] = [list]
  if (result.breakdown?.length) {
    parts.push(dataTable(['value', ...result.steps.map((step) => step.event)],
      result.breakdown.map((value) => ({ key: String(value.value), cells: [value.value ?? '(none)', ...value.steps.map((step) => formatNumber(step.count))] })), false, true))
  }
  return h('div', { class: 'funnel-wrap' }, parts)
}

function swatch(index: number): HTMLElement {
  const element = h('span', { class: 'swatch', 'aria-hidden': 'true' })
  element.style.background = color(index)
  return element
}

/** The numbers behind a chart: open by default for a breakdown (a few rows), folded for a long time series. */
function dataTable(headers: string[], rows: { key: string; cells: string[] }[], truncated: boolean, open = false): HTMLElement {
  const shown = rows.slice(0, MAX_TABLE_ROWS)
  return h('details', { class: 'data', open },
    h('summary', {}, `Data (${rows.length} rows${truncated ? ', truncated by the API' : ''})`),
    h('table', { class: 'data-table' },
      h('thead', {}, h('tr', {}, headers.map((header) => h('th', {}, header)))),
      h('tbody', {}, shown.map((row) => h('tr', { 'data-key': row.key }, row.cells.map((cell) => h('td', {}, cell)))))),
    rows.length > shown.length ? h('p', { class: 'muted' }, `The first ${shown.length} rows; run the insight through the API for all ${rows.length}.`) : null)
}

const AXIS_FONT = '11px system-ui, sans-serif'
const axis = (): uPlot.Axis => ({ stroke: '#687083', grid: { stroke: '#eef0f4', width: 1 }, ticks: { stroke: '#dfe3ea', width: 1 }, font: AXIS_FONT })

// uPlot gives a y axis 50 px whatever its labels, so "10,000" and up lost their first digits at the canvas's edge.
const TICK_AND_GAP = 10 + 5 // uPlot's default tick length and the gap between tick and label, in CSS pixels
let measuring: CanvasRenderingContext2D | null | undefined

/** The width in CSS pixels of the widest label, in the axis font. */
function labelWidth(labels: readonly string[]): number {
  measuring ??= document.createElement('canvas').getContext('2d')
  if (!measuring) return Math.max(0, ...labels.map((label) => label.length * 7)) // no canvas: a generous estimate
  measuring.font = AXIS_FONT
  return Math.max(0, ...labels.map((label) => measuring!.measureText(label).width))
}

/** A y axis sized to its widest label and written as the page writes numbers (grouped digits). */
const valueAxis = (): uPlot.Axis => ({
  ...axis(),
  values: (_u, splits) => splits.map((split) => formatNumber(split)),
  size: (_u, values) => Math.ceil(TICK_AND_GAP + labelWidth(values ?? []) + 4),
})

function size(element: HTMLElement): { width: number; height: number } {
  return { width: Math.max(120, element.clientWidth || 300), height: Math.max(80, element.clientHeight || 160) }
}

/** Keeps the canvas the size of its tile as the tile is resized. */
function follow(element: HTMLElement, plot: uPlot): Drawn {
  // Resized on the next frame, not inside the observer's callback, so a resize never loops within one frame.
  let frame = 0
  const observer = new ResizeObserver(() => {
    cancelAnimationFrame(frame)
    frame = requestAnimationFrame(() => {
      const next = size(element)
      if (next.width !== plot.width || next.height !== plot.height) plot.setSize(next)
    })
  })
  observer.observe(element)
  return { destroy() { cancelAnimationFrame(frame); observer.disconnect(); plot.destroy() } }
}
