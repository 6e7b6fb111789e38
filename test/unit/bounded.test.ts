// The bound of the process-local memos (shards, publish keys, key digests): full, a memo starts over.
import { expect, test } from 'bun:test'
import { keepBounded } from '../../shared/cache/bounded'

test('a memo holds at most its bound: at the bound, the next entry empties it first', () => {
  const memo = new Map<string, number>()
  for (let i = 0; i < 3; i++) keepBounded(memo, 3, `k${i}`, i)
  expect([...memo.keys()]).toEqual(['k0', 'k1', 'k2'])
  keepBounded(memo, 3, 'k3', 3)
  expect([...memo.entries()]).toEqual([['k3', 3]])
  for (let i = 0; i < 10_000; i++) keepBounded(memo, 3, `flood${i}`, i)
  expect(memo.size).toBeLessThanOrEqual(3)
})
