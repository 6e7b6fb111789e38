// Resolving an API key's digest to its identity, for every kind of key the public routes take: a per-worker cache that
// invalidations drop, and a failing lookup answered as 503 (logged unless PostgreSQL is simply down).
import type { InvalidatedCache } from '../../../shared/cache/invalidated-cache'
import { logUnlessOutage, unavailable } from '../../../shared/errors'

/**
 * A cached lookup by digest. Only found keys are cached: a new key works at once, and an unknown key costs one index
 * hit (the IP rate limit bounds how many a client can try: `beforeLookup`, the request's deferred IP limit, runs before
 * any lookup that leaves the process). `cache` is exported by the caller for its invalidations.
 */
export function cachedKeyLookup<Identity, Ref = Buffer>(
  cache: InvalidatedCache<Identity | null>, what: string, find: (digest: Ref) => Promise<Identity | null>,
  /** The cache entry's name; a digest's hex by default (capture keys, stored readable, are their own name). */
  cacheKey: (digest: Ref) => string = (digest) => (digest as Buffer).toString('hex'),
): (digest: Ref, beforeLookup?: () => Promise<void>, name?: string) => Promise<Identity | null> {
  // `name`: the entry's name when the caller has it already (cacheKey's answer, remembered).
  return (digest, beforeLookup, name = cacheKey(digest)) => cache.get(name, async () => {
    await beforeLookup?.()
    try {
      return await find(digest)
    } catch (error) {
      logUnlessOutage(`${what} lookup failed`, error)
      throw unavailable('API key verification is unavailable; retry shortly')
    }
  }, (identity) => identity !== null)
}
