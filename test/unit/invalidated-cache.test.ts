// The per-worker cache of keys and policies (shared/cache/invalidated-cache.ts): `peek`, the hot paths' read without a
// promise, answers exactly what `get` would answer without loading: nothing while caching is off, nothing past the
// TTL, nothing after an invalidation of the entry or of everything. While the source is unavailable, an expired entry
// answers stale, and does so at once for a second after a load found it so.
import { afterEach, expect, test, setSystemTime } from 'bun:test'
import { config } from '../../shared/config'
import { InvalidatedCache, UNAVAILABLE_RETRY_MS } from '../../shared/cache/invalidated-cache'
import { ApiError } from '../../shared/errors'

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

test('after a load found the source unavailable, an expired entry of any cache answers stale at once for a second, without trying the source; then tries again', async () => {
  const start = Date.now()
  setSystemTime(start)
  const [keys, policies] = [await filled(), await filled()]
  setSystemTime(start + config.cache.ttlMs + 10) // both expired
  const down = () => Promise.reject(new ApiError('unavailable', 'database down'))
  let tried = 0
  const counted = () => {
    tried++
    return down()
  }
  // The first reload waits for the source and fails: the stale entry answers.
  expect(await keys.get('k', counted)).toBe('v')
  expect(tried).toBe(1)
  // Another cache's reload right after does not wait for the source again (the publish route reads two).
  expect(await policies.get('k', counted)).toBe('v')
  expect(tried).toBe(1)
  // A key never loaded has nothing to answer with: its load is tried, and fails as the source does.
  await expect(policies.get('unknown', counted)).rejects.toThrow('database down')
  expect(tried).toBe(2)
  // A second on, the source is tried again; a success clears the mark, and the next reload tries too.
  setSystemTime(start + config.cache.ttlMs + 10 + UNAVAILABLE_RETRY_MS + 5)
  expect(await policies.get('k', async () => 'fresh')).toBe('fresh')
  setSystemTime(start + 2 * config.cache.ttlMs + UNAVAILABLE_RETRY_MS + 100)
  expect(await keys.get('k', async () => 'again')).toBe('again')
})

test('a failure that is not the source being unavailable serves nothing stale and marks nothing', async () => {
  const start = Date.now()
  setSystemTime(start)
  const [one, two] = [await filled(), await filled()]
  setSystemTime(start + config.cache.ttlMs + 10)
  await expect(one.get('k', () => Promise.reject(new Error('a bug')))).rejects.toThrow('a bug')
  let tried = 0
  expect(await two.get('k', async () => (tried++, 'loaded'))).toBe('loaded')
  expect(tried).toBe(1)
})
