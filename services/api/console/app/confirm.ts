// Every destructive action of the console confirms in the page, never with window.confirm() (which blocks the tab
// and cannot be styled): a button that arms on the first click and acts on the second.
import { h } from './dom'

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
    await whileBusy(button, label, action)
  })
  return button
}

/** Runs `action` with `button` disabled, then gives it back its `label`. */
async function whileBusy(button: HTMLButtonElement, label: string, action: () => Promise<void>): Promise<void> {
  button.disabled = true
  button.textContent = label
  try {
    await action()
  } finally {
    button.disabled = false
    button.textContent = label
  }
}
