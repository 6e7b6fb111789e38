import { api, describe } from '../api'
import { h, replace } from '../dom'
import { forgetSession } from '../session'
import { areaHref, go } from '../router'
import { analyticsView } from './analytics'
import type { AreaView, Cleanup } from './area'
import { mailView } from './mail'
import { realtimeView } from './realtime'

const AREAS: [string, string, AreaView][] = [
  ['analytics', 'Analytics', analyticsView],
  ['realtime', 'Realtime', realtimeView],
  ['mail', 'Mail', mailView],
]

const productNames = new Map<string, string>()

/** Names are what one session could read: forgotten when it ends, so the next one in this tab sees only its own. */
export function forgetProductNames(): void {
  productNames.clear()
}

/** One product's area under a header: the product, the three areas, switching product and signing out. */
export async function areaShell(root: HTMLElement, productId: string, area: string, rest: string[]): Promise<Cleanup | void> {
  api.productId = productId
  const name = h('span', { class: 'product-name', 'data-testid': 'product-name' })
  // Cut with an ellipsis on a narrow header: the whole name in its title.
  const showName = (text: string) => { replace(name, text); name.title = text }
  showName(productNames.get(productId) ?? '…')
  const content = h('section', { class: 'content', 'data-area': area })
  const signOut = h('button', { type: 'button', class: 'link' }, 'Sign out')
  signOut.addEventListener('click', async () => {
    await api.run('organization_auth_logout').catch(() => undefined) // signed out here whatever the server says
    await forgetSession()
    api.token = undefined
    api.productId = undefined
    go('#/signin')
  })
  replace(root,
    h('header', { class: 'topbar' },
      h('a', { href: '#/products', class: 'brand' }, 'Platform console'),
      name,
      h('nav', {}, AREAS.map(([id, title]) =>
        h('a', { href: areaHref(productId, id), class: id === area ? 'active' : '', 'aria-current': id === area ? 'page' : null }, title))),
      h('span', { class: 'spacer' }),
      h('span', { class: 'session' }, h('a', { href: '#/products' }, 'Switch product'), signOut),
    ),
    content,
  )
  if (!productNames.has(productId)) {
    api.run<{ name: string }>('organization_products_get', { path: { productId } })
      .then((product) => { productNames.set(productId, product.name); showName(product.name) })
      .catch((failure) => showName(describe(failure)))
  }
  const view = AREAS.find(([id]) => id === area)?.[2]
  if (!view) {
    replace(content, h('p', { class: 'error' }, `No area ${area}`))
    return
  }
  try {
    return await view({ root: content, productId, rest })
  } catch (failure) {
    replace(content, h('p', { class: 'error', role: 'alert' }, describe(failure)))
  }
}
