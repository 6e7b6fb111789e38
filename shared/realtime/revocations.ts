// Revoked token credentials, as seen by gateways: a token names the credential that asked for it (`akid`: a product API
// key, or for the console's tokens a login session or platform key) and the product it is for (`pid`); ending that
// credential, or for a session its user losing the product, must end the token too. PostgreSQL is the authority
// (revoked_at, expires_at, organization_members). Redis only carries the announcement (platform:invalidate), which a
// Redis outage can lose and a Redis restarted empty forgets, so nothing here takes "Redis says nothing" for "not
// revoked": a gateway asks PostgreSQL once per credential and product and caches the answer briefly, by count.
import { config } from '../config'
import { sql as defaultSql, type Sql } from '../db/client'
import { isUuid } from '../ids'
import { STALE_IF_UNAVAILABLE_MS } from '../cache/invalidated-cache'
import { TOKEN_TTL_MAX } from './tokens'

/** Most credentials one sweep query names (a gateway's live connections may hold many). */
const SWEEP_CHUNK = 1000
/** How long an ended credential is remembered: past it no token it asked for can still be alive (longest lifetime + skew). */
const REVOKED_REMEMBERED_MS = (TOKEN_TTL_MAX + 60) * 1000

/** What a token's revocation is checked on, as its claims name it: the credential that asked for it, and its product. */
export interface TokenCredential {
  akid: string
  pid: string
}

/** PostgreSQL's answer about some tokens' credentials. */
export interface Revoked {
  /** Credentials (`akid`) that ended: revoked, expired, or not there at all. Every token they asked for is dead, for good. */
  ended: Set<string>
  /**
   * Active credentials that do not reach the token's product (a login session whose user left the organization), as
   * `credentialKey`s: only those pairs are dead, and only while that lasts (the user may be added back).
   */
  denied: Set<string>
}

/** One string per (credential, product): the key of a cached answer and of `Revoked.denied`. */
export const credentialKey = (credential: TokenCredential) => `${credential.akid}/${credential.pid}`

/** True when the answer ends tokens of this credential and product. */
export const isRevokedIn = (answer: Revoked, credential: TokenCredential) =>
  answer.ended.has(credential.akid) || answer.denied.has(credentialKey(credential))

/**
 * Which of these tokens' credentials are revoked, in one query per SWEEP_CHUNK pairs; each arm is a primary-key lookup.
 * - A product API key (`rtk_`): active, and of this environment.
 * - A login session (a console token): active and unexpired, and its user a member of the organization of the token's
 *   product; removing the member denies the pair while the session stays active for everything else.
 * - A platform key (a console token): active.
 * A key is bound to one product and only ever signs for it, so only a session's product needs asking.
 * A credential that is not there at all (its product was deleted, or the id is not one of these) has ended: only an
 * active credential keeps its tokens.
 * Throws when PostgreSQL cannot answer: an unanswered check is not "not revoked".
 */
export async function revokedAmong(credentials: Iterable<TokenCredential>, sql: Sql = defaultSql): Promise<Revoked> {
  const answer: Revoked = { ended: new Set(), denied: new Set() }
  const asked = new Map<string, TokenCredential>()
  for (const credential of credentials) {
    if (!isUuid(credential.akid)) answer.ended.add(credential.akid)
    else if (!isUuid(credential.pid)) answer.denied.add(credentialKey(credential))
    else asked.set(credentialKey(credential), credential)
  }
  const pairs = [...asked.values()]
  for (let i = 0; i < pairs.length; i += SWEEP_CHUNK) {
    const chunk = pairs.slice(i, i + SWEEP_CHUNK)
    // A row per active credential; `reaches` says whether it reaches the product asked with it.
    const rows = await sql`
      with asked (akid, pid) as (select * from unnest(${chunk.map((c) => c.akid)}::uuid[], ${chunk.map((c) => c.pid)}::uuid[]))
      select asked.akid, asked.pid, c.reaches from asked join lateral (
        select true as reaches from public_keys k
        where k.id = asked.akid and k.environment = ${config.environment} and k.revoked_at is null
        union all
        select exists (
          select 1 from products p join organization_members m on m.organization_id = p.organization_id
          where p.id = asked.pid and m.user_id = s.user_id)
        from sessions s where s.id = asked.akid and s.revoked_at is null and s.expires_at > now()
        union all
        select true from platform_keys k where k.id = asked.akid and k.revoked_at is null
      ) c on true`
    const found = new Map(rows.map((row) => [`${row.akid}/${row.pid}`, row.reaches === true]))
    for (const credential of chunk) {
      const reaches = found.get(`${credential.akid.toLowerCase()}/${credential.pid.toLowerCase()}`)
      if (reaches === undefined) answer.ended.add(credential.akid)
      else if (!reaches) answer.denied.add(credentialKey(credential))
    }
  }
  return answer
}

