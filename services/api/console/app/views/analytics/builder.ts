// An insight made or edited in the page: a metric query (metric-form.ts) or a funnel (funnel-form.ts) over the
// catalog, previewed live as its tile will draw it (preview.ts), saved with analytics_insight_create or _update.
// Routes: …/analytics/insights/new, …/analytics/insights/{id}.
import { api, describe } from '../../api'
import { h, replace, when } from '../../dom'
import { areaHref } from '../../router'
import type { Cleanup } from '../area'
import { type Catalog, metricTypesOf, readCatalog } from './catalog'
import { drawFunnelForm, newFunnelDraft, sharedIdentities } from './funnel-form'
import { drawMetricForm, newMetricDraft } from './metric-form'
import { Preview, type PreviewInput } from './preview'
import {
  type Funnel, type FunnelDraft, funnelDraftOf, funnelOf, keepUnshown, type MetricDraft, metricDraftOf, metricQueryOf, type MetricQuery,
} from './query'

export interface Insight {
  id: string
  name: string
  description: string | null
  kind: 'metric' | 'funnel'
  query: unknown
  created_at: string
  updated_at: string
}

const MAX_NAME = 120
const MAX_DESCRIPTION = 2000
const EVENTS_LIST = 'event-names'
/** Event names offered while typing a funnel step: the most common ones of the last 30 days. */
const EVENT_SUGGESTIONS = 200

/** Draws the builder for a new insight (no id) or the insight `insightId`; the cleanup stops its preview. */
export async function insightBuilder(root: HTMLElement, productId: string, insightId?: string): Promise<Cleanup> {
  replace(root, h('p', { class: 'muted' }, 'Loading the catalog…'))
  const [catalog, insight] = await Promise.all([
    readCatalog(),
    insightId ? api.run<Insight>('analytics_insight_get', { path: { id: insightId } }) : undefined,
  ])
  const builder = new Builder(root, productId, catalog, insight)
  builder.draw()
  void builder.suggestEvents()
  return () => builder.stop()
}

class Builder {
  private kind: 'metric' | 'funnel'
  private metric: MetricDraft
  private funnel: FunnelDraft
  private readonly preview: Preview
  private readonly form = h('div', { class: 'query-form', 'data-testid': 'query-form' })
  private readonly name: HTMLInputElement
  private readonly description: HTMLTextAreaElement
  private readonly status = h('p', { class: 'builder-status', role: 'status', 'data-testid': 'builder-status' })
  private readonly events = h('datalist', { id: EVENTS_LIST })
  private saving = false

  constructor(private root: HTMLElement, private productId: string, private catalog: Catalog, private insight: Insight | undefined) {
    this.kind = insight?.kind ?? 'metric'
    this.metric = insight?.kind === 'metric' ? metricDraftOf(insight.query as MetricQuery) : newMetricDraft(catalog)
    this.funnel = insight?.kind === 'funnel' ? funnelDraftOf(insight.query as Funnel) : newFunnelDraft(catalog)
    this.preview = new Preview(metricTypesOf(catalog))
    this.name = h('input', { 'data-field': 'name', required: true, maxlength: MAX_NAME, value: insight?.name ?? '', placeholder: 'Signups per day' })
    this.description = h('textarea', { 'data-field': 'description', rows: 2, maxlength: MAX_DESCRIPTION, placeholder: 'What it shows, for whom' }, insight?.description ?? '')
    this.name.addEventListener('input', () => this.changed())
  }

  stop(): void {
    this.preview.stop()
  }

  draw(): void {
    const heading = this.insight ? `Edit insight: ${this.insight.name}` : 'New insight'
    replace(this.root,
      h('nav', { class: 'crumbs' }, h('a', { href: areaHref(this.productId, 'analytics', 'insights') }, 'Insights'), ' / '),
      h('h1', { 'data-testid': 'builder-heading' }, heading),
      this.insight ? h('p', { class: 'muted' }, `${this.insight.kind === 'metric' ? 'Trend' : 'Funnel'} · updated ${when(this.insight.updated_at)}`) : this.kindChoice(),
      h('div', { class: 'builder' },
        h('section', { class: 'card builder-form' },
          h('label', {}, 'Name', this.name),
          h('label', {}, 'Description (optional)', this.description),
          this.form,
          h('div', { class: 'builder-actions' },
            h('button', { type: 'button', 'data-action': 'save-insight', onclick: () => void this.save() }, this.insight ? 'Save changes' : 'Save insight'),
            this.status)),
        h('section', { class: 'builder-preview' }, h('p', { class: 'muted' }, 'Preview, drawn as its tile will be:'), this.preview.element)),
      this.events)
    this.drawForm()
  }

