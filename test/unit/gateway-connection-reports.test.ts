// A gateway's connection reports with an in-memory port: only watched products are reported, each with its own
// connections only, and a report is withdrawn once its product is no longer watched or has no connection left here.
import { expect, test } from 'bun:test'
import type { Connection } from '../../gateway/client'
import { ConnectionReports } from '../../gateway/connection-reports'
import type { ConnectionReportsPort } from '../../gateway/ports'
import type { ReportedConnection } from '../../shared/realtime/connection-reports'

const A = '00000000-0000-4000-8000-00000000000a'
const B = '00000000-0000-4000-8000-00000000000b'

/** A connected connection of `productId` as a report reads it. */
const connection = (id: string, productId: string, connectedAt: number) => ({
  claims: { pid: productId },
  reported: (): ReportedConnection => ({ id, subject: `ext:${id}`, connectedAt, subscriptions: 1, channels: ['chat:x'] }),
}) as unknown as Connection

test('watched products only, each with its own connections (oldest first); withdrawn when unwatched or emptied', async () => {
  let watched: string[] = []
  const reports = new Map<string, string[]>()
  const heard: string[] = []
  const port: ConnectionReportsPort = {
    watched: async () => watched,
    async report(_gateway, productId, connections, total) {
      reports.set(productId, connections.map((c) => c.id))
      heard.push(`report ${productId === A ? 'A' : 'B'} ${total}`)
    },
    async withdraw(_gateway, productId) {
      reports.delete(productId)
      heard.push(`withdraw ${productId === A ? 'A' : 'B'}`)
    },
  }
  const connections = new Set([connection('a2', A, 2), connection('a1', A, 1), connection('b1', B, 1)])
  const gateway = new ConnectionReports(connections, port, 3_600_000) // rounds run by hand below
  await gateway.round()
  expect(heard).toEqual([]) // nobody looks: nothing written
  watched = [A]
  await gateway.round()
  expect(reports).toEqual(new Map([[A, ['a1', 'a2']]]))
  watched = [A, B]
  await gateway.round()
  expect(reports).toEqual(new Map([[A, ['a1', 'a2']], [B, ['b1']]]))
  for (const c of [...connections]) if (c.claims!.pid === B) connections.delete(c)
  watched = [B]
  await gateway.round()
  expect(reports).toEqual(new Map())
  expect(heard.slice(-2).sort()).toEqual(['withdraw A', 'withdraw B'])
  await gateway.stop()
})
