// The session across a reload (docs/console.md): after sign-in the page asks the api to park its token in an HttpOnly
// cookie that only /console/session reads; on load it asks for it back. Every call carries the header the api requires
// of the console's own page, and none sends the token anywhere but in the Authorization header of a same-origin call.
import { api } from './api'

const OWN_PAGE = { 'x-console': '1' }
/** Where this origin keeps the binding the parked cookie must match (services/api/console/session.ts, BINDING_HEADER). */
const BINDING_KEY = 'console.session-binding'

/** This browser's binding for this origin, made on first use: 32 random bytes, base64url (43 characters). */
function binding(): string {
  const kept = localStorage.getItem(BINDING_KEY)
  if (kept) return kept
  const bytes = crypto.getRandomValues(new Uint8Array(32))
  const made = btoa(String.fromCharCode(...bytes)).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '')
  localStorage.setItem(BINDING_KEY, made)
  return made
}

/** Parks the signed-in token for the next load of this page; a failure only means the next reload asks to sign in. */
export async function keepSession(): Promise<void> {
  if (!api.token) return
  await fetch('/console/session', { method: 'POST', headers: { ...OWN_PAGE, 'x-console-binding': binding(), authorization: `Bearer ${api.token}` } })
    .catch(() => undefined)
}

/** The parked token of a session still alive, put back in memory; false when there is none (or it ended). */
export async function restoreSession(): Promise<boolean> {
  const kept = localStorage.getItem(BINDING_KEY)
  if (!kept) return false // nothing was parked from this origin (a cookie without it is not this page's)
  const response = await fetch('/console/session/restore', { method: 'POST', headers: { ...OWN_PAGE, 'x-console-binding': kept } }).catch(() => undefined)
  if (response?.status !== 200) return false // 204: nothing parked, or its session ended
  const { token } = await response.json() as { token: string }
  api.token = token
  return true
}

/** Forgets the parked token (sign-out): the next load asks to sign in. */
export async function forgetSession(): Promise<void> {
  localStorage.removeItem(BINDING_KEY)
  await fetch('/console/session', { method: 'DELETE', headers: OWN_PAGE }).catch(() => undefined)
}
