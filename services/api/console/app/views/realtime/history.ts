// The inspector's history panel: the channel's last entries as realtime_history_read answers them, newest first.
import { api, describe } from '../../api'
import { h, replace, when } from '../../dom'
import { payloadBlock } from './format'

interface HistoryEntry { id: string; offset: number; epoch: string; publishedAt: string; data?: unknown; ref?: unknown }

const HISTORY_DEFAULT = 20

export function historyPanel(channel: string) {
  const lastN = h('input', { name: 'last_n', type: 'number', min: 1, max: 1000, value: HISTORY_DEFAULT })
  const output = h('div', { 'data-testid': 'history' }, h('p', { class: 'muted' }, 'The entries the channel keeps, read on demand (newest first).'))
  const form = h('form', { class: 'inline-form' },
    h('label', {}, 'Last', lastN), h('button', { type: 'submit', class: 'secondary', 'data-testid': 'history-read' }, 'Read history'))
  form.addEventListener('submit', async (event) => {
    event.preventDefault()
    replace(output, h('p', { class: 'muted' }, 'Reading…'))
    try {
      const answer = await api.run<{ entries: HistoryEntry[]; epoch: string }>('realtime_history_read',
        { path: { channel }, query: { last_n: lastN.valueAsNumber || HISTORY_DEFAULT } })
      replace(output, answer.entries.length
        ? h('ol', { class: 'feed' }, [...answer.entries].reverse().map((entry) =>
          h('li', { 'data-testid': 'history-entry', 'data-offset': entry.offset },
            h('div', { class: 'meta' }, h('span', { class: 'offset' }, `#${entry.offset}`), h('time', {}, when(entry.publishedAt))),
            payloadBlock(entry))))
        : h('p', { class: 'muted', 'data-testid': 'history-empty' },
          answer.epoch ? 'No entries in that window.' : 'No history: the namespace keeps none, or nothing was published.'))
    } catch (failure) {
      replace(output, h('p', { class: 'error', role: 'alert' }, describe(failure)))
    }
  })
  return { form, output }
}
