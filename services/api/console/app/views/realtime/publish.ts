// The inspector's test publish: JSON from a textarea, checked in the page, then realtime_messages_publish (the
// backend's publish with the product's quota, so it works whether or not the namespace allows client events).
import { api, describe } from '../../api'
import { h, replace } from '../../dom'

export function publishForm(channel: string): HTMLFormElement {
  const message = h('textarea', { name: 'data', rows: 4, spellcheck: 'false' }, '{\n  "hello": "from the console"\n}')
  const result = h('p', { class: 'muted', role: 'status', 'data-testid': 'publish-result' })
  const button = h('button', { type: 'submit' }, 'Publish')
  const form = h('form', { class: 'publish-form', 'data-testid': 'publish-form' },
    h('label', {}, 'JSON data', message), h('div', { class: 'actions' }, button, result))
  const show = (outcome: 'ok' | 'error', text: string) => {
    result.className = outcome
    replace(result, text)
  }
  form.addEventListener('submit', async (event) => {
    event.preventDefault()
    let data: unknown
    try {
      data = JSON.parse(message.value)
    } catch (failure) {
      return show('error', `Not JSON: ${(failure as Error).message}`)
    }
    button.disabled = true
    try {
      const answer = await api.run<{ id: string; offset?: number }>('realtime_messages_publish', { body: { channel, data } })
      show('ok', answer.offset !== undefined ? `Published at offset ${answer.offset}.` : `Published (${answer.id}).`)
    } catch (failure) {
      show('error', describe(failure))
    } finally {
      button.disabled = false
    }
  })
  return form
}
