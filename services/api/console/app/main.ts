// The console's entry: draws the view the #fragment names, and stops the previous view's live work first.
import { api, describe } from './api'
import { h, replace } from './dom'
import { go, parseRoute } from './router'
import type { Cleanup } from './views/area'
import { productsView } from './views/products'
import { areaShell, forgetProductNames } from './views/shell'
import { signInView } from './views/signin'
import { restoreSession } from './session'

let cleanup: Cleanup | void
let drawing = 0
/** The view asked for before signing in (a bookmark, or where the session expired): shown once signed in. */
let wanted: string | undefined
/** Asked once per load of the page: a reload keeps the session it had (session.ts). */
const restored = restoreSession()

function showError(message: string): void {
  document.getElementById('app')?.prepend(h('p', { class: 'error', role: 'alert' }, message))
}

async function draw(): Promise<void> {
  const root = document.getElementById('app')!
  const turn = ++drawing
  cleanup?.()
  cleanup = undefined
  // A fresh container per view: a view still loading when the reader moves on writes into a detached node, never
  // over the view drawn since.
  const view = h('div', { class: 'view' })
  replace(root, view)
  await restored
  if (turn !== drawing) return
  const route = parseRoute(location.hash)
  if (!api.token) {
    forgetProductNames()
    api.productId = undefined
    if (route.view !== 'signin') {
      wanted = location.hash
      history.replaceState(null, '', '#/signin')
    }
    signInView(view, () => {
      const next = wanted ?? '#/products'
      wanted = undefined
      go(next)
    })
    return
  }
  // Signed in already (Back to #/signin): the form would start a second session and orphan this one.
  if (route.view === 'signin') return go('#/products')
  api.productId = undefined
  if (route.view === 'products') return productsView(view)
  const stop = await areaShell(view, route.productId, route.area, route.rest)
  if (turn === drawing) cleanup = stop
  else stop?.() // the reader moved on while the view was loading
}

api.onSessionEnded = () => {
  wanted = location.hash
  go('#/signin')
}
window.addEventListener('hashchange', () => void draw())
window.addEventListener('error', (event) => showError(String(event.message)))
window.addEventListener('unhandledrejection', (event) => showError(describe(event.reason)))
void draw()
