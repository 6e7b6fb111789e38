// The gateway's revocation cache (shared/realtime/revocations.ts) over a check in memory: which answers an invalidation
// drops, what a check racing one answers, and how long a session's answer may live. PostgreSQL's side is
// test/security/revocation.test.ts.
import { expect, test } from 'bun:test'
import { credentialKey, RevocationCache, type Revoked, type SessionFacts, type TokenCredential } from '../../shared/realtime/revocations'

const PRODUCT_A = '00000000-0000-4000-8000-00000000000a'
const PRODUCT_B = '00000000-0000-4000-8000-00000000000b'
const ALICE = '00000000-0000-4000-8000-0000000000a1'
const BOB = '00000000-0000-4000-8000-0000000000b0'

/** What PostgreSQL would say: ended credentials, denied pairs, and the sessions' owners; every check asked, in order. */
function authority() {
  const ended = new Set<string>()
  const denied = new Set<string>()
  const sessions = new Map<string, SessionFacts>()
  const asked: TokenCredential[] = []
  /** Awaited by a check after it has read its answer, before it returns it (a test acts in between). */
  let between: (() => Promise<void>) | undefined
  const check = async (credentials: TokenCredential[]): Promise<Revoked> => {
    asked.push(...credentials)
    const answer: Revoked = {
      ended: new Set(credentials.filter((c) => ended.has(c.akid)).map((c) => c.akid)),
      denied: new Set(credentials.filter((c) => denied.has(credentialKey(c))).map(credentialKey)),
      sessions: new Map(credentials.flatMap((c) => (sessions.has(c.akid) && !ended.has(c.akid) ? [[c.akid, sessions.get(c.akid)!] as const] : []))),
    }
    const wait = between
    between = undefined
    await wait?.()
    return answer
  }
  return { ended, denied, sessions, asked, check, pause: (then: () => Promise<void>) => void (between = then) }
}

const session = (userId: string, expiresAt = Date.now() + 3_600_000): SessionFacts => ({ userId, expiresAt })
const fresh = () => crypto.randomUUID()

test('a member removal drops only the answers about that user\'s sessions: other users\', keys\' and platform keys\' stay cached', async () => {
  const db = authority()
  const cache = new RevocationCache(100, 60_000, db.check)
  const [aliceSession, bobSession, rtk, platformKey] = [fresh(), fresh(), fresh(), fresh()]
  db.sessions.set(aliceSession, session(ALICE))
  db.sessions.set(bobSession, session(BOB))
  const all = [
    { akid: aliceSession, pid: PRODUCT_A }, { akid: aliceSession, pid: PRODUCT_B }, { akid: bobSession, pid: PRODUCT_A },
    { akid: rtk, pid: PRODUCT_B }, { akid: platformKey, pid: PRODUCT_A },
  ]
  for (const credential of all) expect(await cache.isRevoked(credential)).toBe(false)
  expect(db.asked.length).toBe(5)
  cache.forgetUser(ALICE)
  for (const credential of all.slice(2)) expect(await cache.isRevoked(credential)).toBe(false)
  expect(db.asked.length).toBe(5)
  // Alice's answers are asked again: removed from product A's organization, her session no longer reaches it.
  db.denied.add(credentialKey(all[0]!))
  expect(await cache.isRevoked(all[0]!)).toBe(true)
  expect(await cache.isRevoked(all[1]!)).toBe(false)
  expect(db.asked.slice(5)).toEqual([all[0]!, all[1]!])
})

test('a removal heard while a connect is being checked: the pair the sweep found denied meanwhile wins over the check\'s "active" answer', async () => {
  const db = authority()
  const cache = new RevocationCache(100, 60_000, db.check)
  const akid = fresh()
  db.sessions.set(akid, session(ALICE))
  const credential = { akid, pid: PRODUCT_A }
  // The check read "reaches" just before the removal committed; the removal's sweep then stores the denied pair.
  db.pause(async () => {
    db.denied.add(credentialKey(credential))
    cache.remember({ ended: new Set(), denied: new Set([credentialKey(credential)]), sessions: new Map() })
  })
  expect(await cache.isRevoked(credential)).toBe(true)
  expect(await cache.isRevoked(credential)).toBe(true)
})

test('a removal heard while a connect is being checked, with no sweep answer yet: the check asks again and does not cache "active" from before it', async () => {
  const db = authority()
  const cache = new RevocationCache(100, 60_000, db.check)
  const akid = fresh()
  db.sessions.set(akid, session(ALICE))
  const credential = { akid, pid: PRODUCT_A }
  db.pause(async () => {
    db.denied.add(credentialKey(credential)) // committed after the check read; announced before it returned
    cache.forgetUser(ALICE)
  })
  expect(await cache.isRevoked(credential)).toBe(true)
  expect(db.asked).toEqual([credential, credential])
  // Another user's removal meanwhile does not make a check ask twice.
  const other = { akid: fresh(), pid: PRODUCT_A }
  db.sessions.set(other.akid, session(BOB))
  db.pause(async () => cache.forgetUser(ALICE))
  expect(await cache.isRevoked(other)).toBe(false)
  expect(db.asked.slice(2)).toEqual([other])
  expect(await cache.isRevoked(other)).toBe(false)
  expect(db.asked.length).toBe(3)
})

