// The builder's live preview: the query being built, run with analytics_metric_query or analytics_funnel_run a moment
// after the last edit, and drawn in a tile exactly as a dashboard tile draws its insight (charts.ts drawInsight).
// Only the answer to the latest query is drawn; one refused 429 (the product's two queries at once) is run again.
import { api, ConsoleApiError, describe } from '../../api'
import { h, replace } from '../../dom'
import { drawInsight, type Drawn, type MetricTypes } from './charts'
import { retryPause } from './runner'

/** Quiet time after an edit before the preview runs: typing a name runs one query, not one per key. */
const SETTLE_MS = 400
const ATTEMPTS = 3
const OPERATIONS = { metric: 'analytics_metric_query', funnel: 'analytics_funnel_run' } as const

export type PreviewInput = { kind: 'metric' | 'funnel'; query: unknown } | { incomplete: string }

export class Preview {
  private readonly title = h('h3', { class: 'tile-title' }, 'Preview')
  private readonly body = h('div', { class: 'tile-body' })
  /** A tile as a dashboard draws one, four rows tall (the size a new tile is added at). */
  readonly element = h('article', { class: 'tile preview-tile', 'data-testid': 'preview' },
    h('header', { class: 'tile-head' }, this.title), this.body)
  private drawn: Drawn | undefined
  private timer: ReturnType<typeof setTimeout> | undefined
  private latest = 0
  private stopped = false

  constructor(private readonly types: MetricTypes) {}

  /** Runs `input` once the edits settle; an incomplete query says what it lacks instead. */
  show(input: PreviewInput, title: string): void {
    replace(this.title, title || 'Preview')
    clearTimeout(this.timer)
    const turn = ++this.latest
    if ('incomplete' in input) {
      this.draw(turn, 'incomplete', h('p', { class: 'muted loading' }, input.incomplete))
      return
    }
    this.element.dataset.state = 'waiting'
    this.timer = setTimeout(() => void this.run(turn, input), SETTLE_MS)
  }

  stop(): void {
    this.stopped = true
    clearTimeout(this.timer)
    this.drawn?.destroy()
  }

  private async run(turn: number, input: { kind: 'metric' | 'funnel'; query: unknown }): Promise<void> {
    this.element.dataset.state = 'running'
    for (let attempt = 1; ; attempt++) {
      try {
        const result = await api.run(OPERATIONS[input.kind], { body: input.query })
        if (turn !== this.latest || this.stopped) return
        this.draw(turn, 'drawn')
        this.body.dataset.kind = input.kind
        this.drawn = drawInsight(this.body, { insight_id: '', kind: input.kind, result } as never, this.types)
        this.element.dataset.query = JSON.stringify(input.query) // what is drawn: a test waits for the query it built
        return
      } catch (error) {
        if (turn !== this.latest || this.stopped) return
        if (error instanceof ConsoleApiError && error.status === 429 && attempt < ATTEMPTS) {
          await new Promise((resolve) => setTimeout(resolve, retryPause(error, attempt)))
          if (turn !== this.latest || this.stopped) return
          continue
        }
        this.draw(turn, 'error', h('p', { class: 'error', role: 'alert', 'data-testid': 'preview-error' }, describe(error)))
        return
      }
    }
  }

  private draw(turn: number, state: string, ...content: HTMLElement[]): void {
    if (turn !== this.latest) return
    this.drawn?.destroy()
    this.drawn = undefined
    delete this.body.dataset.kind
    delete this.element.dataset.query
    this.element.dataset.state = state
    replace(this.body, content)
  }
}
