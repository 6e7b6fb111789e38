// Mail: sending domains with their DNS records, sending API keys, the email log with each email's events, the
// suppression list, and webhooks (the view both areas share).
//   #/p/{id}/mail[/domains[/{domainId}]]   #/p/{id}/mail/keys   #/p/{id}/mail/emails[/{emailId}]
//   #/p/{id}/mail/suppressions   #/p/{id}/mail/webhooks[/...]
import { h, replace } from '../../dom'
import { areaHref } from '../../router'
import type { AreaView } from '../area'
import { domainsView, domainView } from './domains'
import { emailsView, emailView } from './emails'
import { keysView } from './keys'
import { suppressionsView } from './suppressions'
import { webhooksView } from '../webhooks'

const TABS: [string, string][] = [
  ['domains', 'Domains'], ['keys', 'API keys'], ['emails', 'Email log'], ['suppressions', 'Suppressions'], ['webhooks', 'Webhooks'],
]
const mailWebhooks = webhooksView('mail')

export const mailView: AreaView = async ({ root, productId, rest }) => {
  const [tab = 'domains', id] = rest
  const view = h('div', { class: 'mail-view' })
  replace(root, h('nav', { class: 'tabs', 'aria-label': 'Mail' }, TABS.map(([name, title]) =>
    h('a', { href: areaHref(productId, 'mail', name), class: name === tab ? 'active' : '', 'aria-current': name === tab ? 'page' : null }, title))), view)
  if (tab === 'domains') return id ? domainView(view, productId, id) : domainsView(view, productId)
  if (tab === 'keys') return keysView(view)
  if (tab === 'emails') return id ? emailView(view, productId, id) : emailsView(view, productId)
  if (tab === 'suppressions') return suppressionsView(view)
  if (tab === 'webhooks') return mailWebhooks({ root: view, productId, rest: rest.slice(1) })
  replace(view, h('p', { class: 'error' }, `No Mail view ${tab}`))
}
