// The product's Realtime API keys (rtk_, for its backend on the public routes): listed by prefix, created (the secret
// shown once, as organization_public-keys_create returns it, and never again), revoked.
import { api, describe } from '../../api'
import { h, replace, table, when } from '../../dom'
import type { AreaView } from '../area'
import { readAll } from '../../lists'
import { confirmButton } from '../../confirm'

interface PublicKey { id: string; name: string; scope: string[]; prefix: string; environment: string; createdAt: string }
interface CreatedKey extends PublicKey { key: string }

/**
 * What a key may do, a new key all unless narrowed: shared/realtime/public-keys.ts PUBLIC_SCOPES, copied because that
 * module is server code (hashing); test/console/realtime.test.ts keeps the two equal.
 */
export const KEY_SCOPES: readonly string[] = ['tokens:issue', 'messages:publish', 'history:read', 'presence:read', 'channels:read']

export const keysView: AreaView = async ({ root, productId }) => {
  const list = h('div', {}, h('p', { class: 'muted' }, 'Loading keys…'))
  const created = h('div', {})
  const status = h('p', { class: 'error', role: 'alert' })
  const path = { productId }

  async function reload(): Promise<void> {
    try {
      const keys = await readAll<PublicKey>('organization_public-keys_list', 'keys', { path })
      replace(list, keys.length
        ? table(keys, [
          ['Name', (k) => k.name],
          ['Key', (k) => h('code', { class: 'key-prefix' }, `${k.prefix}…`)],
          ['Scope', (k) => h('span', { class: 'scopes' }, k.scope.map((scope) => h('span', { class: 'badge' }, scope)))],
          ['Environment', (k) => k.environment],
          ['Created', (k) => when(k.createdAt)],
          ['', (k) => confirmButton('Revoke', () => revoke(k), { class: 'secondary danger', title: `Revokes ${k.name} (${k.prefix}…): it stops working at once` })],
        ], { 'data-testid': 'keys' })
        : h('p', { class: 'muted', 'data-testid': 'keys-empty' }, 'No keys yet. A backend needs one to issue tokens and publish.'))
    } catch (failure) {
      replace(list, h('p', { class: 'error', role: 'alert' }, describe(failure)))
    }
  }

  async function revoke(key: PublicKey): Promise<void> {
    try {
      await api.run('organization_public-keys_revoke', { path: { productId, keyId: key.id } })
      replace(status)
      await reload()
    } catch (failure) {
      replace(status, describe(failure))
    }
  }

  const name = h('input', { name: 'name', required: true, maxlength: 256, placeholder: 'backend', autocomplete: 'off' })
  const scopes = KEY_SCOPES.map((scope) => h('input', { type: 'checkbox', name: 'scope', value: scope, checked: true }))
  const error = h('p', { class: 'error', role: 'alert' })
  const submit = h('button', { type: 'submit' }, 'Create key')
  const form = h('form', { class: 'key-form', 'data-testid': 'key-form' },
    h('label', {}, 'Name', name),
    h('fieldset', { class: 'checks' }, h('legend', {}, 'Scope'),
      scopes.map((box) => h('label', { class: 'check' }, box, h('code', {}, box.value)))),
    error,
    h('div', { class: 'actions' }, submit))
  form.addEventListener('submit', async (event) => {
    event.preventDefault()
    submit.disabled = true
    try {
      const key = await api.run<CreatedKey>('organization_public-keys_create', {
        path, body: { name: name.value.trim(), scope: scopes.filter((box) => box.checked).map((box) => box.value) },
      })
      replace(error)
      form.reset()
      replace(created, secretNotice(key, () => replace(created)))
      await reload()
    } catch (failure) {
      replace(error, describe(failure))
    } finally {
      submit.disabled = false
    }
  })

  replace(root,
    h('section', { class: 'card' },
      h('h1', {}, 'Realtime API keys'),
      h('p', { class: 'muted' }, 'rtk_ keys let the product\'s backend issue client tokens and publish on the public routes. Keep them on servers, never in a browser.'),
      created, status, list),
    h('section', { class: 'card' }, h('h2', {}, 'New key'), form))
  await reload()
}

/** The one time a secret is shown: the key as the API returned it, a copy button, and a way to dismiss it for good. */
function secretNotice(key: CreatedKey, dismiss: () => void): HTMLElement {
  const copied = h('span', { class: 'muted' })
  return h('div', { class: 'secret', 'data-testid': 'new-key', role: 'status' },
    h('strong', {}, `Key ${key.name} created. Copy it now: this is the only time its secret is shown.`),
    h('div', { class: 'secret-row' },
      h('code', { class: 'secret-value', 'data-testid': 'new-key-secret' }, key.key),
      h('button', {
        type: 'button', class: 'secondary', onclick: () => navigator.clipboard.writeText(key.key)
          .then(() => replace(copied, 'Copied.'), () => replace(copied, 'Copying is not allowed here: select the key and copy it.')),
      }, 'Copy'),
      h('button', { type: 'button', class: 'secondary', onclick: dismiss }, 'Done'),
      copied))
}
