// The suppression list: the addresses the mailer skips since a server refused them for good, newest first, each with
// why, and Remove (confirmed in the page) so that the next email to it is attempted again.
import { api, describe } from '../../api'
import { h, replace, table, when } from '../../dom'
import { confirmButton } from './parts'

interface Suppression { address: string; reason: string; createdAt: string }
interface SuppressionPage { has_more: boolean; data: Suppression[] }

const PAGE_SIZE = 50

/** #/p/{id}/mail/suppressions: a page at a time, More appending the next. */
export async function suppressionsView(root: HTMLElement): Promise<void> {
  const list = h('div', { 'data-testid': 'suppressions' }, h('p', { class: 'muted' }, 'Loading the suppression list…'))
  const error = h('p', { class: 'error', role: 'alert' })
  const more = h('button', { type: 'button', class: 'secondary', 'data-testid': 'more', hidden: true }, 'More')
  let shown: Suppression[] = []
  let hasMore = false

  const draw = () => {
    replace(list, shown.length
      ? table(shown, [
        ['Address', (s) => h('span', { class: 'address', 'data-address': s.address }, s.address)],
        ['Why', (s) => h('span', { class: 'reason' }, s.reason)],
        ['Since', (s) => when(s.createdAt)],
        ['', (s) => confirmButton('Remove', async () => {
          replace(error)
          try {
            await api.run('mail_suppressions_delete', { path: { address: s.address } })
            shown = shown.filter((kept) => kept !== s)
            draw()
          } catch (failure) {
            replace(error, describe(failure))
          }
        }, { 'data-testid': 'remove' })],
      ], { class: 'suppression-list' })
      : h('p', { class: 'muted empty' }, 'No suppressed addresses: every recipient is attempted.'))
    more.hidden = !hasMore
  }
  const load = async (after?: string) => {
    more.disabled = true
    try {
      const page = await api.run<SuppressionPage>('mail_suppressions_list', { query: { limit: PAGE_SIZE, after } })
      shown = after === undefined ? page.data : [...shown, ...page.data]
      hasMore = page.has_more
      draw()
    } catch (failure) {
      replace(list, h('p', { class: 'error', role: 'alert' }, describe(failure)))
    } finally {
      more.disabled = false
    }
  }
  more.addEventListener('click', () => void load(shown.at(-1)?.address))
  replace(root, h('section', { class: 'card' },
    h('h2', {}, 'Suppression list'),
    h('p', { class: 'muted' }, 'A recipient a server refused for good (a 5xx at RCPT) goes here, and later emails skip it. '
      + 'Remove an address once it works again.'),
    error, list, h('p', {}, more)))
  await load()
}
