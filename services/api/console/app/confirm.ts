// Every destructive action of the console confirms in the page, never with window.confirm() (which blocks the tab
// and cannot be styled): a button that arms on the first click and acts on the second (confirmButton), or, where the
// action applies to one row or tile of many, a question asked in its place (askInPlace).
import { h, replace } from './dom'

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

/** What askInPlace offers, asks and runs. */
export interface InPlaceQuestion {
  /** The button first offered in `cell`: its text and `data-action` (and `aria-label`, when the text alone is vague). */
  offer: { label: string; action: string; ariaLabel?: string }
  /** The question, then the confirming button's text, `data-action`, and the question's `data-testid`. */
  question: string
  confirm: { label: string; action: string; testid: string }
  /** Runs the action; `false` (a refusal, shown by the caller) offers the button again. */
  run(button: HTMLButtonElement): Promise<boolean>
}

/**
 * A destructive action asked about where it applies (a table row, a tile): `cell` offers its button; a click replaces
 * it with the question, the confirming button and Keep. Keep, or an action that did not go through, offers the button
 * again.
 */
export function askInPlace(cell: HTMLElement, question: InPlaceQuestion): void {
  const { offer: first, confirm } = question
  const offer = () => replace(cell, h('button', {
    type: 'button', class: 'secondary small', 'data-action': first.action, ...(first.ariaLabel ? { 'aria-label': first.ariaLabel } : {}), onclick: ask,
  }, first.label))
  const ask = () => replace(cell, h('span', { class: 'confirm', 'data-testid': confirm.testid },
    h('span', {}, question.question), ' ',
    h('button', { type: 'button', class: 'small danger', 'data-action': confirm.action, onclick: (event: Event) => void go(event.target as HTMLButtonElement) }, confirm.label), ' ',
    h('button', { type: 'button', class: 'secondary small', 'data-action': 'keep', onclick: offer }, 'Keep')))
  const go = async (button: HTMLButtonElement) => {
    button.disabled = true
    if (!(await question.run(button).catch(() => false))) offer()
  }
  offer()
}

/** Runs `action` with `button` disabled and showing `busy`, then gives it back its `label`. */
export async function whileBusy(button: HTMLButtonElement, label: string, action: () => Promise<void>, busy = label): Promise<void> {
  button.disabled = true
  button.textContent = busy
  try {
    await action()
  } finally {
    button.disabled = false
    button.textContent = label
  }
}
