// Namespaces: the product's registered channel prefixes and their policy (presence, client events, history, archive),
// listed, created, edited and deleted through realtime_namespaces_*.
import { api, describe } from '../../api'
import { count, h, replace, table, when } from '../../dom'
import type { AreaView } from '../area'
import { readAll } from '../../lists'
import { confirmButton } from '../../confirm'

export interface Namespace {
  id: string
  name: string
  presence: boolean
  clientEvents: boolean
  history: { ttlSeconds: number; size: number } | null
  archive: { retentionDays: number } | null
  createdAt: string
  updatedAt: string
}

type Policy = Pick<Namespace, 'presence' | 'clientEvents' | 'history' | 'archive'>

/** A policy as a reader says it: "86,400 s, 1,000 entries". */
export const historyText = (history: Namespace['history']) => (history ? `${count(history.ttlSeconds)} s, ${count(history.size)} entries` : 'off')
const archiveText = (archive: Namespace['archive']) => (archive ? `${count(archive.retentionDays)} days` : 'off')
const yesNo = (on: boolean) => h('span', { class: on ? 'badge on' : 'badge' }, on ? 'on' : 'off')

export const namespacesView: AreaView = async ({ root }) => {
  const list = h('div', {}, h('p', { class: 'muted' }, 'Loading namespaces…'))
  const editor = h('div', {})
  const status = h('p', { class: 'error', role: 'alert' })

  async function reload(): Promise<void> {
    try {
      const namespaces = await readAll<Namespace>('realtime_namespaces_list', 'namespaces')
      replace(list, namespaces.length
        ? table(namespaces, [
          ['Name', (n) => h('code', { class: 'namespace-name' }, n.name)],
          ['Presence', (n) => yesNo(n.presence)],
          ['Client events', (n) => yesNo(n.clientEvents)],
          ['History', (n) => historyText(n.history)],
          ['Archive', (n) => archiveText(n.archive)],
          ['Updated', (n) => when(n.updatedAt)],
          ['', (n) => h('span', { class: 'actions' },
            h('button', { type: 'button', class: 'secondary', onclick: () => edit(n) }, 'Edit'),
            confirmButton('Delete', () => remove(n), { class: 'secondary danger', title: `Deletes ${n.name} and its grants: tokens can no longer be issued for its channels` }))],
        ], { 'data-testid': 'namespaces' })
        : h('p', { class: 'muted', 'data-testid': 'namespaces-empty' }, 'No namespaces yet. A channel "<namespace>:<name>" exists only under a registered namespace: create one.'))
    } catch (failure) {
      replace(list, h('p', { class: 'error', role: 'alert' }, describe(failure)))
    }
  }

  function edit(namespace?: Namespace): void {
    replace(status)
    replace(editor, namespaceForm(namespace, async (name, policy) => {
      if (namespace) await api.run('realtime_namespaces_update', { path: { name }, body: policy })
      else await api.run('realtime_namespaces_create', { body: { name, ...policy } })
      await reload()
      replace(editor) // after the list shows the change: a closed form means saved and shown
    }, () => replace(editor)))
    editor.querySelector('input')?.focus()
  }

  async function remove(namespace: Namespace): Promise<void> {
    try {
      await api.run('realtime_namespaces_delete', { path: { name: namespace.name } })
      replace(status)
      await reload()
    } catch (failure) {
      replace(status, describe(failure))
    }
  }

  replace(root, h('section', { class: 'card' },
    h('div', { class: 'card-head' },
      h('h1', {}, 'Namespaces'),
      h('button', { type: 'button', 'data-testid': 'namespace-new', onclick: () => edit() }, 'New namespace')),
    h('p', { class: 'muted' }, 'Channels are named "<namespace>:<rest>"; the namespace decides what its channels keep and allow.'),
    editor, status, list))
  await reload()
}

/** The create or edit form (the name is fixed once created); `save` errors are shown in the form. */
function namespaceForm(namespace: Namespace | undefined, save: (name: string, policy: Policy) => Promise<void>, cancel: () => void): HTMLFormElement {
  const input = (name: string, attributes: Record<string, string | number | boolean>) => h('input', { name, ...attributes })
  const name = input('name', { required: true, value: namespace?.name ?? '', disabled: Boolean(namespace), placeholder: 'chat', autocomplete: 'off' })
  const presence = input('presence', { type: 'checkbox', checked: namespace?.presence ?? false })
  const clientEvents = input('clientEvents', { type: 'checkbox', checked: namespace?.clientEvents ?? false })
  const history = input('history', { type: 'checkbox', checked: Boolean(namespace?.history) })
  const ttl = input('historyTtlSeconds', { type: 'number', min: 1, value: namespace?.history?.ttlSeconds ?? 300 })
  const size = input('historySize', { type: 'number', min: 1, value: namespace?.history?.size ?? 100 })
  const archive = input('archive', { type: 'checkbox', checked: Boolean(namespace?.archive) })
  const days = input('archiveDays', { type: 'number', min: 1, value: namespace?.archive?.retentionDays ?? 30 })
  const error = h('p', { class: 'error', role: 'alert' })
  const submit = h('button', { type: 'submit' }, namespace ? 'Save' : 'Create')
  const form = h('form', { class: 'policy-form', 'data-testid': 'namespace-form' },
    h('h2', {}, namespace ? `Edit ${namespace.name}` : 'New namespace'),
    h('label', {}, 'Name', name),
    h('div', { class: 'checks' },
      h('label', { class: 'check' }, presence, 'Presence rosters'),
      h('label', { class: 'check' }, clientEvents, 'Client events (browsers may publish)')),
    h('div', { class: 'row' },
      h('label', { class: 'check' }, history, 'Keep history'),
      h('label', {}, 'Seconds kept', ttl),
      h('label', {}, 'Entries per channel', size)),
    h('div', { class: 'row' },
      h('label', { class: 'check' }, archive, 'Archive'),
      h('label', {}, 'Days kept', days)),
    error,
    h('div', { class: 'actions' }, submit, h('button', { type: 'button', class: 'secondary', onclick: cancel }, 'Cancel')))
  form.addEventListener('submit', async (event) => {
    event.preventDefault()
    submit.disabled = true
    try {
      await save(name.value.trim(), {
        presence: presence.checked,
        clientEvents: clientEvents.checked,
        history: history.checked ? { ttlSeconds: ttl.valueAsNumber, size: size.valueAsNumber } : null,
        archive: archive.checked ? { retentionDays: days.valueAsNumber } : null,
      })
    } catch (failure) {
      replace(error, describe(failure))
    } finally {
      submit.disabled = false
    }
  })
  return form
}
