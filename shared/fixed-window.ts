// Fixed-window counters in Redis, shared by every worker: request rate limits and the publish quota.
import { ApiError } from './errors'
import { describeError, log } from './log'
import FIXED_WINDOW_LUA from './fixed-window.lua' with { type: 'text' }
import { redisScript } from './redis-script'

export interface WindowCount {
  /** Hits counted in the current window, this one included. */
  count: number
  /** Whole seconds until the window rolls, at least 1: the Retry-After of a refusal. */
  retryAfter: number
}

// Per-worker counters used only while Redis cannot count: limiter → key → count, for the windows now in use.
const localCounts = new Map<string, Map<string, { count: number; expiresAt: number }>>()
let lastFallbackLog = 0

/** Most keys one limiter counts in this worker's memory while Redis is down. */
export const LOCAL_KEYS_PER_LIMITER = 10_000

/**
 * Counts one hit of `key` in this worker's memory. Each limiter (its `what`: sign-in, platform credential, publish
 * quota...) keeps its own counts and its own bound: a flood of distinct keys (sign-ins from many IPv6 addresses) drops
 * expired counts, then at worst that limiter's own counts, never another limiter's.
 */
export function countLocally(limiter: string, key: string, expiresAt: number, now: number, amount = 1): number {
  let counts = localCounts.get(limiter)
  if (!counts) localCounts.set(limiter, (counts = new Map()))
  if (counts.size >= LOCAL_KEYS_PER_LIMITER && !counts.has(key)) {
    for (const [k, entry] of counts) if (entry.expiresAt <= now) counts.delete(k)
    if (counts.size >= LOCAL_KEYS_PER_LIMITER) counts.clear() // a flood of distinct keys: this limiter starts over rather than grow
  }
  const entry = counts.get(key) ?? { count: 0, expiresAt }
  entry.count += amount
  counts.set(key, entry)
  return entry.count
}

/**
 * Counts one hit (or `amount`: a batch of captured events counts each) in the window of `windowSeconds` (aligned to
 * epoch time) that `now` falls in. The Redis key is
 * `<prefix>:<window number>` and expires shortly after its window, so counters clean themselves up.
 *
 * While Redis cannot count (down, or no answer within REDIS_COMMAND_TIMEOUT_MS), the hit is counted in this worker's
 * memory against the same limit instead: a limit then holds per worker rather than across workers, and whatever the
 * route does next still works or fails on its own (token issue keeps working without Redis; a publish still gets its
 * 503). Refusing every request because a counter is unreachable would turn a Redis outage into a full outage.
 */
export async function hitWindow(prefix: string, windowSeconds: number, what: string, now = Date.now(), amount = 1): Promise<WindowCount> {
  const window = windowOf(prefix, windowSeconds, now)
  try {
    const counted = await hitScript.runBare([window.key], [amount, window.expireSeconds])
    return { count: counted, retryAfter: window.retryAfter }
  } catch (error) {
    return { count: countWhileDown(what, window, error, now, amount), retryAfter: window.retryAfter }
  }
}

/**
 * INCRBY, and EXPIRE at the window's first hit, as one command (./fixed-window.lua, which the publish script counts
 * with too): atomic as a MULTI of the two, without its four commands and the client's transaction machinery (a sixth
 * of a public worker's CPU per token issue).
 */
const hitScript = redisScript<number>('rate limits', FIXED_WINDOW_LUA, 'return count_in(KEYS[1], ARGV[1] + 0, ARGV[2])')

/** Where one hit of a fixed window is counted: for callers that count it in a script of their own (same keys, same expiry). */
export interface Window {
  /** `<prefix>:<window number>`. */
  key: string
  /** The key's expiry: shortly after its window. */
  expireSeconds: number
  /** Whole seconds until the window rolls, at least 1. */
  retryAfter: number
  /** Epoch ms when the window ends. */
  endsAt: number
}

/** The window of `windowSeconds` (aligned to epoch time) that `now` falls in. */
export function windowOf(prefix: string, windowSeconds: number, now = Date.now()): Window {
  const windowMs = windowSeconds * 1000
  const window = Math.floor(now / windowMs)
  const endsAt = (window + 1) * windowMs
  return { key: `${prefix}:${window}`, expireSeconds: windowSeconds + 5, retryAfter: Math.max(1, Math.ceil((endsAt - now) / 1000)), endsAt }
}

/** hitWindow's fallback when Redis could not count `error`: the hit counted in this worker's memory (logged at most every 5 s). */
export function countWhileDown(what: string, window: Window, error: unknown, now = Date.now(), amount = 1): number {
  if (now - lastFallbackLog > 5000) {
    lastFallbackLog = now
    log('warn', `${what}: Redis cannot count, counting in this worker`, describeError(error))
  }
  return countLocally(what, window.key, window.endsAt, now, amount)
}

/** 429 with Retry-After in whole seconds (at least 1). */
export const tooMany = (code: 'quota_exceeded' | 'rate_limited' | 'rate_limit_exceeded', message: string, retryAfter: number, extra: Record<string, unknown> = {}) =>
  new ApiError(code, message, { retryAfter, ...extra }, { 'retry-after': String(retryAfter) })
