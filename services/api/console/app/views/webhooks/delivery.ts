// One delivery of an endpoint: every attempt with its status, time, error and the start of the answer; the payload
// sent; and Replay, which makes a new delivery of the same message (same webhook-id) and opens it.
import { api, describe } from '../../api'
import { h, replace, table, when } from '../../dom'
import { areaHref, go } from '../../router'
import type { Cleanup } from '../area'
import { actionButton } from '../mail/parts'
import { type Attempt, attemptSummary, deliveryBadge, type DeliveryDetail, labelCells, refreshWhile, type WebhookArea } from './parts'

/** The payload as indented JSON text (never markup). */
const payloadText = (payload: unknown) => JSON.stringify(payload, null, 2)

function attemptsTable(attempts: Attempt[]): HTMLElement {
  if (!attempts.length) return h('p', { class: 'muted empty' }, 'Not attempted yet: the webhooks process takes it within a moment.')
  return labelCells(table(attempts, [
    ['#', (a) => String(attempts.indexOf(a) + 1)],
    ['At', (a) => when(a.attemptedAt)],
    ['Answer', (a) => attemptSummary(a)],
    ['Error', (a) => (a.error ? h('span', { class: 'wh-long' }, a.error) : h('span', { class: 'muted' }, '—'))],
    ['Response', (a) => (a.responseExcerpt ? h('code', { class: 'wh-long' }, a.responseExcerpt) : h('span', { class: 'muted' }, 'empty'))],
  ], { class: 'wh-table wh-attempts', 'data-testid': 'attempts' }))
}

/** #/p/{id}/{area}/webhooks/{endpointId}/deliveries/{deliveryId}: read again while the delivery is pending. */
export async function deliveryView(root: HTMLElement, area: WebhookArea, productId: string, endpointId: string, id: string): Promise<Cleanup> {
  const back = h('p', {}, h('a', { href: areaHref(productId, area, 'webhooks', endpointId) }, '← The endpoint and its deliveries'))
  const body = h('div', { class: 'wh-delivery', 'data-testid': 'delivery', 'data-delivery-id': id }, h('p', { class: 'muted' }, 'Loading the delivery…'))
  const error = h('p', { class: 'error', role: 'alert' })
  const replay = actionButton('Replay', 'Replaying…', async () => {
    replace(error)
    try {
      const made = await api.run<DeliveryDetail>(`${area}_webhooks_deliveries_replay`, { path: { id: endpointId, deliveryId: id } })
      go(areaHref(productId, area, 'webhooks', endpointId, 'deliveries', made.id))
    } catch (failure) {
      replace(error, describe(failure))
    }
  }, { 'data-testid': 'replay' })

  const read = async (): Promise<boolean> => {
    let delivery: DeliveryDetail
    try {
      delivery = await api.run<DeliveryDetail>(`${area}_webhooks_deliveries_get`, { path: { id: endpointId, deliveryId: id } })
    } catch (failure) {
      replace(body, h('p', { class: 'error', role: 'alert', 'data-testid': 'delivery-error' }, describe(failure)))
      return false
    }
    replace(body,
      h('section', { class: 'card' },
        h('header', { class: 'wh-head' }, h('h2', {}, h('code', {}, delivery.eventKind)), deliveryBadge(delivery),
          h('span', { class: 'spacer' }), replay),
        error,
        h('dl', { class: 'wh-facts' },
          h('dt', {}, 'webhook-id'), h('dd', {}, h('code', { 'data-testid': 'message-id' }, delivery.messageId)),
          h('dt', {}, 'Created'), h('dd', {}, when(delivery.createdAt)),
          h('dt', {}, 'Attempts'), h('dd', { 'data-testid': 'attempt-count' }, String(delivery.attemptCount)),
          delivery.nextAttemptAt && [h('dt', {}, 'Next attempt'), h('dd', {}, when(delivery.nextAttemptAt))],
          delivery.replayOf && [h('dt', {}, 'Replays'), h('dd', {},
            h('a', { href: areaHref(productId, area, 'webhooks', endpointId, 'deliveries', delivery.replayOf), 'data-testid': 'replay-of' }, delivery.replayOf))])),
      h('section', { class: 'card' }, h('h2', {}, 'Attempts'), attemptsTable(delivery.attempts)),
      h('section', { class: 'card' }, h('h2', {}, 'Payload'), h('pre', { class: 'wh-payload' }, payloadText(delivery.payload))))
    return delivery.state === 'pending'
  }
  replace(root, back, body)
  const refresh = refreshWhile(read)
  await refresh.restart()
  return refresh.stop
}
