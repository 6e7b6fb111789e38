// The recovery merge: history after the cursor plus live messages buffered meanwhile, by offset, once each.
import { expect, test } from 'bun:test'
import { merge, type Positioned } from '../../gateway/recovery'

const at = (...offsets: number[]): Positioned[] => offsets.map((offset) => ({ offset, frame: `f${offset}` }))
const offsets = (items: Positioned[]) => items.map((i) => i.offset)

test('history and buffered live messages overlap: each offset once, in order', () => {
  expect(offsets(merge(at(4, 5, 6), at(6, 7, 8), 3))).toEqual([4, 5, 6, 7, 8])
})

test('nothing at or before the cursor is sent again', () => {
  expect(offsets(merge(at(2, 3, 4), at(3, 4, 5), 3))).toEqual([4, 5])
})

test('live messages that arrived out of order in the buffer still come out in offset order', () => {
  expect(offsets(merge([], at(9, 7, 8), 6))).toEqual([7, 8, 9])
})

test('no gap is invented and none is hidden: what is missing stays missing', () => {
  expect(offsets(merge(at(4, 5), at(7), 3))).toEqual([4, 5, 7])
})

test('the history copy of a duplicate wins (same message, same frame either way)', () => {
  expect(merge([{ offset: 5, frame: 'history' }], [{ offset: 5, frame: 'live' }], 0)).toEqual([{ offset: 5, frame: 'history' }])
})

test('empty inputs', () => {
  expect(merge([], [], 0)).toEqual([])
})
