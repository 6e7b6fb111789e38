import { api, describe } from '../api'
import { h, replace } from '../dom'
import { keepSession } from '../session'

/** Sign in with the platform login; the session token is held in memory (api.token) and parked for a reload. Then `signedIn()`. */
export function signInView(root: HTMLElement, signedIn: () => void): void {
  const error = h('p', { class: 'error', role: 'alert' })
  const email = h('input', { name: 'email', type: 'email', autocomplete: 'username', required: true, maxlength: 254 })
  const password = h('input', { name: 'password', type: 'password', autocomplete: 'current-password', required: true, maxlength: 256 })
  const form = h('form', { class: 'card signin', 'data-testid': 'signin' },
    h('h1', {}, 'Sign in'),
    h('label', {}, 'Email', email),
    h('label', {}, 'Password', password),
    h('button', { type: 'submit' }, 'Sign in'),
    error,
  )
  form.addEventListener('submit', async (event) => {
    event.preventDefault()
    replace(error)
    try {
      const session = await api.run<{ token: string }>('organization_auth_login', { body: { email: email.value, password: password.value } })
      api.token = session.token
      await keepSession()
      signedIn()
    } catch (failure) {
      replace(error, describe(failure))
    }
  })
  replace(root, form)
}