test('an end or a denial heard while a check runs wins even when traffic pushed it out of the full cache before the check landed', async () => {
  for (const heard of ['ended', 'denied'] as const) {
    const db = authority()
    const cache = new RevocationCache(2, 60_000, db.check) // room for two answers: other traffic evicts at once
    const credential = { akid: fresh(), pid: PRODUCT_A }
    db.sessions.set(credential.akid, session(ALICE))
    db.pause(async () => {
      // Committed after the check read "active"; announced (or found by a sweep) before the check returned.
      if (heard === 'ended') {
        db.ended.add(credential.akid)
        cache.markRevoked(credential.akid, false)
      } else {
        db.denied.add(credentialKey(credential))
        cache.remember({ ended: new Set(), denied: new Set([credentialKey(credential)]), sessions: new Map() })
      }
      cache.remember({ ended: new Set([fresh(), fresh()]), denied: new Set(), sessions: new Map() }) // the marker evicted
    })
    expect(await cache.isRevoked(credential)).toBe(true)
    // Nothing "active" was cached from the stale answer: the next connect asks again and is refused.
    expect(await cache.isRevoked(credential)).toBe(true)
  }
})

test('a check disturbed by the user\'s removals every time it asks fails as unavailable after four answers, never lets the connect through', async () => {
  const db = authority()
  const cache = new RevocationCache(100, 60_000, db.check)
  const credential = { akid: fresh(), pid: PRODUCT_A }
  db.sessions.set(credential.akid, session(ALICE))
  const disturb = async () => {
    cache.forgetUser(ALICE) // another organization of Alice's, removed while each query ran
    db.pause(disturb)
  }
  db.pause(disturb)
  expect(cache.isRevoked(credential)).rejects.toThrow('disturbed 4 times')
  await Bun.sleep(0)
  expect(db.asked).toEqual([credential, credential, credential, credential])
})

test('an active session\'s answer lives no longer than the session: once expired it is refused from the cache, and PostgreSQL unreachable changes nothing', async () => {
  const db = authority()
  let reachable = true
  const cache = new RevocationCache(100, 60_000, async (credentials) => {
    if (!reachable) throw new Error('PostgreSQL unreachable')
    return db.check(credentials)
  })
  const akid = fresh()
  const expiresAt = Date.now() + 100
  db.sessions.set(akid, session(ALICE, expiresAt))
  const credential = { akid, pid: PRODUCT_A }
  expect(await cache.isRevoked(credential)).toBe(false)
  while (Date.now() <= expiresAt) await Bun.sleep(20)
  reachable = false
  expect(await cache.isRevoked(credential)).toBe(true)
  expect(await cache.isRevoked({ akid, pid: PRODUCT_B })).toBe(true) // the session ended: every product
  expect(db.asked).toEqual([credential])
})

test('an invalidation of a credential nothing here holds, asks about or has an answer for is not kept; one of a held, asked or cached credential is', async () => {
  const db = authority()
  const cache = new RevocationCache(100, 60_000, db.check)
  cache.markRevoked(fresh(), false)
  expect(cache.size).toBe(0)
  const cached = { akid: fresh(), pid: PRODUCT_A }
  expect(await cache.isRevoked(cached)).toBe(false)
  cache.markRevoked(cached.akid, false)
  expect(await cache.isRevoked(cached)).toBe(true)
  expect(db.asked.length).toBe(1)
  const inFlight = { akid: fresh(), pid: PRODUCT_A }
  db.pause(async () => cache.markRevoked(inFlight.akid, false))
  expect(await cache.isRevoked(inFlight)).toBe(true)
  const held = fresh()
  cache.markRevoked(held, true)
  expect(await cache.isRevoked({ akid: held, pid: PRODUCT_A })).toBe(true)
  expect(db.asked.length).toBe(2)
})

test('removals remembered for the checks in flight are bounded: past 10 000 they count as a gap (every check in flight asks once more)', async () => {
  const db = authority()
  const cache = new RevocationCache(100, 60_000, db.check)
  const credential = { akid: fresh(), pid: PRODUCT_A }
  db.sessions.set(credential.akid, session(BOB))
  db.pause(async () => {
    for (let i = 0; i <= 10_000; i++) cache.forgetUser(`user-${i}`)
  })
  expect(await cache.isRevoked(credential)).toBe(false)
  expect(db.asked).toEqual([credential, credential])
})

test('a session that expires while PostgreSQL fails to answer is refused, not let through on the stale answer', async () => {
  const db = authority()
  let failing = false
  const cache = new RevocationCache(100, 50, async (credentials) => {
    if (!failing) return db.check(credentials)
    while (Date.now() <= expiresAt) await Bun.sleep(10)
    throw new Error('PostgreSQL unreachable')
  })
  const akid = fresh()
  const expiresAt = Date.now() + 150
  db.sessions.set(akid, session(ALICE, expiresAt))
  const credential = { akid, pid: PRODUCT_A }
  expect(await cache.isRevoked(credential)).toBe(false)
  await Bun.sleep(60) // the answer's TTL passed; the session has not expired yet
  failing = true
  expect(await cache.isRevoked(credential)).toBe(true)
})
