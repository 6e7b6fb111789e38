// Revoked product API keys, as seen by gateways: a token names the key that issued it (`akid`), and revoking that key
// must end the token too. PostgreSQL (public_keys.revoked_at) is the authority. Redis only carries the announcement
// (platform:invalidate), which a Redis outage can lose and a Redis restarted empty forgets, so nothing here takes "Redis
// says nothing" for "not revoked": a gateway asks PostgreSQL once per key id and caches the answer briefly, by count.
import { config } from '../config'
import { sql as defaultSql, type Sql } from '../db/client'
import { isUuid } from '../ids'
import { STALE_IF_UNAVAILABLE_MS } from '../cache/invalidated-cache'
import { TOKEN_TTL_MAX } from './tokens'

/** Most key ids one sweep query names (a gateway's live connections may hold many). */
const SWEEP_CHUNK = 1000
/** How long a revocation is remembered: past it no token the key issued can still be alive (longest lifetime + skew). */
const REVOKED_REMEMBERED_MS = (TOKEN_TTL_MAX + 60) * 1000

/**
 * Which of these API keys are revoked, in one query per SWEEP_CHUNK ids. A console token's key id is the login session
 * or platform key that asked for it (realtime_tokens_issue): active while that session or key is. A key that is not
 * there at all (its product was deleted, or the id is not one of this environment's keys) counts as revoked: only an
 * active key keeps its tokens.
 * Throws when PostgreSQL cannot answer: an unanswered check is not "not revoked".
 */
export async function revokedAmong(keyIds: Iterable<string>, sql: Sql = defaultSql): Promise<Set<string>> {
  const ids = [...new Set(keyIds)]
  const revoked = new Set(ids.filter((id) => !isUuid(id)))
  const valid = ids.filter((id) => !revoked.has(id))
  for (let i = 0; i < valid.length; i += SWEEP_CHUNK) {
    const chunk = valid.slice(i, i + SWEEP_CHUNK)
    // The platform's own tokens (the console's) name the session or platform key that asked for them instead.
    const rows = await sql`
      select id from public_keys
      where id = any(${chunk}::uuid[]) and environment = ${config.environment} and revoked_at is null
      union all
      select id from sessions where id = any(${chunk}::uuid[]) and revoked_at is null and expires_at > now()
      union all
      select id from platform_keys where id = any(${chunk}::uuid[]) and revoked_at is null`
    const active = new Set(rows.map((row) => String(row.id)))
    for (const id of chunk) if (!active.has(id.toLowerCase())) revoked.add(id)
  }
  return revoked
}

/**
 * A gateway's answers to "is this key revoked?", keyed by key id, so a connect with a known key costs no query.
 * - An active answer is trusted for `activeTtlMs` (REALTIME_CACHE_TTL_MS): a revocation this gateway did not hear
 *   (Redis down at revoke time, or restarted empty) refuses new connects within that, and the sweep closes live ones.
 * - A revoked answer is kept until no token of the key can be alive: revocation is for good.
 * - At most `maxEntries` (REALTIME_CACHE_MAX_ENTRIES); past it the oldest answer goes and is asked again when needed.
 * Concurrent checks of one id share one query; an invalidation during a query keeps its "active" answer out.
 */
export class RevocationCache {
  private readonly entries = new Map<string, { revoked: boolean; until: number }>()
  private readonly loading = new Map<string, Promise<boolean>>()
  private generation = 0

  constructor(
    private readonly maxEntries = config.cache.maxEntries,
    private readonly activeTtlMs = config.cache.ttlMs,
    private readonly check: (ids: string[]) => Promise<Set<string>> = (ids) => revokedAmong(ids),
  ) {}

  /** Entries held now (for tests of the bound). */
  get size(): number {
    return this.entries.size
  }

  /**
   * True when the key is revoked. Throws when PostgreSQL cannot tell and there is no usable answer; an active answer
   * that expired less than STALE_IF_UNAVAILABLE_MS ago still answers then (no revocation can commit without PostgreSQL).
   */
  async isRevoked(keyId: string): Promise<boolean> {
    const hit = this.entries.get(keyId)
    if (hit && hit.until > Date.now()) return hit.revoked
    let pending = this.loading.get(keyId)
    if (!pending) {
      const started = this.generation
      pending = this.check([keyId]).then((revoked) => {
        const answer = revoked.has(keyId)
        if (answer) this.markRevoked(keyId)
        else if (this.generation === started && !this.entries.get(keyId)?.revoked) this.store(keyId, false, this.activeTtlMs)
        return answer
      }).finally(() => this.loading.delete(keyId))
      this.loading.set(keyId, pending)
    }
    try {
      // A revocation heard while the query ran wins: the connection it was for must not slip past the close it caused.
      return (await pending) || this.entries.get(keyId)?.revoked === true
    } catch (error) {
      if (hit && !hit.revoked && Date.now() - hit.until < STALE_IF_UNAVAILABLE_MS && this.entries.get(keyId) === hit) return false
      throw error
    }
  }

  /** A revocation heard (an invalidation message, a sweep): kept until no token of the key can be alive. */
  markRevoked(keyId: string): void {
    this.generation++
    this.store(keyId, true, REVOKED_REMEMBERED_MS)
  }

  /** Drops every active answer (revocations stay): after a gap in invalidations, anything may have been revoked. */
  forgetActive(): void {
    this.generation++
    for (const [id, entry] of this.entries) if (!entry.revoked) this.entries.delete(id)
  }

  private store(keyId: string, revoked: boolean, ttlMs: number): void {
    this.entries.delete(keyId) // re-inserted last: the Map's order is the eviction order
    this.entries.set(keyId, { revoked, until: Date.now() + ttlMs })
    while (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value!)
  }
}

/** This process's answers (a gateway's): dropped and filled by gateway/sweeps.ts from invalidations and sweeps. */
export const revocations = new RevocationCache()

/** True when the API key that issued a token has been revoked: a gateway refuses (4001) or closes such a connection. */
export const isKeyRevoked = (keyId: string): Promise<boolean> => revocations.isRevoked(keyId)
