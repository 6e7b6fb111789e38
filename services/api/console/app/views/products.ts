import { describe } from '../api'
import { readAll } from '../lists'
import { h, replace } from '../dom'
import { areaHref } from '../router'

interface Product { id: string; name: string; organizationId: string; createdAt: string }

/** The products the signed-in user can act on; picking one opens its Analytics. */
export async function productsView(root: HTMLElement): Promise<void> {
  replace(root, h('p', { class: 'muted' }, 'Loading products…'))
  let products: Product[]
  try {
    products = await readAll<Product>('organization_products_list', 'products')
  } catch (failure) {
    replace(root, h('p', { class: 'error', role: 'alert' }, describe(failure)))
    return
  }
  replace(root, h('section', { class: 'card', 'data-testid': 'products' },
    h('h1', {}, 'Products'),
    products.length
      ? h('ul', { class: 'products' }, products.map((product) =>
        h('li', {}, h('a', { href: areaHref(product.id, 'analytics'), 'data-product-id': product.id }, product.name))))
      : h('p', { class: 'muted' }, 'No products yet: create one with organization_products_create.'),
  ))
}
