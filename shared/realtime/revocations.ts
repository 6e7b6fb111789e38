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
/** Most member removals remembered for the checks in flight (see RevocationCache.forgetUser). */
const REMOVALS_TRACKED = 10_000
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
  /**
   * The active login sessions among the credentials asked about, by `akid`: whose they are (a member removal re-asks
   * about that user's answers only) and when they expire (no answer about them outlives that).
   */
  sessions: Map<string, SessionFacts>
}

/** What a cached answer about a login session must know of it. */
export interface SessionFacts {
  userId: string
  /** Epoch milliseconds. */
  expiresAt: number
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
  const answer: Revoked = { ended: new Set(), denied: new Set(), sessions: new Map() }
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
      select asked.akid, asked.pid, c.reaches, c.user_id, c.expires_at from asked join lateral (
        select true as reaches, null::uuid as user_id, null::timestamptz as expires_at from public_keys k
        where k.id = asked.akid and k.environment = ${config.environment} and k.revoked_at is null
        union all
        select exists (
          select 1 from products p join organization_members m on m.organization_id = p.organization_id
          where p.id = asked.pid and m.user_id = s.user_id), s.user_id, s.expires_at
        from sessions s where s.id = asked.akid and s.revoked_at is null and s.expires_at > now()
        union all
        select true, null, null from platform_keys k where k.id = asked.akid and k.revoked_at is null
      ) c on true`
    const found = new Map(rows.map((row) => [`${row.akid}/${row.pid}`, row.reaches === true]))
    const sessions = new Map(rows.filter((row) => row.user_id).map((row) => [String(row.akid), { userId: String(row.user_id), expiresAt: new Date(row.expires_at).getTime() }]))
    for (const credential of chunk) {
      const session = sessions.get(credential.akid.toLowerCase())
      if (session) answer.sessions.set(credential.akid, session)
      const reaches = found.get(`${credential.akid.toLowerCase()}/${credential.pid.toLowerCase()}`)
      if (reaches === undefined) answer.ended.add(credential.akid)
      else if (!reaches) answer.denied.add(credentialKey(credential))
    }
  }
  return answer
}

/** How many times one check asks PostgreSQL while invalidations keep disturbing it, before it fails as unavailable. */
const CHECK_ATTEMPTS = 4

/**
 * A gateway's answers to "is this token's credential revoked?", so a connect with a known credential costs no query.
 * - An active answer, and a denied one (the credential lives but does not reach the product), is trusted for
 *   `activeTtlMs` (CACHE_TTL_MS), and an active session's no longer than the session: a revocation this
 *   gateway did not hear (Redis down at revoke time, or restarted empty) refuses new connects within that, and the
 *   sweep closes live ones. A denied pair is not asked again within that either, so a member added back reaches the
 *   product again through this gateway after CACHE_TTL_MS at most.
 * - An ended credential is kept until no token it asked for can be alive: revocation is for good. Only credentials
 *   this gateway knows of (a connection holds, a cached answer names, a check in flight asks about) are kept: any other
 *   is asked of PostgreSQL, which already says it ended, when a token of it first comes.
 * - At most `maxEntries` (CACHE_MAX_ENTRIES) answers; past it the oldest goes and is asked again when needed.
 * Concurrent checks of one pair share one query. An invalidation during a query (a gap, the session's user removed
 * from an organization) keeps its "active" answer out and asks again, so that connect cannot slip past it.
 */
export class RevocationCache {
  // Keyed by `credentialKey` for an answer about a pair, by the bare `akid` for an ended credential (any product).
  private readonly entries = new Map<string, Entry>()
  // The cached pairs of each credential, and of each session's user: what markRevoked and forgetUser look at.
  private readonly pairsOf = new Map<string, Set<string>>()
  private readonly loading = new Map<string, Promise<boolean>>()
  private readonly asking = new Map<string, number>()
  // A counter of invalidations that may turn an active answer wrong; when the last gap was, and each removed user's last.
  private events = 0
  private lastGap = 0
  private readonly removedAt = new Map<string, number>()
  // Credentials ended, and pairs found denied, while a check about them was in flight: kept beside the bounded entries
  // (which traffic can push out before the check lands) until that check is over. No larger than the checks in flight.
  private readonly revokedWhileAsked = new Set<string>()

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
   * without PostgreSQL), unless the session it is about has expired.
   */
  async isRevoked(credential: TokenCredential): Promise<boolean> {
    if (this.ended(credential.akid)) return true
    const key = credentialKey(credential)
    const hit = this.entries.get(key)
    if (hit?.session && hit.session.expiresAt <= Date.now()) return this.expired(credential.akid)
    if (hit && hit.until > Date.now()) return hit.revoked
    let pending = this.loading.get(key)
    if (!pending) {
      this.asking.set(credential.akid, (this.asking.get(credential.akid) ?? 0) + 1)
      pending = this.load(credential).finally(() => {
        this.loading.delete(key)
        const left = (this.asking.get(credential.akid) ?? 1) - 1
        if (left > 0) this.asking.set(credential.akid, left)
        else {
          this.asking.delete(credential.akid)
          this.revokedWhileAsked.delete(credential.akid)
          for (const heard of [...this.revokedWhileAsked]) if (heard.startsWith(`${credential.akid}/`)) this.revokedWhileAsked.delete(heard)
        }
        if (this.asking.size === 0) this.removedAt.clear() // no query left that started before a removal
      })
      this.loading.set(key, pending)
    }
    try {
      // What was heard while the query ran wins (an ended credential, a pair a sweep found denied): the connection it
      // was for must not slip past the close it caused.
      return (await pending) || this.cachedRevoked(credential)
    } catch (error) {
      if (hit?.session && hit.session.expiresAt <= Date.now()) return this.expired(credential.akid) // expired meanwhile
      if (hit && !hit.revoked && Date.now() - hit.until < STALE_IF_UNAVAILABLE_MS && this.entries.get(key) === hit) return false
      throw error
    }
  }

  /**
   * A credential ended (an invalidation message, a sweep): kept until no token it asked for can be alive. An
   * invalidation of a credential no live connection here holds (`held` false) is kept only when this cache knows of it
   * (an answer names it, a check in flight asks about it): otherwise PostgreSQL, which already says it ended, is asked
   * when a token of it first comes, and the answers worth keeping stay.
   */
  markRevoked(akid: string, held = true): void {
    if (this.asking.has(akid)) this.revokedWhileAsked.add(akid)
    if (!held && !this.pairsOf.has(akid) && !this.asking.has(akid)) return
    for (const key of [...(this.pairsOf.get(akid) ?? [])]) this.drop(key)
    this.store(akid, { revoked: true, until: Date.now() + REVOKED_REMEMBERED_MS })
  }

  /** Takes in what a sweep or a check learned (about credentials it asked for): ended ones for good, denied pairs for `activeTtlMs`. */
  remember(answer: Revoked): void {
    for (const akid of answer.ended) this.markRevoked(akid, true)
    for (const key of answer.denied) {
      if (this.asking.has(key.slice(0, key.indexOf('/')))) this.revokedWhileAsked.add(key)
      this.store(key, { revoked: true, until: Date.now() + this.activeTtlMs })
    }
  }

  /** Drops every active answer (revocations stay): after a gap in invalidations, anything may have been revoked. */
  forgetActive(): void {
    this.lastGap = ++this.events
    for (const [key, entry] of [...this.entries]) if (!entry.revoked) this.drop(key)
  }

  /** The user left an organization: the active answers about their sessions are dropped, nothing else. */
  forgetUser(userId: string): void {
    this.events++
    // Only a query in flight can have started before this; past REMOVALS_TRACKED (a flood) it counts as a gap instead.
    if (this.asking.size > 0) this.removedAt.set(userId, this.events)
    if (this.removedAt.size > REMOVALS_TRACKED) {
      this.lastGap = this.events
      this.removedAt.clear()
    }
    for (const key of [...(this.pairsOf.get(userKey(userId)) ?? [])]) if (!this.entries.get(key)?.revoked) this.drop(key)
  }

  /**
   * Asks about one pair; asks again when an invalidation that may change an "active" answer came while it ran (the
   * answer may have been read before that change committed), at most CHECK_ATTEMPTS times: a check disturbed every
   * time fails as unavailable rather than letting the connect through on an answer that may be stale.
   */
  private async load(credential: TokenCredential): Promise<boolean> {
    for (let attempt = 1; ; attempt++) {
      const started = this.events
      const answer = await this.check([credential])
      this.remember(answer)
      // Heard while it ran: the credential ended, or a sweep found the pair denied.
      if (isRevokedIn(answer, credential) || this.cachedRevoked(credential) || this.heardRevoked(credential)) return true
      const session = answer.sessions.get(credential.akid)
      if (session && session.expiresAt <= Date.now()) return this.expired(credential.akid)
      const disturbed = this.lastGap > started || (session !== undefined && (this.removedAt.get(session.userId) ?? 0) > started)
      if (!disturbed) {
        const until = Math.min(Date.now() + this.activeTtlMs, session?.expiresAt ?? Infinity)
        this.store(credentialKey(credential), { revoked: false, until, session })
        return false
      }
      if (attempt >= CHECK_ATTEMPTS) throw new Error(`revocation check disturbed ${attempt} times in a row`)
    }
  }

  /** A session past its expiry has ended, for good. */
  private expired(akid: string): true {
    this.markRevoked(akid, true)
    return true
  }

  private ended(akid: string): boolean {
    const entry = this.entries.get(akid)
    return entry?.revoked === true && entry.until > Date.now()
  }

  /** Ended, or found denied, while a check about it was in flight (whatever the bounded entries still hold). */
  private heardRevoked(credential: TokenCredential): boolean {
    return this.revokedWhileAsked.has(credential.akid) || this.revokedWhileAsked.has(credentialKey(credential))
  }

  /** Revoked by what is cached now: the credential ended, or the pair denied. */
  private cachedRevoked(credential: TokenCredential): boolean {
    if (this.ended(credential.akid)) return true
    const entry = this.entries.get(credentialKey(credential))
    return entry?.revoked === true && entry.until > Date.now()
  }

  private store(key: string, entry: Entry): void {
    this.drop(key) // re-inserted last: the Map's order is the eviction order
    this.entries.set(key, entry)
    const slash = key.indexOf('/')
    if (slash > 0) {
      this.index(key.slice(0, slash), key)
      if (entry.session) this.index(userKey(entry.session.userId), key)
    }
    while (this.entries.size > this.maxEntries) this.drop(this.entries.keys().next().value!)
  }

  private drop(key: string): void {
    const entry = this.entries.get(key)
    if (!entry) return
    this.entries.delete(key)
    const slash = key.indexOf('/')
    if (slash > 0) {
      this.unindex(key.slice(0, slash), key)
      if (entry.session) this.unindex(userKey(entry.session.userId), key)
    }
  }

  private index(name: string, key: string): void {
    let keys = this.pairsOf.get(name)
    if (!keys) this.pairsOf.set(name, (keys = new Set()))
    keys.add(key)
  }

  private unindex(name: string, key: string): void {
    const keys = this.pairsOf.get(name)
    keys?.delete(key)
    if (keys?.size === 0) this.pairsOf.delete(name)
  }
}

/** A cached answer: revoked or not, until when, and for an active session's, whose it is and when it expires. */
interface Entry {
  revoked: boolean
  until: number
  session?: SessionFacts
}

// Users and credentials share the index; a user's name there cannot be an `akid`.
const userKey = (userId: string) => `user:${userId}`

/** This process's answers (a gateway's): dropped and filled by gateway/sweeps.ts from invalidations and sweeps. */
export const revocations = new RevocationCache()

/** True when a token's credential is revoked: a gateway refuses (4001) or closes such a connection. */
export const isKeyRevoked = (credential: TokenCredential): Promise<boolean> => revocations.isRevoked(credential)
