// The archive viewer (#/p/{productId}/realtime/archive/{channel}): one channel's archived publications in a time range,
// newest or oldest first, a page at a time, through realtime_archive_read (its `next` cursor walks the pages).
import { api, describe } from '../../api'
import { count, h, replace, when } from '../../dom'
import type { AreaView } from '../area'
import { payloadBlock } from './format'

interface ArchiveEntry { id: string; offset: number; epoch: string; publishedAt: string; data?: unknown; ref?: unknown }
interface ArchivePage { channel: string; entries: ArchiveEntry[]; next: string | null }

/** Entries per page unless the reader asks otherwise (the operation allows 1 to 1000). */
export const ARCHIVE_PAGE = 50

/** A datetime-local value (the reader's own clock) as the ISO time with a zone the operation takes; '' when empty. */
const zoned = (local: string) => {
  if (!local) return undefined
  const date = new Date(local)
  return Number.isNaN(date.getTime()) ? local : date.toISOString()
}

export const archiveView: AreaView = ({ root, rest }) => {
  const channel = h('input', { name: 'channel', required: true, value: rest[0] ?? '', placeholder: 'chat:lobby', autocomplete: 'off', spellcheck: 'false' })
  const from = h('input', { name: 'from', type: 'datetime-local', step: 1 })
  const to = h('input', { name: 'to', type: 'datetime-local', step: 1 })
  const order = h('select', { name: 'order' }, h('option', { value: 'newest' }, 'Newest first'), h('option', { value: 'oldest' }, 'Oldest first'))
  const limit = h('input', { name: 'limit', type: 'number', min: 1, max: 1000, value: ARCHIVE_PAGE })
  const form = h('form', { class: 'archive-form', 'data-testid': 'archive-form' },
    h('label', { class: 'grow' }, 'Channel', channel), h('label', {}, 'From', from), h('label', {}, 'To', to),
    h('label', {}, 'Order', order), h('label', {}, 'Per page', limit), h('button', { type: 'submit' }, 'Read'))
  const output = h('div', { 'data-testid': 'archive' },
    h('p', { class: 'muted' }, 'Pick a channel and a time range: its archived publications, a page at a time. Leave the range empty for everything kept.'))
  const status = h('p', { class: 'muted', 'data-testid': 'archive-status' })
  const first = h('button', { type: 'button', class: 'secondary', 'data-testid': 'archive-first', disabled: true }, 'First page')
  const next = h('button', { type: 'button', class: 'secondary', 'data-testid': 'archive-next', disabled: true }, 'Next page')

  /** What the current walk reads (fixed when Read is pressed), its page number and the cursor of the page after. */
  let query: Record<string, string | number | undefined> = {}
  let walked = { channel: '', page: 0, next: null as string | null }

  async function read(cursor: string | undefined, page: number): Promise<void> {
    first.disabled = true
    next.disabled = true
    replace(status, 'Reading…')
    try {
      const answer = await api.run<ArchivePage>('realtime_archive_read', { path: { channel: walked.channel }, query: { ...query, cursor } })
      walked = { ...walked, page, next: answer.next }
      replace(status, `Page ${count(page)} · ${count(answer.entries.length)} ${answer.entries.length === 1 ? 'entry' : 'entries'}`)
      replace(output, answer.entries.length
        ? h('ol', { class: 'feed' }, answer.entries.map((entry) =>
          h('li', { 'data-testid': 'archive-entry', 'data-offset': entry.offset },
            h('div', { class: 'meta' }, h('span', { class: 'offset' }, `#${entry.offset}`), h('time', {}, when(entry.publishedAt))),
            payloadBlock(entry))))
        : h('p', { class: 'muted', 'data-testid': 'archive-empty' },
          page === 1 ? 'Nothing archived in that range (or the namespace keeps no archive).' : 'No more entries.'))
      next.disabled = answer.next === null
      first.disabled = page === 1
    } catch (failure) {
      replace(status)
      replace(output, h('p', { class: 'error', role: 'alert' }, describe(failure)))
      first.disabled = walked.page <= 1
    }
  }

  form.addEventListener('submit', (event) => {
    event.preventDefault()
    query = { from: zoned(from.value), to: zoned(to.value), order: order.value, limit: limit.valueAsNumber || ARCHIVE_PAGE }
    walked = { channel: channel.value.trim(), page: 0, next: null }
    void read(undefined, 1)
  })
  first.addEventListener('click', () => void read(undefined, 1))
  next.addEventListener('click', () => {
    if (walked.next) void read(walked.next, walked.page + 1)
  })

  replace(root,
    h('section', { class: 'card' },
      h('h1', {}, 'Archive'),
      h('p', { class: 'muted' }, 'What a namespace with an archive kept of its channels, in PostgreSQL, by time range.'),
      form),
    h('section', { class: 'card' }, h('div', { class: 'card-head' }, h('h2', {}, 'Entries'), status), output, h('div', { class: 'pager' }, first, next)))
  if (rest[0]) form.requestSubmit()
}
