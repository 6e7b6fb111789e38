// What the webhooks views share: the shapes the webhook operations answer, a list page in either area's shape, an
// endpoint's state and a delivery's as badges, one attempt as a person reads it, and a refresh while work is pending.
import { api } from '../../api'
import { h } from '../../dom'
import type { WebhookArea } from '../../../../../../shared/webhooks/events'

export type { WebhookArea }

export interface Endpoint {
  id: string; url: string; description: string | null; eventKinds: string[]; enabled: boolean; disabledReason: string | null
  secretPrefix: string; previousSecretExpiresAt: string | null; createdAt: string; updatedAt: string
}
export interface WithSecret extends Endpoint { secret: string }
export interface Attempt { attemptedAt: string; durationMs: number; statusCode: number | null; error: string | null; responseExcerpt: string }
export interface Delivery {
  id: string; messageId: string; eventKind: string; state: 'pending' | 'succeeded' | 'failed'; attemptCount: number
  nextAttemptAt: string | null; replayOf: string | null; createdAt: string; updatedAt: string; lastAttempt: Attempt | null
}
export interface DeliveryDetail extends Delivery { payload: unknown; attempts: Attempt[] }

/** The member a list of the area keeps its items under: Mail lists as Resend (`data`), Realtime by name. */
const MEMBER: Record<WebhookArea, { endpoints: string; deliveries: string }> = {
  mail: { endpoints: 'data', deliveries: 'data' },
  realtime: { endpoints: 'webhooks', deliveries: 'deliveries' },
}
export const listMember = (area: WebhookArea, list: 'endpoints' | 'deliveries') => MEMBER[area][list]

/** One page of a list operation of `area`, as items and whether more follow. */
export async function listPage<T>(area: WebhookArea, list: 'endpoints' | 'deliveries', operationId: string,
  options: { path?: Record<string, string>; limit: number; after?: string }): Promise<{ items: T[]; hasMore: boolean }> {
  const page = await api.run<Record<string, unknown> & { has_more: boolean }>(operationId, {
    path: options.path, query: { limit: options.limit, after: options.after },
  })
  return { items: page[listMember(area, list)] as T[], hasMore: page.has_more }
}

/**
 * Gives each cell of `table` its column's title as `data-label`, which a narrow window shows before the cell once the
 * rows are stacked (area.css); answers the table.
 */
export function labelCells(table: HTMLTableElement): HTMLTableElement {
  const titles = [...table.tHead?.rows[0]?.cells ?? []].map((cell) => cell.textContent ?? '')
  for (const row of table.tBodies[0]?.rows ?? []) {
    for (const cell of row.cells) if (titles[cell.cellIndex]) cell.setAttribute('data-label', titles[cell.cellIndex]!)
  }
  return table
}

/** A state as a coloured word: good, bad, or still on its way. */
export function stateBadge(state: string, tone: 'good' | 'bad' | 'waiting'): HTMLElement {
  return h('span', { class: `wh-badge ${tone}`, 'data-state': state }, state)
}

/** An endpoint is enabled, disabled by the platform (with why), or disabled by the product. */
export function endpointState(endpoint: Endpoint): HTMLElement {
  if (endpoint.enabled) return h('span', { class: 'wh-state' }, stateBadge('enabled', 'good'))
  return h('span', { class: 'wh-state' }, stateBadge('disabled', 'bad'),
    h('span', { class: 'wh-reason', 'data-testid': 'disabled-reason' }, endpoint.disabledReason ?? 'disabled in the console or by the API'))
}

const DELIVERY_TONE = { succeeded: 'good', failed: 'bad', pending: 'waiting' } as const
export const deliveryBadge = (delivery: Delivery) => stateBadge(delivery.state, DELIVERY_TONE[delivery.state])

/** An attempt in one line: its status (or why none came) and how long it took. */
export function attemptSummary(attempt: Attempt | null): HTMLElement {
  if (!attempt) return h('span', { class: 'muted' }, 'not attempted yet')
  const good = attempt.statusCode !== null && attempt.statusCode >= 200 && attempt.statusCode < 300
  return h('span', { class: 'wh-attempt' },
    attempt.statusCode !== null ? h('code', { class: good ? 'ok' : 'error', 'data-testid': 'status-code' }, String(attempt.statusCode)) : h('span', { class: 'error' }, 'no answer'),
    ` in ${attempt.durationMs} ms`)
}

/** How often a view with pending deliveries reads them again: the webhooks process attempts within a poll or two. */
export const REFRESH_MS = 1000

/**
 * Reads with `read` now and again every REFRESH_MS while it answers true (a delivery still pending); `restart` begins
 * again at once (after a replay or a test event), `stop` ends it when the view goes. A restart leaves the chain it
 * replaces to die at its next step, so two never run side by side.
 */
export function refreshWhile(read: () => Promise<boolean>): { restart: () => Promise<void>; stop: () => void } {
  let timer: ReturnType<typeof setTimeout> | undefined
  let chain = 0
  const run = async (mine: number): Promise<void> => {
    let again = false
    try {
      again = await read()
    } catch {
      // `read` shows its own failures; an unexpected one stops the refresh rather than repeat it every second
    }
    if (mine === chain && again) timer = setTimeout(() => void run(mine), REFRESH_MS)
  }
  return {
    restart: () => { clearTimeout(timer); return run(++chain) },
    stop: () => { chain++; clearTimeout(timer) },
  }
}
