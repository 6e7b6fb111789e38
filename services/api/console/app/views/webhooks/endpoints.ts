// An area's webhook endpoints: each with its URL, the event kinds it takes and its state (disabled with why), and the
// form to register one, whose signing secret is shown once.
import { api, describe } from '../../api'
import { h, replace, table, when } from '../../dom'
import { areaHref } from '../../router'
import { copyable, onSubmit } from '../mail/parts'
import { ALL_KINDS, EVENT_KINDS } from '../../../../../../shared/webhooks/events'
import { type Endpoint, endpointState, labelCells, listPage, type WebhookArea, type WithSecret } from './parts'

/** Endpoints per page; More appends the next. */
const PAGE_SIZE = 50

/**
 * The event kinds as checkboxes, "every kind" first: checked alone it subscribes to kinds added later too.
 * `read()` answers the list the operations take, or undefined when nothing is checked.
 */
export function kindPicker(area: WebhookArea, chosen: string[] = [ALL_KINDS]): { element: HTMLElement; read: () => string[] | undefined } {
  const all = h('input', { type: 'checkbox', name: 'kind', value: ALL_KINDS, checked: chosen.includes(ALL_KINDS) })
  const kinds = EVENT_KINDS[area].map((kind) => h('input', { type: 'checkbox', name: 'kind', value: kind, checked: chosen.includes(kind) }))
  const sync = () => { for (const box of kinds) box.disabled = all.checked }
  all.addEventListener('change', sync)
  sync()
  const element = h('fieldset', { class: 'wh-kinds' }, h('legend', {}, 'Event kinds'),
    h('label', { class: 'wh-check' }, all, `Every ${area} event (${ALL_KINDS}), later kinds included`),
    kinds.map((box) => h('label', { class: 'wh-check' }, box, h('code', {}, box.value))))
  return {
    element,
    read: () => {
      if (all.checked) return [ALL_KINDS]
      const picked = kinds.filter((box) => box.checked).map((box) => box.value)
      return picked.length ? picked : undefined
    },
  }
}

/** The secret a create or a rotation answered: here once, gone when the reader leaves, as the API keeps only a seal. */
export function secretBox(secret: string, what: string): HTMLElement {
  return h('div', { class: 'secret wh-secret', 'data-testid': 'new-secret', role: 'status' },
    h('strong', {}, `${what} Copy the signing secret now: it is shown only this once.`),
    h('p', {}, copyable(secret, { 'data-testid': 'new-secret-value' })),
    h('p', { class: 'muted' }, 'Receivers verify each request with it (Standard Webhooks); rotate to get a new one.'))
}

const kindsText = (kinds: string[]) => (kinds.includes(ALL_KINDS) ? 'every event' : kinds.join(', '))

/** #/p/{id}/{area}/webhooks: the form, the secret of an endpoint just made, and the area's endpoints. */
export async function endpointsView(root: HTMLElement, area: WebhookArea, productId: string): Promise<void> {
  const list = h('div', { 'data-testid': 'webhooks' }, h('p', { class: 'muted' }, 'Loading endpoints…'))
  const fresh = h('div')
  const error = h('p', { class: 'error', role: 'alert' })
  const url = h('input', { name: 'url', type: 'url', placeholder: 'https://example.com/webhooks', required: true, maxlength: 2048, autocomplete: 'off' })
  const description = h('input', { name: 'description', placeholder: 'optional label', maxlength: 256, autocomplete: 'off' })
  const kinds = kindPicker(area)
  const form = h('form', { class: 'wh-form', 'data-testid': 'webhook-create' },
    h('label', { class: 'wh-wide' }, 'URL', url), h('label', {}, 'Description', description), kinds.element,
    h('div', {}, h('button', { type: 'submit' }, 'Add endpoint')), error)

  const more = h('button', { type: 'button', class: 'secondary', 'data-testid': 'more', hidden: true }, 'More')
  let items: Endpoint[] = []
  const load = async (after?: string) => {
    more.disabled = true
    try {
      const page = await listPage<Endpoint>(area, 'endpoints', `${area}_webhooks_list`, { limit: PAGE_SIZE, after })
      items = after === undefined ? page.items : [...items, ...page.items]
      more.hidden = !page.hasMore
      replace(list, items.length
        ? labelCells(table(items, [
          ['Endpoint', (e) => [h('a', { href: areaHref(productId, area, 'webhooks', e.id), class: 'wh-url' }, e.url),
            e.description && h('div', { class: 'muted' }, e.description)]],
          ['Events', (e) => h('span', { class: 'wh-kind-list' }, kindsText(e.eventKinds))],
          ['State', (e) => endpointState(e)],
          ['Created', (e) => when(e.createdAt)],
        ], { class: 'wh-table', 'data-testid': 'endpoints' }))
        : h('p', { class: 'muted empty' }, 'No webhook endpoints yet: add the URL that should hear of this area\'s events.'))
      for (const row of list.querySelectorAll('tbody tr')) row.setAttribute('data-endpoint-id', items[(row as HTMLTableRowElement).sectionRowIndex]!.id)
    } catch (failure) {
      replace(list, h('p', { class: 'error', role: 'alert' }, describe(failure)))
    } finally {
      more.disabled = false
    }
  }
  more.addEventListener('click', () => void load(items.at(-1)?.id))
  onSubmit(form, error, async () => {
    const eventKinds = kinds.read()
    if (!eventKinds) throw new Error('Choose at least one event kind')
    const created = await api.run<WithSecret>(`${area}_webhooks_create`, {
      body: { url: url.value.trim(), eventKinds, ...(description.value.trim() ? { description: description.value.trim() } : {}) },
    })
    url.value = ''
    description.value = ''
    replace(fresh, secretBox(created.secret, `Endpoint ${created.url} added.`))
    await load()
  })
  replace(root,
    h('section', { class: 'card' }, h('h2', {}, 'Add a webhook endpoint'),
      h('p', { class: 'muted' }, 'Events are POSTed to it, signed, and retried for about a day until it answers 2xx.'), form, fresh),
    h('section', { class: 'card' }, h('h2', {}, 'Endpoints'), list, h('p', {}, more)))
  await load()
}
