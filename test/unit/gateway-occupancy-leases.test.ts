// A gateway's occupancy leases, with a fake backend: a refresh round whose first chunk fails still refreshes the rest.
import { expect, test } from 'bun:test'
import { OccupancyLeases } from '../../gateway/occupancy'
import type { Occupancy } from '../../gateway/ports'

test('a failing chunk of a refresh round does not cancel the other chunks (their leases would expire into false vacates)', async () => {
  const refreshed: string[][] = []
  let rounds = 0
  const occupancy: Occupancy = {
    async hold(_holder, channels) {
      const list = [...channels].map((c) => c.channel)
      if (list.length === 1) return // the first subscriber's own hold
      if (list.includes('c0')) {
        rounds++
        throw new Error('first chunk fails')
      }
      refreshed.push(list)
    },
    async release() {},
  }
  const leases = new OccupancyLeases(occupancy, 400) // a round every 200 ms
  for (let i = 0; i < 250; i++) leases.first('00000000-0000-4000-8000-000000000001', `c${i}`)
  for (let i = 0; i < 40 && !refreshed.length; i++) await Bun.sleep(25)
  leases.stop()
  expect(rounds).toBeGreaterThan(0)
  expect(refreshed[0]).toEqual(Array.from({ length: 50 }, (_, i) => `c${200 + i}`))
})

test('counts that change many times between rounds go once, the latest; a channel released meanwhile sends none', async () => {
  const product = '00000000-0000-4000-8000-000000000002'
  const held: { channel: string; subscriptions?: number }[][] = []
  const occupancy: Occupancy = {
    async hold(_holder, channels) {
      held.push(channels.map(({ channel, subscriptions }) => ({ channel, subscriptions })))
    },
    async release() {},
  }
  const leases = new OccupancyLeases(occupancy, 60_000, 50)
  leases.first(product, 'chat:a')
  leases.first(product, 'chat:b')
  for (let n = 2; n <= 9; n++) leases.counted(product, 'chat:a', n)
  leases.counted(product, 'chat:b', 2)
  leases.last(product, 'chat:b')
  for (let i = 0; i < 80 && held.length < 3; i++) await Bun.sleep(25)
  // Rounds that find nothing changed send nothing: the next hold is the next change.
  leases.counted(product, 'chat:a', 4)
  for (let i = 0; i < 80 && held.length < 4; i++) await Bun.sleep(25)
  leases.stop()
  expect(held).toEqual([[{ channel: 'chat:a', subscriptions: 1 }], [{ channel: 'chat:b', subscriptions: 1 }],
    [{ channel: 'chat:a', subscriptions: 9 }], [{ channel: 'chat:a', subscriptions: 4 }]])
})
