// The console's entry: draws the view the #fragment names, and stops the previous view's live work first.
import { api } from './api'
import { h } from './dom'
import { parseRoute } from './router'
import type { Cleanup } from './views/area'
import { productsView } from './views/products'
import { areaShell } from './views/shell'
import { signInView } from './views/signin'

let cleanup: Cleanup | void
let drawing = 0

async function draw(): Promise<void> {
  const root = document.getElementById('app')!
  const turn = ++drawing
  cleanup?.()
  cleanup = undefined
  const route = parseRoute(location.hash)
  // Every view but sign-in needs the in-memory session; a reload lost it, so sign in again.
  if (route.view === 'signin' || !api.token) {
    if (route.view !== 'signin') history.replaceState(null, '', '#/signin')
    signInView(root)
    return
  }
  if (route.view === 'products') return productsView(root)
  const stop = await areaShell(root, route.productId, route.area, route.rest)
  if (turn === drawing) cleanup = stop
  else stop?.() // the reader moved on while the view was loading
}

window.addEventListener('hashchange', () => void draw())
window.addEventListener('error', (event) => {
  const root = document.getElementById('app')
  if (root) root.prepend(h('p', { class: 'error', role: 'alert' }, String(event.message)))
})
void draw()
