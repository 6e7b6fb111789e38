// One webhook endpoint: its state and secret prefix, a test event, secret rotation (the new secret shown once) and
// deletion (both confirmed in the page), the form to change it, and its deliveries, read again while any is pending.
import { api, describe } from '../../api'
import { h, replace, table, when } from '../../dom'
import { areaHref, go } from '../../router'
import type { Cleanup } from '../area'
import { actionButton, confirmButton, onSubmit } from '../mail/parts'
import { kindPicker, secretBox } from './endpoints'
import { attemptSummary, type Delivery, deliveryBadge, type Endpoint, endpointState, labelCells, listPage, refreshWhile, type WebhookArea, type WithSecret } from './parts'

const PAGE_SIZE = 20

/** The endpoint's facts and its actions: a test event, rotation (its secret handed to `onRotated`) and deletion. */
function summary(area: WebhookArea, productId: string, endpoint: Endpoint, actions: { onTest: () => Promise<void>; onRotated: (secret: string) => void }): HTMLElement {
  const error = h('p', { class: 'error', role: 'alert' })
  const guarded = (action: () => Promise<void>) => async () => {
    replace(error)
    try {
      await action()
    } catch (failure) {
      replace(error, describe(failure))
    }
  }
  return h('section', { class: 'card wh-summary' },
    h('header', { class: 'wh-head' },
      h('h2', { class: 'wh-url', 'data-testid': 'endpoint-url' }, endpoint.url),
      endpointState(endpoint)),
    endpoint.description && h('p', { class: 'muted' }, endpoint.description),
    h('dl', { class: 'wh-facts' },
      h('dt', {}, 'Secret'), h('dd', {}, h('code', { 'data-testid': 'secret-prefix' }, `${endpoint.secretPrefix}…`),
        endpoint.previousSecretExpiresAt && h('span', { class: 'muted' }, ` (the previous one also signs until ${when(endpoint.previousSecretExpiresAt)})`)),
      h('dt', {}, 'Created'), h('dd', {}, when(endpoint.createdAt)),
      h('dt', {}, 'Updated'), h('dd', {}, when(endpoint.updatedAt))),
    h('div', { class: 'wh-actions' },
      actionButton('Send test event', 'Sending…', guarded(actions.onTest), { class: 'secondary', 'data-testid': 'send-test' }),
      confirmButton('Rotate secret', guarded(async () => {
        const rotated = await api.run<WithSecret>(`${area}_webhooks_rotate_secret`, { path: { id: endpoint.id } })
        actions.onRotated(rotated.secret)
      }), { 'data-testid': 'rotate' }),
      confirmButton('Delete endpoint', guarded(async () => {
        await api.run(`${area}_webhooks_delete`, { path: { id: endpoint.id } })
        go(areaHref(productId, area, 'webhooks'))
      }), { 'data-testid': 'delete' })),
    error)
}

/** The form that changes the endpoint: only what differs is sent. */
function editForm(area: WebhookArea, endpoint: Endpoint, onSaved: (endpoint: Endpoint) => void): HTMLElement {
  const error = h('p', { class: 'error', role: 'alert' })
  const url = h('input', { name: 'url', type: 'url', value: endpoint.url, required: true, maxlength: 2048, autocomplete: 'off' })
  const description = h('input', { name: 'description', value: endpoint.description ?? '', maxlength: 256, autocomplete: 'off' })
  const enabled = h('input', { type: 'checkbox', name: 'enabled', checked: endpoint.enabled })
  const kinds = kindPicker(area, endpoint.eventKinds)
  const form = h('form', { class: 'wh-form', 'data-testid': 'webhook-edit' },
    h('label', { class: 'wh-wide' }, 'URL', url), h('label', {}, 'Description', description),
    h('label', { class: 'wh-check' }, enabled, 'Enabled: events are delivered (enabling clears why it was disabled)'),
    kinds.element, h('div', {}, h('button', { type: 'submit' }, 'Save')), error)
  onSubmit(form, error, async () => {
    const eventKinds = kinds.read()
    if (!eventKinds) throw new Error('Choose at least one event kind')
    const changes: Record<string, unknown> = {}
    if (url.value.trim() !== endpoint.url) changes.url = url.value.trim()
    const label = description.value.trim() || null
    if (label !== endpoint.description) changes.description = label
    if (enabled.checked !== endpoint.enabled) changes.enabled = enabled.checked
    if (eventKinds.join() !== endpoint.eventKinds.join()) changes.eventKinds = eventKinds
    onSaved(await api.run<Endpoint>(`${area}_webhooks_update`, { path: { id: endpoint.id }, body: changes }))
  })
  return h('section', { class: 'card' }, h('h2', {}, 'Change the endpoint'), form)
}

