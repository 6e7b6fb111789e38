// Hash routes, so the whole console is the one page /console and a view is a link anyone can bookmark:
//   #/signin   #/products   #/p/{productId}/{area}/{rest...}
export type Route =
  | { view: 'signin' }
  | { view: 'products' }
  | { view: 'area'; productId: string; area: string; rest: string[] }

/** A malformed escape (`%E0`) is kept as typed, not thrown: the address is the reader's to type. */
function decode(part: string): string {
  try {
    return decodeURIComponent(part)
  } catch {
    return part
  }
}

export function parseRoute(hash: string): Route {
  const parts = hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decode)
  if (parts[0] === 'p' && parts[1] && parts[2]) return { view: 'area', productId: parts[1], area: parts[2], rest: parts.slice(3) }
  if (parts[0] === 'products') return { view: 'products' }
  return { view: 'signin' }
}

export const areaHref = (productId: string, area: string, ...rest: string[]) =>
  `#/${['p', productId, area, ...rest].map(encodeURIComponent).join('/')}`

export function go(href: string): void {
  if (location.hash === href) window.dispatchEvent(new HashChangeEvent('hashchange'))
  else location.hash = href
}
