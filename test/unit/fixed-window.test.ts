// The in-memory fallback of the fixed-window counters (used while Redis cannot count): a flood of distinct keys on one
// limiter must not reset another limiter's counts.
import { describe, expect, test } from 'bun:test'
import { countLocally, LOCAL_KEYS_PER_LIMITER } from '../../shared/fixed-window'

describe('fixed-window counts while Redis is down', () => {
  test('a flood of distinct sign-in addresses leaves the platform limits counted', () => {
    const now = Date.now()
    const expiresAt = now + 60_000
    const platform = `api:rl:write:key:${crypto.randomUUID()}:1`
    for (let i = 0; i < 5; i++) countLocally('platform credential rate limit', platform, expiresAt, now)
    for (let i = 0; i < LOCAL_KEYS_PER_LIMITER * 2 + 5; i++) countLocally('sign-in rate limit', `auth:rl:ip:2001:db8::${i.toString(16)}:1`, expiresAt, now)
    expect(countLocally('platform credential rate limit', platform, expiresAt, now)).toBe(6)
  })

  test('the flooded limiter stays bounded: expired counts go first, then its own counts start over', () => {
    const now = Date.now()
    const limiter = `flood ${crypto.randomUUID()}`
    const live = 'live:1'
    countLocally(limiter, live, now + 60_000, now)
    for (let i = 0; i < LOCAL_KEYS_PER_LIMITER - 1; i++) countLocally(limiter, `old:${i}`, now - 1, now - 60_000)
    // Full: the next new key drops the expired counts only, so the live one keeps its count.
    countLocally(limiter, 'new:1', now + 60_000, now)
    expect(countLocally(limiter, live, now + 60_000, now)).toBe(2)
    for (let i = 0; i < LOCAL_KEYS_PER_LIMITER; i++) countLocally(limiter, `fresh:${i}`, now + 60_000, now)
    // Full of live keys: this limiter started over (bounded), the live count with it.
    expect(countLocally(limiter, live, now + 60_000, now)).toBeLessThan(3)
  })
})