/** #/p/{id}/{area}/webhooks/{endpointId}: the endpoint and its deliveries, newest first, a page at a time. */
export async function endpointView(root: HTMLElement, area: WebhookArea, productId: string, id: string): Promise<Cleanup | undefined> {
  const back = h('p', {}, h('a', { href: areaHref(productId, area, 'webhooks') }, '← All endpoints'))
  replace(root, back, h('p', { class: 'muted' }, 'Loading the endpoint…'))
  let endpoint: Endpoint
  try {
    endpoint = await api.run<Endpoint>(`${area}_webhooks_get`, { path: { id } })
  } catch (failure) {
    replace(root, back, h('p', { class: 'error', role: 'alert', 'data-testid': 'endpoint-error' }, describe(failure)))
    return
  }
  const top = h('div')
  const secret = h('div')
  const deliveries = h('div', { 'data-testid': 'deliveries' }, h('p', { class: 'muted' }, 'Loading deliveries…'))
  const newest = h('button', { type: 'button', class: 'secondary', 'data-testid': 'newest' }, 'Newest')
  const older = h('button', { type: 'button', class: 'secondary', 'data-testid': 'older' }, 'Older →')
  let after: string | undefined
  let shown: Delivery[] = []

  const read = async (): Promise<boolean> => {
    try {
      const { items, hasMore } = await listPage<Delivery>(area, 'deliveries', `${area}_webhooks_deliveries_list`, { path: { id }, limit: PAGE_SIZE, after })
      shown = items
      older.disabled = !hasMore
      newest.disabled = after === undefined
      replace(deliveries, items.length
        ? labelCells(table(items, [
          ['Created', (d) => when(d.createdAt)],
          ['Event', (d) => [h('code', {}, d.eventKind), d.replayOf && h('div', { class: 'muted small' }, 'replay')]],
          ['State', (d) => deliveryBadge(d)],
          ['Attempts', (d) => h('span', { 'data-testid': 'attempt-count' }, String(d.attemptCount))],
          ['Last attempt', (d) => attemptSummary(d.lastAttempt)],
          ['', (d) => h('a', { href: areaHref(productId, area, 'webhooks', id, 'deliveries', d.id), 'data-delivery-link': d.id }, 'Attempts →')],
        ], { class: 'wh-table wh-deliveries' }))
        : h('p', { class: 'muted empty' }, after ? 'No older deliveries.' : 'No deliveries yet: send a test event to see one.'))
      for (const row of deliveries.querySelectorAll('tbody tr')) row.setAttribute('data-delivery-id', items[(row as HTMLTableRowElement).sectionRowIndex]!.id)
      return items.some((d) => d.state === 'pending')
    } catch (failure) {
      // Not read again on its own (the endpoint may be gone): Newest or a test event asks again.
      replace(deliveries, h('p', { class: 'error', role: 'alert' }, describe(failure)))
      return false
    }
  }
  const refresh = refreshWhile(read)
  newest.addEventListener('click', () => { after = undefined; void refresh.restart() })
  older.addEventListener('click', () => { after = shown.at(-1)?.id; void refresh.restart() })

  const draw = (current: Endpoint) => {
    endpoint = current
    replace(top, summary(area, productId, current, {
      onTest: async () => {
        await api.run(`${area}_webhooks_send_test`, { path: { id } })
        after = undefined
        await refresh.restart()
      },
      onRotated: (value) => {
        replace(secret, secretBox(value, 'Secret rotated.'))
        void api.run<Endpoint>(`${area}_webhooks_get`, { path: { id } }).then(draw, () => {})
      },
    }), secret, editForm(area, current, (saved) => { replace(secret); draw(saved) }))
  }
  draw(endpoint)
  replace(root, back, h('div', { class: 'wh-endpoint', 'data-testid': 'endpoint', 'data-endpoint-id': id }, top,
    h('section', { class: 'card' },
      h('header', { class: 'wh-head' }, h('h2', {}, 'Deliveries'), h('span', { class: 'muted' }, 'newest first'),
        h('span', { class: 'spacer' }), newest, older),
      deliveries)))
  await refresh.restart()
  return refresh.stop
}