/**
 * A gateway's answers to "is this token's credential revoked?", so a connect with a known credential costs no query.
 * - An active answer, and a denied one (the credential lives but does not reach the product), is trusted for
 *   `activeTtlMs` (REALTIME_CACHE_TTL_MS): a revocation this gateway did not hear (Redis down at revoke time, or
 *   restarted empty) refuses new connects within that, and the sweep closes live ones.
 * - An ended credential is kept until no token it asked for can be alive: revocation is for good.
 * - At most `maxEntries` (REALTIME_CACHE_MAX_ENTRIES) answers; past it the oldest goes and is asked again when needed.
 * Concurrent checks of one pair share one query; an invalidation during a query keeps its "active" answer out.
 */
export class RevocationCache {
  // Keyed by `credentialKey` for an answer about a pair, by the bare `akid` for an ended credential (any product).
  private readonly entries = new Map<string, { revoked: boolean; until: number }>()
  private readonly loading = new Map<string, Promise<boolean>>()
  private generation = 0

  constructor(
    private readonly maxEntries = config.cache.maxEntries,
    private readonly activeTtlMs = config.cache.ttlMs,
    private readonly check: (credentials: TokenCredential[]) => Promise<Revoked> = (credentials) => revokedAmong(credentials),
  ) {}

  /** Entries held now (for tests of the bound). */
  get size(): number {
    return this.entries.size
  }

  /**
   * True when the token's credential is revoked. Throws when PostgreSQL cannot tell and there is no usable answer; an
   * active answer that expired less than STALE_IF_UNAVAILABLE_MS ago still answers then (no revocation can commit
   * without PostgreSQL).
   */
  async isRevoked(credential: TokenCredential): Promise<boolean> {
    if (this.ended(credential.akid)) return true
    const key = credentialKey(credential)
    const hit = this.entries.get(key)
    if (hit && hit.until > Date.now()) return hit.revoked
    let pending = this.loading.get(key)
    if (!pending) {
      const started = this.generation
      pending = this.check([credential]).then((answer) => {
        this.remember(answer)
        const revoked = isRevokedIn(answer, credential)
        if (!revoked && this.generation === started && !this.ended(credential.akid)) this.store(key, false, this.activeTtlMs)
        return revoked
      }).finally(() => this.loading.delete(key))
      this.loading.set(key, pending)
    }
    try {
      // A revocation heard while the query ran wins: the connection it was for must not slip past the close it caused.
      return (await pending) || this.ended(credential.akid)
    } catch (error) {
      if (hit && !hit.revoked && Date.now() - hit.until < STALE_IF_UNAVAILABLE_MS && this.entries.get(key) === hit) return false
      throw error
    }
  }

  /** A credential ended (an invalidation message, a sweep): kept until no token it asked for can be alive. */
  markRevoked(akid: string): void {
    this.generation++
    this.store(akid, true, REVOKED_REMEMBERED_MS)
  }

  /** Takes in what a sweep learned: ended credentials for good, denied pairs for `activeTtlMs`. */
  remember(answer: Revoked): void {
    for (const akid of answer.ended) this.markRevoked(akid)
    for (const key of answer.denied) this.store(key, true, this.activeTtlMs)
  }

  /** Drops every active answer (revocations stay): after a gap in invalidations, anything may have been revoked. */
  forgetActive(): void {
    this.generation++
    for (const [id, entry] of this.entries) if (!entry.revoked) this.entries.delete(id)
  }

  private ended(akid: string): boolean {
    const entry = this.entries.get(akid)
    return entry !== undefined && entry.revoked && entry.until > Date.now()
  }

  private store(key: string, revoked: boolean, ttlMs: number): void {
    this.entries.delete(key) // re-inserted last: the Map's order is the eviction order
    this.entries.set(key, { revoked, until: Date.now() + ttlMs })
    while (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value!)
  }
}

/** This process's answers (a gateway's): dropped and filled by gateway/sweeps.ts from invalidations and sweeps. */
export const revocations = new RevocationCache()

/** True when a token's credential is revoked: a gateway refuses (4001) or closes such a connection. */
export const isKeyRevoked = (credential: TokenCredential): Promise<boolean> => revocations.isRevoked(credential)
