// Small pieces the Mail views share: a state badge, a long value a reader can select and copy, busy and confirming
// buttons (the latter from ../../confirm.ts), and a form submitted one at a time.
import { describe } from '../../api'
import { h, replace } from '../../dom'

const GOOD = new Set(['verified', 'delivered', 'sent', 'opened', 'clicked', 'succeeded'])
const BAD = new Set(['failed', 'bounced', 'complained', 'suppressed'])

/** A state (a domain's, a record's, an email's last event) as a coloured word: good, bad, or still on its way. */
export function badge(state: string): HTMLElement {
  const tone = GOOD.has(state) ? 'good' : BAD.has(state) ? 'bad' : 'waiting'
  return h('span', { class: `badge ${tone}`, 'data-state': state }, state)
}

/**
 * A value people paste elsewhere (a DNS record, a key's secret): selectable as one block, with a Copy button. Without
 * clipboard access (an insecure origin, a denied permission) the button selects the text, so Ctrl+C still works.
 */
export function copyable(value: string, attributes: Record<string, string> = {}): HTMLElement {
  const text = h('code', { class: 'copyable-value', ...attributes }, value)
  const button = h('button', { type: 'button', class: 'secondary small', title: 'Copy to the clipboard' }, 'Copy')
  button.addEventListener('click', async () => {
    const range = document.createRange()
    range.selectNodeContents(text)
    getSelection()?.removeAllRanges()
    getSelection()?.addRange(range)
    try {
      await navigator.clipboard.writeText(value)
      button.textContent = 'Copied'
    } catch {
      button.textContent = 'Selected: press Ctrl+C'
    }
    setTimeout(() => { button.textContent = 'Copy' }, 2000)
  })
  return h('span', { class: 'copyable' }, text, button)
}

/** A button that runs `action` once at a time: disabled, and labelled `busy`, while it runs. */
export function actionButton(label: string, busy: string, action: () => Promise<void>, attributes: Record<string, string> = {}): HTMLButtonElement {
  const button = h('button', { type: 'button', ...attributes }, label)
  button.addEventListener('click', () => void whileBusy(button, label, busy, action))
  return button
}

/** Runs `action` with `button` disabled and showing `busy`, then gives it back its `label`. */
async function whileBusy(button: HTMLButtonElement, label: string, busy: string, action: () => Promise<void>): Promise<void> {
  button.disabled = true
  button.textContent = busy
  try {
    await action()
  } finally {
    button.disabled = false
    button.textContent = label
  }
}

/**
 * Submits `form` through `action` one at a time: its button disabled meanwhile, and the API's refusal shown in `error`
 * (cleared at each try).
 */
export function onSubmit(form: HTMLFormElement, error: HTMLElement, action: () => Promise<void>): void {
  form.addEventListener('submit', async (event) => {
    event.preventDefault()
    replace(error)
    const submit = form.querySelector('button')!
    submit.disabled = true
    try {
      await action()
    } catch (failure) {
      replace(error, describe(failure))
    } finally {
      submit.disabled = false
    }
  })
}

// The confirming button is the console's, shared with Realtime; re-exported here where Mail's views import it.
export { CONFIRM_ARMED_MS, confirmButton } from '../../confirm'
