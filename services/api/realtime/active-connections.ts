// The product's connections on one gateway, as the gateways report them while someone looks: asking marks the product
// watched, so the first answer after a while without one may be empty until the gateways' next round (about a second).
import { pageOf } from '../../../shared/catalog/pagination'
import { iso } from '../../../shared/catalog/schemas'
import {
  CONNECTION_REPORT_TTL_MS, reportedConnections, reportingGateways, watchConnections,
} from '../../../shared/realtime/connection-reports'

export interface ConnectionsQuery {
  gateway?: string
  limit?: number
  after?: string
}

/** The gateways reporting the product's connections, and a page of one gateway's (the first by id unless named). */
export async function productConnections(productId: string, query: ConnectionsQuery) {
  await watchConnections(productId)
  const page = pageOf(query)
  const gateways = await reportingGateways(productId)
  const gateway = query.gateway?.toLowerCase() ?? gateways[0]?.gateway
  const listed = gateway !== undefined && gateways.some((g) => g.gateway === gateway) ? await reportedConnections(productId, gateway) : []
  const rest = page.after === undefined ? listed : listed.filter((c) => c.id > page.after!)
  return {
    gateways: gateways.map((g) => ({ gateway: g.gateway, connections: g.connections, reportedAt: iso(new Date(g.expiresAt - CONNECTION_REPORT_TTL_MS)) })),
    gateway: gateway ?? null,
    connections: rest.slice(0, page.limit).map((c) => ({ ...c, connectedAt: iso(new Date(c.connectedAt)) })),
    has_more: rest.length > page.limit,
  }
}
