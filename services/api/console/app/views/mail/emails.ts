// The email log: the product's emails newest first, a page at a time, filtered by status, recipient, domain and time;
// and one email with its events as a timeline and the webhook deliveries of those events.
import { api, describe } from '../../api'
import { breakable, h, replace, table, when } from '../../dom'
import { areaHref } from '../../router'
import { readAll } from '../../lists'
import type { Domain } from './domains'
import { badge, onSubmit } from './parts'

interface EmailSummary {
  id: string; from: string; to: string[]; cc: string[]; bcc: string[]; reply_to: string[]; subject: string
  created_at: string; last_event: string; last_event_at: string
}
interface EmailEvent { type: string; at: string; detail?: unknown }
interface Email extends EmailSummary {
  html: string | null; text: string | null; headers: Record<string, string>; tags: { name: string; value: string }[]
  message_id: string; events: EmailEvent[]
}
interface EmailPage { has_more: boolean; data: EmailSummary[] }

const PAGE_SIZE = 20

/** A page asked for: the newest (no cursor), the older ones after an id, or the newer ones before an id. */
type Cursor = { after?: string; before?: string }

/** The states mail_emails_list filters on (shared/mail/email-log.ts EMAIL_STATES). */
const STATES = ['queued', 'sent', 'delivered', 'delivery_delayed', 'bounced', 'failed', 'suppressed']

type Filter = Record<'status' | 'recipient' | 'domain' | 'since' | 'until', string | undefined>

/** A datetime-local value (the reader's local time) as the instant the API takes; empty is no bound. */
const instant = (local: string) => (local ? new Date(local).toISOString() : undefined)

/** The filter form: what it asks for, read when submitted, and the product's domains filled in once known. */
function filterForm(onApply: (filter: Filter) => Promise<void>) {
  const status = h('select', { name: 'status' }, h('option', { value: '' }, 'Any status'), STATES.map((state) => h('option', { value: state }, state)))
  const recipient = h('input', { name: 'recipient', type: 'email', placeholder: 'someone@example.com', maxlength: 254, autocomplete: 'off' })
  const domain = h('select', { name: 'domain' }, h('option', { value: '' }, 'Any domain'))
  const since = h('input', { name: 'since', type: 'datetime-local', step: 1 })
  const until = h('input', { name: 'until', type: 'datetime-local', step: 1 })
  const clear = h('button', { type: 'button', class: 'secondary', 'data-testid': 'clear-filter' }, 'Clear')
  const error = h('p', { class: 'error', role: 'alert' })
  const form = h('form', { class: 'inline-form log-filter', 'data-testid': 'email-filter' },
    h('label', {}, 'Status', status), h('label', {}, 'Recipient', recipient), h('label', {}, 'Domain', domain),
    h('label', {}, 'Created from', since), h('label', {}, 'Created before', until),
    h('button', { type: 'submit' }, 'Filter'), clear, error)
  const read = (): Filter => ({
    status: status.value || undefined, recipient: recipient.value.trim() || undefined, domain: domain.value || undefined,
    since: instant(since.value), until: instant(until.value),
  })
  onSubmit(form, error, () => onApply(read()))
  clear.addEventListener('click', () => {
    form.reset()
    void onApply(read())
  })
  readAll<Domain>('mail_domain_list', 'data', { max: 500 })
    .then((domains) => domain.append(...domains.map((d) => h('option', { value: d.name }, d.name))))
    .catch((failure) => replace(error, describe(failure)))
  return form
}

/** #/p/{id}/mail/emails: one page of the log with Newer/Older, and Refresh back to the newest. */
export async function emailsView(root: HTMLElement, productId: string): Promise<void> {
  const body = h('div', { 'data-testid': 'emails' }, h('p', { class: 'muted' }, 'Loading emails…'))
  const newer = h('button', { type: 'button', class: 'secondary', 'data-testid': 'newer' }, '← Newer')
  const older = h('button', { type: 'button', class: 'secondary', 'data-testid': 'older' }, 'Older →')
  const refresh = h('button', { type: 'button', class: 'secondary', 'data-testid': 'refresh' }, 'Refresh')
  let shown: EmailSummary[] = []
  let filter: Partial<Filter> = {}
  const filtered = () => Object.values(filter).some((value) => value !== undefined)

  const load = async (cursor: Cursor) => {
    for (const button of [newer, older, refresh]) button.disabled = true
    try {
      const page = await api.run<EmailPage>('mail_emails_list', { query: { limit: PAGE_SIZE, ...filter, ...cursor } })
      // has_more speaks of the direction walked; the other direction has more whenever a cursor brought us here.
      const olderExist = cursor.before !== undefined || page.has_more
      const newerExist = cursor.before !== undefined ? page.has_more : cursor.after !== undefined
      if (!page.data.length && cursor.after === undefined && cursor.before === undefined) {
        shown = []
        replace(body, h('p', { class: 'muted empty' }, filtered()
          ? 'No email matches the filter.'
          : 'No emails yet: emails sent through the public route appear here with their events.'))
      } else if (page.data.length) {
        shown = page.data
        replace(body, table(shown, [
          ['Created', (e) => when(e.created_at)],
          ['Subject', (e) => h('a', { href: areaHref(productId, 'mail', 'emails', e.id), class: 'subject', 'data-email-id': e.id }, e.subject || '(no subject)')],
          ['To', (e) => breakable(e.to.join(', '))],
          ['From', (e) => breakable(e.from)],
          ['Last event', (e) => [badge(e.last_event), h('div', { class: 'muted small' }, when(e.last_event_at))]],
        ], { class: 'email-log' }))
      }
      newer.disabled = !newerExist || !shown.length
      older.disabled = !olderExist || !shown.length
    } catch (failure) {
      replace(body, h('p', { class: 'error', role: 'alert' }, describe(failure)))
    } finally {
      refresh.disabled = false
    }
  }
  newer.addEventListener('click', () => void load({ before: shown[0]!.id }))
  older.addEventListener('click', () => void load({ after: shown.at(-1)!.id }))
  refresh.addEventListener('click', () => void load({}))
  const form = filterForm(async (asked) => {
    filter = asked
    await load({})
  })
  replace(root, h('section', { class: 'card' },
    h('header', { class: 'log-head' }, h('h2', {}, 'Email log'), h('span', { class: 'muted' }, 'newest first'),
      h('span', { class: 'spacer' }), refresh, newer, older),
    form, body))
  await load({})
}

