// Sending API keys (lmk_): create one (scope, optionally locked to a domain), see its secret once, list and revoke.
import { api, describe } from '../../api'
import { h, replace, table, when } from '../../dom'
import type { Domain } from './domains'
import { readAll } from '../../lists'
import { confirmButton, copyable, onSubmit } from './parts'

interface MailKey { id: string; name: string; scope: string; domainId: string | null; prefix: string; createdAt: string }
interface CreatedKey extends MailKey { key: string }

/** The scopes mail_apikey_create accepts (its schema's enum), with what each allows. */
const SCOPES: [string, string][] = [
  ['sending_access', 'Sending: send, and read the emails this key sent'],
  ['full_access', 'Full: also read every email and manage domains and templates'],
]

/**
 * The secret of the key just made, as mail_apikey_create answered it. It lives in this box only: the list never has
 * it, and leaving the view forgets it, as the API does.
 */
function secretBox(created: CreatedKey): HTMLElement {
  return h('div', { class: 'secret', 'data-testid': 'new-key', role: 'status' },
    h('strong', {}, `Key “${created.name}” created. Copy it now: it is shown only this once.`),
    h('p', {}, copyable(created.key, { 'data-testid': 'new-key-secret' })),
    h('p', { class: 'muted' }, 'The platform keeps only its hash; lost, it cannot be shown again: create another and delete this one.'),
  )
}

/** #/p/{id}/mail/keys: the form, the secret of a key just created, and the product's active keys. */
export async function keysView(root: HTMLElement): Promise<void> {
  const list = h('div', { 'data-testid': 'keys' }, h('p', { class: 'muted' }, 'Loading keys…'))
  const fresh = h('div')
  const error = h('p', { class: 'error', role: 'alert' })
  const name = h('input', { name: 'name', placeholder: 'production backend', required: true, maxlength: 256, autocomplete: 'off' })
  const scope = h('select', { name: 'scope' }, SCOPES.map(([value, label]) => h('option', { value }, label)))
  const lock = h('select', { name: 'domainId' }, h('option', { value: '' }, 'Any domain of the product'))
  const form = h('form', { class: 'inline-form', 'data-testid': 'key-create' },
    h('label', {}, 'Name', name), h('label', {}, 'Scope', scope), h('label', {}, 'Sends from', lock),
    h('button', { type: 'submit' }, 'Create key'), error)

  let domainNames = new Map<string, string>()
  const load = async () => {
    try {
      const [keys, domains] = await Promise.all([readAll<MailKey>('mail_apikey_list', 'data'), readAll<Domain>('mail_domain_list', 'data')])
      domainNames = new Map(domains.map((d) => [d.id, d.name]))
      const chosen = lock.value
      replace(lock, h('option', { value: '' }, 'Any domain of the product'),
        domains.map((d) => h('option', { value: d.id, selected: d.id === chosen }, d.name)))
      replace(list, keys.length
        ? table(keys, [
          ['Name', (k) => k.name],
          ['Key', (k) => h('code', {}, `${k.prefix}…`)],
          ['Scope', (k) => h('span', { class: 'tag' }, k.scope)],
          ['Domain lock', (k) => (k.domainId ? domainNames.get(k.domainId) ?? k.domainId : h('span', { class: 'muted' }, 'none'))],
          ['Created', (k) => when(k.createdAt)],
          ['', (k) => confirmButton('Delete', async () => {
            try {
              await api.run('mail_apikey_delete', { path: { id: k.id } })
              await load()
            } catch (failure) {
              replace(error, describe(failure))
            }
          })],
        ], { class: 'keys-table' })
        : h('p', { class: 'muted empty' }, 'No sending keys yet.'))
    } catch (failure) {
      replace(list, h('p', { class: 'error', role: 'alert' }, describe(failure)))
    }
  }
  onSubmit(form, error, async () => {
    const created = await api.run<CreatedKey>('mail_apikey_create', {
      body: { name: name.value.trim(), scope: scope.value, ...(lock.value ? { domainId: lock.value } : {}) },
    })
    name.value = ''
    replace(fresh, secretBox(created))
    await load()
  })
  replace(root, h('section', { class: 'card' }, h('h2', {}, 'Create a sending key'), form, fresh), h('section', { class: 'card' }, h('h2', {}, 'Active keys'), list))
  await load()
}
