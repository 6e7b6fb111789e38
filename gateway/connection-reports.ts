// This gateway's reports of its connections, for the products someone is looking at (shared/realtime/connection-reports.ts):
// every CONNECTION_REPORT_MS it asks which products are watched and replaces its report of each it has connections
// of; a product no longer watched, or left without connections here, has its report withdrawn. A connect or a
// subscribe does nothing here: the round reads the live connections as they are.
import { randomUUID } from 'node:crypto'
import { logUnlessOutage } from '../shared/errors'
import { CONNECTION_CHANNELS_SHOWN, CONNECTION_REPORT_MS, CONNECTIONS_REPORTED_MAX, type ReportedConnection } from '../shared/realtime/connection-reports'
import type { Connection } from './client'
import type { ConnectionReportsPort } from './ports'
import { everyUnlessRunning } from './rounds'

export class ConnectionReports {
  /** This process in the reports: a restarted gateway is a new one, and its predecessor's report expires. */
  readonly gateway = randomUUID()
  /** Products this gateway has a report of. */
  private readonly reported = new Set<string>()
  private readonly timer: ReturnType<typeof setInterval>

  constructor(private readonly connections: ReadonlySet<Connection>, private readonly reports: ConnectionReportsPort, everyMs = CONNECTION_REPORT_MS) {
    this.timer = everyUnlessRunning(everyMs, () => this.round().catch((error) => logUnlessOutage('connection report failed', error)))
  }

  async round(): Promise<void> {
    const watched = new Set(await this.reports.watched())
    if (!watched.size && !this.reported.size) return
    const byProduct = new Map<string, { shown: ReportedConnection[]; total: number }>()
    if (watched.size) {
      for (const connection of this.connections) {
        const productId = connection.claims?.pid
        if (!productId || !watched.has(productId)) continue
        const report = connection.reported(CONNECTION_CHANNELS_SHOWN)
        if (!report) continue
        const product = byProduct.get(productId) ?? { shown: [], total: 0 }
        byProduct.set(productId, product)
        product.total++
        product.shown.push(report)
      }
    }
    const writes: Promise<void>[] = []
    for (const [productId, { shown, total }] of byProduct) {
      // The oldest first: a report cut to the cap keeps the connections that were there longest.
      shown.sort((a, b) => a.connectedAt - b.connectedAt)
      writes.push(this.reports.report(this.gateway, productId, shown.slice(0, CONNECTIONS_REPORTED_MAX), total))
      this.reported.add(productId)
    }
    for (const productId of [...this.reported]) {
      if (byProduct.has(productId)) continue
      this.reported.delete(productId)
      writes.push(this.reports.withdraw(this.gateway, productId))
    }
    await Promise.all(writes)
  }

  /** Reports stop; what was reported expires (CONNECTION_REPORT_TTL_MS), or is withdrawn by a last round. */
  async stop(): Promise<void> {
    clearInterval(this.timer)
    await Promise.all([...this.reported].map((productId) => this.reports.withdraw(this.gateway, productId).catch(() => undefined)))
    this.reported.clear()
  }
}
