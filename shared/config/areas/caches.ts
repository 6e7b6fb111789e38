// The per-worker caches of keys and policies that invalidation messages drop (shared/cache/).
import { area, integer } from '../variable'

export const caches = area('Worker caches',
  'Each worker caches API keys (Realtime, Mail sending, capture), namespace policies and a gateway\'s revocation answers; an invalidation message drops an entry on every worker at once (`shared/cache/`).', {
    ttlMs: integer('CACHE_TTL_MS', {
      default: 5000, min: 100, max: 600_000, formerNames: ['REALTIME_CACHE_TTL_MS'],
      description: 'Longest a worker trusts a cached key, policy or revocation answer without an invalidation message, in ms.',
    }),
    maxEntries: integer('CACHE_MAX_ENTRIES', {
      default: 10_000, min: 100, max: 10_000_000, formerNames: ['REALTIME_CACHE_MAX_ENTRIES'],
      description: 'Most entries one per-worker cache holds; past it the oldest is dropped and read again from PostgreSQL when needed.',
    }),
  })
