// Presence rosters in Redis: who is on a channel, deduplicated by identity, changed only by Lua so that the member cap
// and the dedupe hold under concurrent enters. Keys: ./keys.ts (pres, presCount, presExp).
//
// Per channel:
//   pres       hash  identity → info (the JSON text as given; the latest enter that carries info wins)
//   presCount  hash  identity → number of live connections
//   presExp    zset  `<len(identity)>:<identity><connectionId>` → expiry (ms, Redis clock)
//   presGone   zset  identity → when its last connection went, while its webhook removal waits out the grace (./hooks.ts)
//   presHook   hash  identity → whether its webhook add was announced, and its latest entry's expiry (outlives the roster)
// An identity is on the roster exactly while it has a live connection. Expired connections are removed at the start of
// every script, so a dead gateway's connections fall off by expiry; live gateways refresh by entering again.
// Scripts: ./lua/presence-*.lua.
import { ApiError, badRequest } from '../errors'
import { redisScript } from '../redis-script'
import { config } from '../config'
import { FAN_ENTRY_OVERHEAD_BYTES, fanoutBudgetExceeded } from './fan-budget'
import { defaultHookSettings, hookArgs } from './hooks'
import { channelKeys, FAN_BUDGET_SLICES } from './keys'
import FAN_BUDGET_LUA from './lua/fan-budget.lua' with { type: 'text' }
import HOOKS_LUA from './lua/hooks.lua' with { type: 'text' }
import NOW_LUA from './lua/now.lua' with { type: 'text' }
import COUNT_LUA from './lua/presence-count.lua' with { type: 'text' }
import ENTER_LUA from './lua/presence-enter.lua' with { type: 'text' }
import LEAVE_LUA from './lua/presence-leave.lua' with { type: 'text' }
import LIST_LUA from './lua/presence-list.lua' with { type: 'text' }
import PRELUDE_LUA from './lua/presence-prelude.lua' with { type: 'text' }
import SWEEP_LUA from './lua/presence-sweep.lua' with { type: 'text' }

/** Identities per channel; entering a full roster as a new identity is refused with 429. */
export const PRESENCE_MAX_MEMBERS = 100
/** Largest serialized `info`, in UTF-8 bytes. */
export const PRESENCE_INFO_MAX_BYTES = 10_240
/** Connection entry lifetime: 1..3600 seconds, default 60. */
export const PRESENCE_TTL_DEFAULT_SECONDS = 60
export const PRESENCE_TTL_MAX_SECONDS = 3600
/**
 * How long a roster's keys outlive its last connection's expiry. Gateways sweep rosters every GATEWAY_PRESENCE_SWEEP_MS
 * (5 s, well below this) and emit the leaves of expired connections; were the keys gone first, the leave would be lost.
 */
export const PRESENCE_KEY_GRACE_MS = 30_000

export interface PresenceMember {
  identity: string
  /** Live connections of this identity on the channel (≥ 1). */
  connections: number
  /** Parsed `info` of the identity's latest enter carrying one; null when none was given. */
  info: unknown
}

// Every presence script starts with the prelude: it removes expired connections and emits joins and leaves into the
// shard's fan-out stream, and webhook events into its hooks stream (de-flapped: ./hooks.ts), in the same atomic step
// that changes the roster (./lua/presence-prelude.lua).
const presenceScript = <Reply>(body: string) => redisScript<Reply>('realtime presence', NOW_LUA, FAN_BUDGET_LUA, HOOKS_LUA, PRELUDE_LUA, body)
const enterScript = presenceScript<number | [number, number]>(ENTER_LUA)
const leaveScript = presenceScript<number>(LEAVE_LUA)
const listScript = presenceScript<[string[], string[]]>(LIST_LUA)
const countScript = presenceScript<[number, number]>(COUNT_LUA)
const sweepScript = presenceScript<number>(SWEEP_LUA)

/** The product's fan-out budget that presence events are charged to (defaults from config; tests pass their own). */
export interface PresenceBudget {
  fanoutRetentionMs: number
  fanoutMaxBytes: number
}

const defaultBudget = (): PresenceBudget => ({ fanoutRetentionMs: config.realtime.fanoutRetentionMs, fanoutMaxBytes: config.realtime.productFanoutMaxBytes })

/** The twelve keys and the nine leading arguments every presence script takes. */
function rosterOf(productId: string, channel: string, budget = defaultBudget(), hooks = defaultHookSettings()): [keys: string[], args: (string | number)[]] {
  const keys = channelKeys(productId, channel)
  return [[keys.pres, keys.presCount, keys.presExp, keys.fan, keys.fanSeq, keys.fanBudget, keys.hooks, keys.hooksDue, keys.hookBudget, keys.presGone, keys.presHook, keys.hookDropped],
    [productId, channel, budget.fanoutRetentionMs, budget.fanoutMaxBytes, FAN_BUDGET_SLICES, FAN_ENTRY_OVERHEAD_BYTES, ...hookArgs(hooks)]]
}

/** The zset member of one connection: length-prefixed identity, so any identity and connection id split back apart. */
const memberOf = (identity: string, connectionId: string) => `${Buffer.byteLength(identity, 'utf8')}:${identity}${connectionId}` // Lua counts bytes

function requireNonEmpty(value: string, name: string): void {
  if (typeof value !== 'string' || value === '') throw badRequest(`${name} is required`, [{ path: `/${name}`, message: 'non-empty string' }])
}

