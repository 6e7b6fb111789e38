// A per-worker cache that is trusted only while the worker hears invalidations, for at most config.cache.ttlMs.
// Used for API keys and product policies (public workers) and policies (gateways): the same rules, in one place.
import { config } from '../config'
import { ApiError } from '../errors'

/**
 * How long past its expiry an entry may still answer while its source (PostgreSQL) is unavailable. Safe because it only
 * happens while invalidations are heard (a revocation would have dropped the entry), and a change needs that same
 * database, which is down: the stale value is still the current one. Bounded anyway, so an outage cannot make it eternal.
 */
export const STALE_IF_UNAVAILABLE_MS = 60_000

/**
 * After a load found the source unavailable (503), how long an entry that may answer stale does so at once, without
 * trying the source again. Every cache here reads PostgreSQL: a request that needs two of them (the publish route: its
 * key, then its product's policies) would otherwise wait out the database's deadline once per cache while PostgreSQL
 * hangs (a deadline does not open its breaker), twice the outage bound (docs/architecture.md, "Outages").
 */
export const UNAVAILABLE_RETRY_MS = 1000

/** When a load of any cache last found its source unavailable (ms); cleared by a load that succeeds. */
let sourceUnavailableAt = -Infinity

export class InvalidatedCache<V> {
  private readonly entries = new Map<string, { value: V; until: number }>()
  /** Most entries held (CACHE_MAX_ENTRIES); past it the oldest goes and is loaded again when next needed. */
  constructor(private readonly maxEntries = config.cache.maxEntries) {}

  /** Entries held now (for tests of the bound). */
  get size(): number {
    return this.entries.size
  }

  // Bumped by every invalidation and every switch: a load that started before one must not store what it read.
  private generation = 0
  // Off until the worker listens for invalidations: a cache nobody can drop would let a revoked key live on.
  private caching = false

  /** On only while subscribed to invalidations; either way the cache starts empty. */
  setCaching(on: boolean): void {
    this.caching = on
    this.forgetAll()
  }

  forget(key: string): void {
    this.generation++
    this.entries.delete(key)
  }

  forgetAll(): void {
    this.generation++
    this.entries.clear()
  }

  /** Whether an expired entry may answer while the source is unavailable (STALE_IF_UNAVAILABLE_MS). */
  private mayAnswerStale(hit: { until: number }, now: number): boolean {
    return this.caching && now - hit.until < STALE_IF_UNAVAILABLE_MS
  }

  /** A fresh entry's value, or undefined: `get` without a promise, for the hot paths. */
  peek(key: string): V | undefined {
    const hit = this.entries.get(key)
    return hit && hit.until > Date.now() ? hit.value : undefined
  }

  /**
   * The cached value, or `load()`'s, stored when `keep(value)` holds, caching is on and no invalidation arrived while it
   * loaded. A value not kept also drops an expired entry for the key. When `load()` fails with 503 (its source is
   * unavailable), a recently expired entry answers instead (STALE_IF_UNAVAILABLE_MS).
   */
  async get(key: string, load: () => Promise<V>, keep: (value: V) => boolean = () => true): Promise<V> {
    const hit = this.entries.get(key)
    const now = Date.now()
    if (hit && hit.until > now) return hit.value
    // The source was unavailable a moment ago: an entry that may answer stale answers now, not after its deadline.
    if (hit && this.mayAnswerStale(hit, now) && now - sourceUnavailableAt < UNAVAILABLE_RETRY_MS) return hit.value
    const started = this.generation
    let value: V
    try {
      value = await load()
    } catch (error) {
      const unavailable = error instanceof ApiError && error.status === 503
      if (unavailable) sourceUnavailableAt = Date.now()
      if (unavailable && hit && this.generation === started && this.mayAnswerStale(hit, Date.now())) return hit.value
      throw error
    }
    sourceUnavailableAt = -Infinity
    if (!keep(value)) this.entries.delete(key)
    else if (this.caching && this.generation === started) {
      this.entries.delete(key) // re-inserted last: the Map's order is the eviction order
      this.entries.set(key, { value, until: Date.now() + config.cache.ttlMs })
      while (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value!)
    }
    return value
  }
}
