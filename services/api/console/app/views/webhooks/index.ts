// Webhooks, the same pages in each area that has them (Realtime, Mail), over that area's webhook operations:
//   #/p/{id}/{area}/webhooks   .../webhooks/{endpointId}   .../webhooks/{endpointId}/deliveries/{deliveryId}
import { h, replace } from '../../dom'
import type { AreaView } from '../area'
import { deliveryView } from './delivery'
import { endpointView } from './endpoint'
import { endpointsView } from './endpoints'
import type { WebhookArea } from './parts'

/** The webhooks view of `area`, for its tabs; `rest` is the route after .../webhooks/. */
export function webhooksView(area: WebhookArea): AreaView {
  return async ({ root, productId, rest }) => {
    const view = h('div', { class: 'webhooks-view', 'data-webhooks-area': area })
    replace(root, view)
    const [endpointId, sub, deliveryId] = rest
    if (!endpointId) return endpointsView(view, area, productId)
    if (sub === 'deliveries' && deliveryId) return deliveryView(view, area, productId, endpointId, deliveryId)
    if (sub === undefined) return endpointView(view, area, productId, endpointId)
    replace(view, h('p', { class: 'error' }, 'No such webhooks page'))
  }
}
