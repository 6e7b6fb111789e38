// Runs the platform's Lua scripts on the shared command connection, the one way every Redis script is called: EVALSHA by
// the script's SHA-1, the source sent once more when Redis has lost it (NOSCRIPT: restarted, failed over, SCRIPT FLUSH),
// and a Redis that cannot run it answered with the platform's 503. The scripts live in `.lua` files beside their users.
import { createHash } from 'node:crypto'
import { ApiError, logUnlessOutage, unavailable } from './errors'
import { redis } from './redis/client'

type Args = readonly (string | number)[]

/** One Lua script. Redis Cluster: every key it touches is in `keys` (its KEYS), all in one hash slot. */
export interface RedisScript<Reply> {
  /** Runs it once with these KEYS and ARGV. */
  run(keys: readonly string[], args: Args): Promise<Reply>
  /** Runs it once per call, sent back to back on the one connection: one 503 (and one log) for the batch. */
  runEach(calls: readonly (readonly [keys: readonly string[], args: Args])[]): Promise<Reply[]>
  /** Runs it once; a failure as Redis or the connection gave it, neither logged nor mapped (a caller with a fallback). */
  runBare(keys: readonly string[], args: Args): Promise<Reply>
}

/**
 * A script from its source, given as parts joined in order (shared Lua libraries first, the script's body last).
 * `service` names it in errors: a failure that is not an ApiError is logged as `<service> failed` unless Redis is
 * unreachable (the breaker logs outages once), and answered 503 `<Service> is unavailable` with Retry-After.
 * @example const publishScript = redisScript<[number, string]>('realtime publish', NOW_LUA, PUBLISH_LUA)
 */
export function redisScript<Reply>(service: string, ...parts: string[]): RedisScript<Reply> {
  const source = parts.join('\n')
  const sha = createHash('sha1').update(source).digest('hex')
  const once = async (keys: readonly string[], args: Args): Promise<Reply> => {
    try {
      return (await redis().evalsha(sha, keys.length, ...keys, ...args)) as Reply
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error
      // EVAL runs the source and caches it again, in one round trip and on the node that holds the keys.
      return (await redis().eval(source, keys.length, ...keys, ...args)) as Reply
    }
  }
  return {
    run: (keys, args) => orUnavailable(service, () => once(keys, args)),
    runEach: (calls) => orUnavailable(service, () => Promise.all(calls.map(([keys, args]) => once(keys, args)))),
    runBare: once,
  }
}

/**
 * Runs a Redis call of `service` (e.g. 'realtime history') with the scripts' failure mapping: ApiErrors pass through;
 * anything else is logged unless it is an outage and becomes 503 `<Service> is unavailable` (the failure as its `cause`).
 */
export async function orUnavailable<T>(service: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call()
  } catch (error) {
    if (error instanceof ApiError) throw error
    logUnlessOutage(`${service} failed`, error)
    // The cause stays on the 503 for callers that count differently when Redis did not answer (publish-message.ts).
    throw Object.assign(unavailable(`${service[0]!.toUpperCase()}${service.slice(1)} is unavailable`), { cause: error })
  }
}
