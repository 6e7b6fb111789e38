// Runs the platform's Lua scripts on the shared command connection, the one way every Redis script is called: EVALSHA by
// the script's SHA-1, the source sent once more when Redis has lost it (NOSCRIPT: restarted, failed over, SCRIPT FLUSH),
// and a Redis that cannot run it answered with the platform's 503. The scripts live in `.lua` files beside their users.
// The hottest (the publish) runs as a Redis Function instead (redisFunction): its libraries are defined once per
// Redis, not at every run.
import { createHash } from 'node:crypto'
import { Cluster } from 'ioredis'
import { ApiError, logUnlessOutage, unavailable } from './errors'
import { config } from './config'
import { redis } from './redis/client'
import { databaseIndex } from './redis/url'

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
  return runner(service, once)
}

/** A script's three ways to run, from the one that runs it once with failures as Redis gave them. */
function runner<Reply>(service: string, once: (keys: readonly string[], args: Args) => Promise<Reply>): RedisScript<Reply> {
  return {
    run: (keys, args) => orUnavailable(service, () => once(keys, args)),
    runEach: (calls) => orUnavailable(service, () => Promise.all(calls.map(([keys, args]) => once(keys, args)))),
    runBare: once,
  }
}

/**
 * A script run as a Redis Function (FUNCTION LOAD once, FCALL per run), for scripts whose libraries cost more to define
 * than their work: EVAL defines every `local function` of a script at each run (about 20 000 instructions for the
 * publish's), a function library once, when loaded. `parts` as for redisScript: the libraries first, loaded once; the
 * last part is the body, run at each call with KEYS and ARGV as an EVAL script has them. A library's locals outlive a
 * call, so the body must begin by emptying any cache a library keeps for one run (as now.lua's time).
 * The library's name and its one function's are `platform_<SHA-1 of the parts and the database>`: versions (and
 * databases of one server) side by side never clash, and
 * a Redis that lacks the library (never loaded, restarted without persistence, a new cluster master, FUNCTION FLUSH)
 * gets it at the first call that finds it missing: on a cluster, on every master. Functions are part of the data set:
 * replicas and persistence files carry them, so a promoted replica has them. Libraries of older versions stay until
 * deleted by hand (docs/realtime-data-plane.md, "Scripts and functions").
 * Redis runs a function only when its flags allow it, before it starts: a function that writes is refused whole (not
 * half-run) on a read-only replica or past `maxmemory`.
 */
export function redisFunction<Reply>(service: string, ...parts: string[]): RedisScript<Reply> {
  const body = parts.at(-1)!
  // The database too: a library's state (hints it keeps between calls) is per server, and key names repeat across databases.
  const name = `platform_${createHash('sha1').update(`${parts.join('\n')}\n-- database ${databaseIndex(config.redisUrl)}`).digest('hex')}`
  const source = `#!lua name=${name}\n${parts.slice(0, -1).join('\n')}\n` +
    `redis.register_function('${name}', function(KEYS, ARGV)\n${body}\nend)\n`
  let loading: Promise<unknown> | null = null
  const load = () => (loading ??= loadLibrary(source).finally(() => (loading = null)))
  const missing = (error: unknown) => error instanceof Error && error.message.includes('Function not found')
  const call = (keys: readonly string[], args: Args) => redis().call('FCALL', name, keys.length, ...keys, ...args) as Promise<Reply>
  // A library missing where the keys are: loaded, and the call made once more.
  const afterLoad = async (keys: readonly string[], args: Args): Promise<Reply> => {
    const failure = await load()
    try {
      return await call(keys, args)
    } catch (again) {
      // Still missing where the keys are: the load failed there, and its failure says why.
      throw failure !== undefined && missing(again) ? failure : again
    }
  }
  const once = async (keys: readonly string[], args: Args): Promise<Reply> => {
    try {
      return await call(keys, args)
    } catch (error) {
      if (!missing(error)) throw error
      return afterLoad(keys, args)
    }
  }
  return {
    // One async frame for a call and its failure's mapping (orUnavailable's, inlined: a frame and an await fewer per
    // publish, about 1 % of a worker's CPU).
    run: async (keys, args) => {
      try {
        return await call(keys, args)
      } catch (error) {
        if (!missing(error)) return unavailableFrom(service, error)
        return orUnavailable(service, () => afterLoad(keys, args))
      }
    },
    runEach: (calls) => orUnavailable(service, () => Promise.all(calls.map(([keys, args]) => once(keys, args)))),
    runBare: once,
  }
}

/**
 * FUNCTION LOAD on the Redis, or on every master of a cluster (a command without keys goes to any one node); resolves
 * to the first failure, if any. A master that is down or hung must not cost the others' slots their publishes: each
 * call tries again where its keys are and fails only where the library is still missing.
 */
async function loadLibrary(source: string): Promise<unknown> {
  const client = redis()
  const nodes = client instanceof Cluster ? client.nodes('master') : [client]
  const loads = await Promise.allSettled(nodes.map((node) => node.call('FUNCTION', 'LOAD', source).catch((error: unknown) => {
    // Loaded meanwhile by another worker: the same source under the same name.
    if (!(error instanceof Error) || !error.message.includes('already exists')) throw error
  })))
  return loads.find((load) => load.status === 'rejected')?.reason
}

/**
 * Runs a Redis call of `service` (e.g. 'realtime history') with the scripts' failure mapping: ApiErrors pass through;
 * anything else is logged unless it is an outage and becomes 503 `<Service> is unavailable` (the failure as its `cause`).
 */
export async function orUnavailable<T>(service: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call()
  } catch (error) {
    return unavailableFrom(service, error)
  }
}

/** orUnavailable's mapping of a failure, thrown. */
function unavailableFrom(service: string, error: unknown): never {
  throw unavailableError(service, error)
}

/**
 * orUnavailable's mapping of a failure: an ApiError as it is, anything else logged (unless an outage) and answered as a
 * 503 (for callers that settle several waiters with one failure: the publish batch).
 */
export function unavailableError(service: string, error: unknown): unknown {
  if (error instanceof ApiError) return error
  logUnlessOutage(`${service} failed`, error)
  // The cause stays on the 503 for callers that count differently when Redis did not answer (publish-message.ts).
  return Object.assign(unavailable(`${service[0]!.toUpperCase()}${service.slice(1)} is unavailable`), { cause: error })
}
