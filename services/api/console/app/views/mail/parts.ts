// Small pieces the Mail views share: a state badge, a long value a reader can select and copy, busy and confirming
// buttons, and a form submitted one at a time.
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

/** How long a destructive button stays armed ("Confirm …") without a second click. */
export const CONFIRM_ARMED_MS = 3000

/**
 * A destructive button that asks first: the first click turns it into "Confirm …", the second runs `action`.
 * It disarms by itself after CONFIRM_ARMED_MS, when it loses focus, on Escape, or on a press anywhere else, so a
 * forgotten first click never turns some later stray click into a deletion.
 * No window.confirm(): a page dialog blocks the tab and cannot be styled.
 */
export function confirmButton(label: string, action: () => Promise<void>, attributes: Record<string, string> = {}): HTMLButtonElement {
  const button = h('button', { type: 'button', class: 'danger small', ...attributes }, label)
  let timer: ReturnType<typeof setTimeout> | undefined
  const pressedElsewhere = (event: Event) => { if (!button.contains(event.target as Node)) disarm() }
  const escapeKey = (event: KeyboardEvent) => { if (event.key === 'Escape') disarm() }
  function disarm(): void {
    if (timer === undefined) return
    clearTimeout(timer)
    timer = undefined
    document.removeEventListener('pointerdown', pressedElsewhere, true)
    document.removeEventListener('keydown', escapeKey, true)
    button.removeAttribute('data-armed')
    if (!button.disabled) button.textContent = label
  }
  button.addEventListener('blur', disarm)
  button.addEventListener('click', async () => {
    if (timer === undefined) {
      timer = setTimeout(disarm, CONFIRM_ARMED_MS)
      document.addEventListener('pointerdown', pressedElsewhere, true)
      document.addEventListener('keydown', escapeKey, true)
      button.setAttribute('data-armed', '')
      button.textContent = `Confirm ${label.toLowerCase()}`
      return
    }
    disarm()
    await whileBusy(button, label, label, action)
  })
  return button
}
