// One timer for many deadlines: each fires once, at or after its time, unless cleared or moved.
import { expect, test } from 'bun:test'
import { Deadlines } from '../../gateway/deadlines'

test('a deadline fires once at or after its time; a cleared one never; a moved one at its new time', () => {
  const fired: string[] = []
  const deadlines = new Deadlines<string>((item) => fired.push(item))
  const t0 = Math.ceil(Date.now() / 100) * 100 + 100 // on a tick boundary (the resolution is 100 ms)
  deadlines.set('a', t0 + 1000)
  deadlines.set('b', t0 + 1000)
  deadlines.set('c', t0 + 2000)
  deadlines.set('gone', t0 + 500)
  deadlines.clear('gone')
  deadlines.set('moved', t0 + 500)
  deadlines.set('moved', t0 + 3000)
  deadlines.tick(t0 + 999)
  expect(fired).toEqual([])
  deadlines.set('late', t0 + 1050) // between boundaries: fires at the next one
  deadlines.tick(t0 + 1000)
  expect(fired.sort()).toEqual(['a', 'b'])
  deadlines.tick(t0 + 1099)
  expect(fired.sort()).toEqual(['a', 'b'])
  deadlines.tick(t0 + 1100)
  expect(fired.sort()).toEqual(['a', 'b', 'late'])
  fired.splice(fired.indexOf('late'), 1)
  deadlines.tick(t0 + 2500) // a late tick catches up
  expect(fired.sort()).toEqual(['a', 'b', 'c'])
  deadlines.tick(t0 + 3000)
  expect(fired.sort()).toEqual(['a', 'b', 'c', 'moved'])
  deadlines.tick(t0 + 10_000)
  expect(fired.length).toBe(4)
  expect(deadlines.size).toBe(0)
})

test('a deadline already past fires on the next tick, and the shared timer fires it without a manual tick', async () => {
  const fired: string[] = []
  const deadlines = new Deadlines<string>((item) => fired.push(item))
  deadlines.set('past', Date.now() - 5000)
  deadlines.set('soon', Date.now() + 150)
  await Bun.sleep(400)
  expect(fired.sort()).toEqual(['past', 'soon'])
  expect(deadlines.size).toBe(0)
})
