// Realtime: the product's namespaces and their policy, its live channels and connections, its Realtime API keys, a live
// channel inspector, the archive viewer and webhooks (the view both areas share), as tabs under
// #/p/{productId}/realtime/{namespaces|channels|keys|inspector|archive|webhooks}.
import { h, replace } from '../../dom'
import { areaHref } from '../../router'
import type { AreaView } from '../area'
import { archiveView } from './archive'
import { channelsView } from './channels'
import { inspectorView } from './inspector'
import { keysView } from './keys'
import { namespacesView } from './namespaces'
import { webhooksView } from '../webhooks'

const TABS = [
  ['namespaces', 'Namespaces', namespacesView],
  ['channels', 'Live channels', channelsView],
  ['keys', 'API keys', keysView],
  ['inspector', 'Channel inspector', inspectorView],
  ['archive', 'Archive', archiveView],
  ['webhooks', 'Webhooks', webhooksView('realtime')],
] as const satisfies readonly (readonly [string, string, AreaView])[]

export const realtimeView: AreaView = (context) => {
  const tab = TABS.find(([id]) => id === context.rest[0]) ?? TABS[0]
  const body = h('div', { class: 'realtime' })
  replace(context.root,
    h('nav', { class: 'tabs', 'aria-label': 'Realtime' }, TABS.map(([id, title]) =>
      h('a', { href: areaHref(context.productId, 'realtime', id), class: id === tab[0] ? 'active' : '', 'aria-current': id === tab[0] ? 'page' : null }, title))),
    body,
  )
  return tab[2]({ ...context, root: body, rest: context.rest.slice(1) })
}
