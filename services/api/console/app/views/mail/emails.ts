// The email log: the product's emails newest first, a page at a time, and one email with its events as a timeline.
import { api, describe } from '../../api'
import { breakable, h, replace, table, when } from '../../dom'
import { areaHref } from '../../router'
import { badge } from './parts'

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

/** #/p/{id}/mail/emails: one page of the log with Newer/Older, and Refresh back to the newest. */
export async function emailsView(root: HTMLElement, productId: string): Promise<void> {
  const body = h('div', { 'data-testid': 'emails' }, h('p', { class: 'muted' }, 'Loading emails…'))
  const newer = h('button', { type: 'button', class: 'secondary', 'data-testid': 'newer' }, '← Newer')
  const older = h('button', { type: 'button', class: 'secondary', 'data-testid': 'older' }, 'Older →')
  const refresh = h('button', { type: 'button', class: 'secondary', 'data-testid': 'refresh' }, 'Refresh')
  let shown: EmailSummary[] = []

  const load = async (cursor: Cursor) => {
    for (const button of [newer, older, refresh]) button.disabled = true
    try {
      const page = await api.run<EmailPage>('mail_emails_list', { query: { limit: PAGE_SIZE, ...cursor } })
      // has_more speaks of the direction walked; the other direction has more whenever a cursor brought us here.
      const olderExist = cursor.before !== undefined || page.has_more
      const newerExist = cursor.before !== undefined ? page.has_more : cursor.after !== undefined
      if (!page.data.length && cursor.after === undefined && cursor.before === undefined) {
        shown = []
        replace(body, h('p', { class: 'muted empty' }, 'No emails yet: emails sent through the public route appear here with their events.'))
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
  replace(root, h('section', { class: 'card' },
    h('header', { class: 'log-head' }, h('h2', {}, 'Email log'), h('span', { class: 'muted' }, 'newest first'),
      h('span', { class: 'spacer' }), refresh, newer, older),
    body))
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
    h('section', { class: 'card' },
      h('h2', {}, 'Content'),
      email.text !== null && [h('h3', {}, 'Text'), h('pre', { class: 'content-text' }, email.text)],
      email.html !== null && [h('h3', {}, 'HTML (its source; never rendered here)'), h('pre', { class: 'content-html' }, email.html)],
      Object.keys(email.headers).length > 0 && [h('h3', {}, 'Headers'),
        table(Object.entries(email.headers), [['Name', ([name]) => name], ['Value', ([, value]) => value]])],
    ),
  ))
}