/**
 * Puts a connection on the channel's roster, or refreshes it (same connectionId): its entry lives `ttlSeconds` from now.
 * @throws ApiError 429 `presence_full` when 100 identities are present and this one is not among them;
 *         429 `fanout_budget_exceeded` when its `join` would pass the product's fan-out byte budget on the shard (a
 *         connection already present, a refresh, is never refused: it emits nothing);
 *         400 `invalid` when `info` serializes to more than 10 240 bytes.
 */
export async function enterPresence(input: {
  productId: string
  channel: string
  identity: string
  connectionId: string
  info?: unknown
  ttlSeconds?: number
}, budget = defaultBudget(), hooks = defaultHookSettings()): Promise<{ joined: boolean }> {
  requireNonEmpty(input.identity, 'identity')
  requireNonEmpty(input.connectionId, 'connectionId')
  const ttl = input.ttlSeconds ?? PRESENCE_TTL_DEFAULT_SECONDS
  if (!Number.isInteger(ttl) || ttl < 1 || ttl > PRESENCE_TTL_MAX_SECONDS)
    throw badRequest(`ttlSeconds must be an integer from 1 to ${PRESENCE_TTL_MAX_SECONDS}`, [{ path: '/ttlSeconds', message: `integer 1..${PRESENCE_TTL_MAX_SECONDS}` }])
  const info = input.info === undefined ? '' : (JSON.stringify(input.info) ?? 'null')
  const size = Buffer.byteLength(info, 'utf8')
  if (size > PRESENCE_INFO_MAX_BYTES)
    throw new ApiError('invalid', `Presence info is ${size} bytes serialized; the limit is ${PRESENCE_INFO_MAX_BYTES}`, { limit: PRESENCE_INFO_MAX_BYTES })
  const [keys, args] = rosterOf(input.productId, input.channel, budget, hooks)
  const entered = await enterScript.run(keys,
    [...args, input.identity, memberOf(input.identity, input.connectionId), info, ttl * 1000, PRESENCE_MAX_MEMBERS, PRESENCE_KEY_GRACE_MS])
  if (Array.isArray(entered)) throw fanoutBudgetExceeded(Number(entered[1]), budget.fanoutMaxBytes, budget.fanoutRetentionMs)
  if (entered === 0) throw new ApiError('presence_full', `The presence roster of this channel is full (${PRESENCE_MAX_MEMBERS} members)`, { limit: PRESENCE_MAX_MEMBERS })
  return { joined: entered === 2 }
}

/**
 * Removes one connection; the identity leaves the roster with its last connection. Leaving twice is harmless. Never
 * refused: its `leave` is charged to the product's fan-out budget even past it.
 */
export async function leavePresence(input: { productId: string; channel: string; identity: string; connectionId: string }, budget = defaultBudget(), hooks = defaultHookSettings()): Promise<void> {
  const [keys, args] = rosterOf(input.productId, input.channel, budget, hooks)
  await leaveScript.run(keys, [...args, memberOf(input.identity, input.connectionId)])
}

/** The roster, one member per identity (sorted by identity), expired connections excluded (and removed). */
export async function listPresence(productId: string, channel: string): Promise<PresenceMember[]> {
  const [infos, counts] = await listScript.run(...rosterOf(productId, channel))
  const infoOf = new Map<string, string>()
  for (let i = 0; i + 1 < infos.length; i += 2) infoOf.set(infos[i]!, infos[i + 1]!)
  const members: PresenceMember[] = []
  for (let i = 0; i + 1 < counts.length; i += 2) {
    const identity = counts[i]!
    members.push({ identity, connections: Number(counts[i + 1]), info: parseInfo(infoOf.get(identity)) })
  }
  return members.sort((a, b) => (a.identity < b.identity ? -1 : a.identity > b.identity ? 1 : 0))
}

function parseInfo(text: string | undefined): unknown {
  if (text === undefined) return null
  try {
    return JSON.parse(text)
  } catch {
    return null
  }
}

/** Number of identities and of live connections on the channel. */
export async function presenceCount(productId: string, channel: string): Promise<{ members: number; connections: number }> {
  const [members, connections] = await countScript.run(...rosterOf(productId, channel))
  return { members: Number(members), connections: Number(connections) }
}

/**
 * Takes expired connections off these channels' rosters, emitting a `leave` for each identity whose last connection
 * expired. Expiry is otherwise noticed only when some script touches the roster; a gateway sweeps the channels its
 * clients subscribe to, so the connections of a gateway that died (SIGKILL) leave within about one lifetime. Also
 * announces the webhook removals whose grace has ended; the webhooks process's due checks call it for the channels
 * that need a look (./hook-events.ts), subscribed anywhere or not.
 */
export async function sweepPresence(channels: Iterable<{ productId: string; channel: string }>, hooks = defaultHookSettings()): Promise<void> {
  const batch: [string[], (string | number)[]][] = []
  // Sent back to back on the one connection, at most 200 awaiting at a time. A batch that fails does not keep the
  // later ones from running (one broken roster would stall the sweep of every channel after it); the first failure is
  // thrown at the end.
  let failure: { error: unknown } | undefined
  const send = (calls: typeof batch) => sweepScript.runEach(calls).then(() => undefined, (error: unknown) => void (failure ??= { error }))
  for (const { productId, channel } of channels) {
    batch.push(rosterOf(productId, channel, defaultBudget(), hooks))
    if (batch.length >= 200) await send(batch.splice(0))
  }
  if (batch.length) await send(batch)
  if (failure) throw failure.error
}

/** sweepPresence for one channel: the due checks run each channel on its own, so one failure stays its own. */
export async function sweepPresenceOne(where: { productId: string; channel: string }, hooks = defaultHookSettings()): Promise<void> {
  await sweepScript.run(...rosterOf(where.productId, where.channel, defaultBudget(), hooks))
}
