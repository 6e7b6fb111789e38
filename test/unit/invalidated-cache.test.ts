// The per-worker cache of keys and policies (shared/cache/invalidated-cache.ts): `peek`, the hot paths' read without a
// promise, answers exactly what `get` would answer without loading: nothing while caching is off, nothing past the
// TTL, nothing after an invalidation of the entry or of everything.
import { afterEach, expect, test, setSystemTime } from 'bun:test'
import { config } from '../../shared/config'
import { InvalidatedCache } from '../../shared/cache/invalidated-cache'

afterEach(() => void setSystemTime())

const filled = async (caching = true) => {
  const cache = new InvalidatedCache<string>()
  cache.setCaching(caching)
  expect(await cache.get('k', async () => 'v')).toBe('v')
  return cache
}

test('a fresh entry is peeked; an unknown key is not', async () => {
  const cache = await filled()
  expect(cache.peek('k')).toBe('v')
  expect(cache.peek('other')).toBeUndefined()
})

test('nothing is peeked while caching is off, nor after it is switched off', async () => {
  expect((await filled(false)).peek('k')).toBeUndefined()
  const cache = await filled()
  cache.setCaching(false)
  expect(cache.peek('k')).toBeUndefined()
})

test('an entry invalidated, alone or with all, is not peeked', async () => {
  const one = await filled()
  one.forget('k')
  expect(one.peek('k')).toBeUndefined()
  const all = await filled()
  all.forgetAll()
  expect(all.peek('k')).toBeUndefined()
})

test('an entry past its TTL is not peeked (get would load it again)', async () => {
  const start = Date.now()
  setSystemTime(start)
  const cache = await filled()
  setSystemTime(start + config.cache.ttlMs - 1)
  expect(cache.peek('k')).toBe('v')
  setSystemTime(start + config.cache.ttlMs)
  expect(cache.peek('k')).toBeUndefined()
})