  /** The most common event names lately, as suggestions for funnel steps and filters (a courtesy: none on failure). */
  async suggestEvents(): Promise<void> {
    const entity = this.catalog.entities.find((candidate) => candidate.entity === 'events' && candidate.dimensions.some((d) => d.name === 'event'))
    if (!entity) return
    const result = await api.run<{ rows: { event: string | null }[] }>('analytics_metric_query', {
      body: { entity: 'events', metrics: ['count'], dimensions: ['event'], range: { from: '-30d' }, limit: EVENT_SUGGESTIONS },
    }).catch(() => undefined)
    replace(this.events, (result?.rows ?? []).map((row) => row.event).filter((event) => event !== null).map((event) => h('option', { value: event! })))
  }

  private kindChoice(): HTMLElement {
    const choice = (kind: 'metric' | 'funnel', label: string) => h('button', {
      type: 'button', role: 'tab', class: this.kind === kind ? '' : 'secondary', 'aria-selected': String(this.kind === kind), 'data-kind-choice': kind,
      onclick: () => {
        this.kind = kind
        this.draw()
      },
    }, label)
    return h('div', { class: 'kind-choice', role: 'tablist' }, choice('metric', 'Trend'), choice('funnel', 'Funnel'))
  }

  private drawForm(): void {
    if (this.kind === 'metric') drawMetricForm(this.form, this.metric, this.catalog, () => this.changed())
    else drawFunnelForm(this.form, this.funnel, this.catalog, EVENTS_LIST, () => this.changed())
    this.changed()
  }

  /** The query as it stands, or what it still lacks. */
  private query(): PreviewInput {
    if (this.kind === 'metric') {
      if (!this.metric.entity) return { incomplete: 'The catalog has no entity to chart.' }
      if (!this.metric.metrics.length) return { incomplete: 'Pick at least one metric.' }
      const saved = this.insight?.kind === 'metric' ? this.insight.query : undefined
      return { kind: 'metric', query: keepUnshown(metricQueryOf(this.metric), saved as object | undefined) }
    }
    if (this.funnel.steps.some((step) => !step.event.trim())) return { incomplete: 'Name the event of every step.' }
    if (!sharedIdentities(this.catalog, this.funnel).length) return { incomplete: 'The steps\' entities share no identity to join on.' }
    const saved = this.insight?.kind === 'funnel' ? this.insight.query : undefined
    return { kind: 'funnel', query: keepUnshown(funnelOf(this.funnel), saved as object | undefined) }
  }

  private changed(): void {
    this.preview.show(this.query(), this.name.value.trim())
  }

  private async save(): Promise<void> {
    if (this.saving) return
    const input = this.query()
    if ('incomplete' in input) {
      this.say('error', `Not saved: ${input.incomplete}`)
      return
    }
    const name = this.name.value.trim()
    const description = this.description.value.trim() || null
    this.saving = true
    this.say('muted', 'Saving…')
    try {
      const saved = this.insight
        ? await api.run<Insight>('analytics_insight_update', { path: { id: this.insight.id }, body: { name, description, query: input.query } })
        : await api.run<Insight>('analytics_insight_create', { body: { name, description, kind: input.kind, query: input.query } })
      const created = !this.insight
      this.insight = saved
      // The address becomes the insight's without drawing the page again (no hashchange): the form stays as it is.
      if (created) history.replaceState(null, '', areaHref(this.productId, 'analytics', 'insights', saved.id))
      this.draw()
      this.say('ok', `Saved "${saved.name}".`, saved.id)
    } catch (error) {
      this.say('error', `Not saved: ${describe(error)}`)
    } finally {
      this.saving = false
    }
  }

  private say(kind: 'ok' | 'error' | 'muted', text: string, savedId?: string): void {
    this.status.className = `builder-status ${kind}`
    replace(this.status, text)
    if (savedId) this.status.dataset.savedId = savedId
    else delete this.status.dataset.savedId
  }
}
