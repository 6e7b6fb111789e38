// Sending domains: register one, see the DNS records to publish (each with what the last check found), verify, delete.
import { api, describe } from '../../api'
import { h, replace, table, when } from '../../dom'
import { areaHref } from '../../router'
import { readAll } from '../../lists'
import { actionButton, badge, confirmButton, copyable, onSubmit } from './parts'

export interface DnsRecord { record: string; type: string; name: string; value: string; status: string }
export interface Domain {
  id: string; name: string; status: string; records: DnsRecord[]
  createdAt: string; checkedAt: string | null; verifiedAt: string | null
}

/**
 * When the domain was checked and verified, each only when it was: a domain verified without a DNS check (the API's
 * development mode) was never checked, and saying "last checked never; verified" contradicts itself.
 */
function checks(domain: Pick<Domain, 'checkedAt' | 'verifiedAt'>): string {
  const parts = [
    domain.verifiedAt ? `Verified ${when(domain.verifiedAt)}` : null,
    domain.checkedAt ? `last checked ${when(domain.checkedAt)}` : domain.verifiedAt ? null : 'not checked yet',
  ].filter(Boolean).join('; ')
  return `${parts.charAt(0).toUpperCase()}${parts.slice(1)}.`
}

/** Only verified domains send; the sentence tells the reader what to do next. */
const STATUS_HINT: Record<string, string> = {
  pending: 'Publish the records below at your DNS provider, then verify.',
  failed: 'The last check missed a record marked failed below: publish it as shown, then verify again.',
  verified: 'Every record was found: this domain sends.',
}

/** One domain with its records, Verify and Delete; after either it redraws itself from what the API answered. */
function domainCard(domain: Domain, productId: string, onDeleted: () => void): HTMLElement {
  const card = h('article', { class: 'card domain', 'data-domain-id': domain.id })
  const error = h('p', { class: 'error', role: 'alert' })
  const draw = (current: Domain) => replace(card,
    h('header', { class: 'domain-head' },
      h('h2', {}, h('a', { href: areaHref(productId, 'mail', 'domains', current.id), class: 'domain-name' }, current.name)),
      badge(current.status),
      h('span', { class: 'spacer' }),
      actionButton('Verify', 'Checking DNS…', async () => {
        replace(error)
        try {
          draw(await api.run<Domain>('mail_domain_verify', { path: { id: current.id } }))
        } catch (failure) {
          replace(error, describe(failure))
        }
      }, { class: 'verify' }),
      confirmButton('Delete', async () => {
        replace(error)
        try {
          await api.run('mail_domain_delete', { path: { id: current.id } })
          onDeleted()
        } catch (failure) {
          replace(error, describe(failure))
        }
      }),
    ),
    h('p', { class: 'muted hint', 'data-testid': 'domain-checks' }, STATUS_HINT[current.status] ?? '', ` ${checks(current)}`),
    error,
    table(current.records, [
      ['Purpose', (r) => r.record],
      ['Type', (r) => r.type],
      ['Name', (r) => copyable(r.name, { 'data-field': 'name' })],
      ['Value', (r) => copyable(r.value, { 'data-field': 'value' })],
      ['State', (r) => badge(r.status)],
    ], { class: 'records' }),
  )
  draw(domain)
  return card
}

/** #/p/{id}/mail/domains: the form to add a domain, then every domain with its records. */
export async function domainsView(root: HTMLElement, productId: string): Promise<void> {
  const list = h('div', { class: 'domains', 'data-testid': 'domains' }, h('p', { class: 'muted' }, 'Loading domains…'))
  const name = h('input', { name: 'name', placeholder: 'mail.example.com', required: true, maxlength: 253, autocomplete: 'off' })
  const error = h('p', { class: 'error', role: 'alert' })
  const form = h('form', { class: 'inline-form', 'data-testid': 'domain-create' },
    h('label', {}, 'Domain', name), h('button', { type: 'submit' }, 'Add domain'), error)
  const load = async () => {
    try {
      const domains = await readAll<Domain>('mail_domain_list', 'data')
      replace(list, domains.length
        ? domains.map((domain) => domainCard(domain, productId, load))
        : h('p', { class: 'muted empty' }, 'No sending domains yet: add the domain your emails come from.'))
    } catch (failure) {
      replace(list, h('p', { class: 'error', role: 'alert' }, describe(failure)))
    }
  }
  onSubmit(form, error, async () => {
    await api.run<Domain>('mail_domain_create', { body: { name: name.value.trim() } })
    name.value = ''
    await load()
  })
  replace(root, h('section', { class: 'card' }, h('h2', {}, 'Add a sending domain'),
    h('p', { class: 'muted' }, 'A DKIM key is made for it; publish the three TXT records it answers, then verify.'), form), list)
  await load()
}

/** #/p/{id}/mail/domains/{domainId}: one domain as mail_domain_get answers it. */
export async function domainView(root: HTMLElement, productId: string, id: string): Promise<void> {
  replace(root, h('p', { class: 'muted' }, 'Loading the domain…'))
  const back = h('a', { href: areaHref(productId, 'mail', 'domains') }, '← All domains')
  try {
    const domain = await api.run<Domain>('mail_domain_get', { path: { id } })
    replace(root, h('p', {}, back), h('div', { 'data-testid': 'domain' }, domainCard(domain, productId, () => { location.hash = back.getAttribute('href')! })))
  } catch (failure) {
    replace(root, h('p', {}, back), h('p', { class: 'error', role: 'alert' }, describe(failure)))
  }
}
