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