/** What an event carries (an SMTP reply, a bounce reason) as text, never markup. */
const detailText = (detail: unknown) => (detail === undefined ? '' : typeof detail === 'string' ? detail : JSON.stringify(detail))

const addresses = (list: string[]) => (list.length ? list.join(', ') : null)

/** #/p/{id}/mail/emails/{emailId}: the email, its events oldest first, and its content as text (HTML shown as source). */
export async function emailView(root: HTMLElement, productId: string, id: string): Promise<void> {
  const back = h('p', {}, h('a', { href: areaHref(productId, 'mail', 'emails') }, '← The email log'))
  replace(root, back, h('p', { class: 'muted' }, 'Loading the email…'))
  let email: Email
  try {
    email = await api.run<Email>('mail_emails_get', { path: { id } })
  } catch (failure) {
    replace(root, back, h('p', { class: 'error', role: 'alert', 'data-testid': 'email-error' }, describe(failure)))
    return
  }
  const deliveries = h('div', { 'data-testid': 'email-deliveries' }, h('p', { class: 'muted' }, 'Loading webhook deliveries…'))
  void drawDeliveries(deliveries, productId, id)
  const facts: [string, string | null][] = [
    ['From', email.from], ['To', addresses(email.to)], ['Cc', addresses(email.cc)], ['Bcc', addresses(email.bcc)],
    ['Reply-To', addresses(email.reply_to)], ['Created', when(email.created_at)], ['Message-ID', email.message_id],
    ['Tags', email.tags.length ? email.tags.map((t) => `${t.name}=${t.value}`).join(', ') : null],
  ]
  replace(root, back, h('div', { class: 'email', 'data-testid': 'email', 'data-email-id': email.id },
    h('section', { class: 'card' },
      h('header', { class: 'log-head' }, h('h2', { class: 'email-subject' }, email.subject || '(no subject)'), badge(email.last_event)),
      h('dl', { class: 'facts' }, facts.filter(([, value]) => value !== null).flatMap(([term, value]) => [h('dt', {}, term), h('dd', {}, breakable(value!))])),
    ),
    h('section', { class: 'card' },
      h('h2', {}, 'Events'),
      h('ol', { class: 'timeline', 'data-testid': 'events' }, email.events.map((event) =>
        h('li', { class: 'event', 'data-type': event.type },
          badge(event.type),
          h('time', { datetime: event.at }, when(event.at)),
          event.detail !== undefined && h('div', { class: 'event-detail' }, detailText(event.detail)))))),
    h('section', { class: 'card' }, h('h2', {}, 'Webhook deliveries'), deliveries),
    h('section', { class: 'card' },
      h('h2', {}, 'Content'),
      email.text !== null && [h('h3', {}, 'Text'), h('pre', { class: 'content-text' }, email.text)],
      email.html !== null && [h('h3', {}, 'HTML (its source; never rendered here)'), h('pre', { class: 'content-html' }, email.html)],
      Object.keys(email.headers).length > 0 && [h('h3', {}, 'Headers'),
        table(Object.entries(email.headers), [['Name', ([name]) => name], ['Value', ([, value]) => value]])],
    ),
  ))
}

interface EmailDelivery {
  id: string; eventKind: string; state: string; attemptCount: number; createdAt: string; endpointId: string; endpointUrl: string
  lastAttempt: { statusCode: number | null; error: string | null } | null
}

/** The webhook deliveries of the email's events (the newest 100), each linking to its attempts on the Webhooks tab. */
async function drawDeliveries(root: HTMLElement, productId: string, id: string): Promise<void> {
  try {
    const page = await api.run<{ data: EmailDelivery[]; has_more: boolean }>('mail_emails_deliveries_list', { path: { id }, query: { limit: 100 } })
    replace(root, page.data.length
      ? [table(page.data, [
        ['Event', (d) => [h('code', {}, d.eventKind), ' ', badge(d.state), h('div', { class: 'muted small' }, when(d.createdAt))]],
        ['Endpoint', (d) => h('a', { href: areaHref(productId, 'mail', 'webhooks', d.endpointId), class: 'endpoint-url' }, d.endpointUrl)],
        ['Attempts', (d) => h('a', { href: areaHref(productId, 'mail', 'webhooks', d.endpointId, 'deliveries', d.id), 'data-delivery-id': d.id },
          `${d.attemptCount} · last ${d.lastAttempt ? d.lastAttempt.statusCode ?? 'no answer' : '—'}`)],
      ], { class: 'email-deliveries' }), page.has_more && h('p', { class: 'muted' }, 'The 100 newest are shown.')]
      : h('p', { class: 'muted empty' }, 'No webhook deliveries: no Mail endpoint takes the events of this email.'))
  } catch (failure) {
    replace(root, h('p', { class: 'error', role: 'alert' }, describe(failure)))
  }
}
