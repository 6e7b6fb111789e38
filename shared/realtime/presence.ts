// Presence rosters in Redis: who is on a channel, deduplicated by identity, changed only by Lua so that the member cap
// and the dedupe hold under concurrent enters. Keys: ./keys.ts (pres, presCount, presExp).
//
// Per channel:
//   pres       hash  identity → info (the JSON text as given; the latest enter that carries info wins)
//   presCount  hash  identity → number of live connections
//   presExp    zset  `<len(identity)>:<identity><connectionId>` → expiry (ms, Redis clock)
// An identity is on the roster exactly while it has a live connection. Expired connections are removed at the start of
// every script, so a dead gateway's connections fall off by expiry; live gateways refresh by entering again.
import type Redis from 'ioredis'
import { ApiError, badRequest, logUnlessOutage, unavailable } from '../errors'
import { redis } from '../redis'
import { config } from '../config'
import { FAN_BUDGET_LUA, FAN_ENTRY_OVERHEAD_BYTES, fanoutBudgetExceeded } from './fan-budget'
import { channelKeys, FAN_BUDGET_SLICES } from './keys'

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

// KEYS: 1 pres, 2 presCount, 3 presExp, 4 the shard's fan-out stream, 5 its sequence, 6 the product's fan-out budget
// (fanb; keys.ts). ARGV: 1 productId, 2 channel, 3 fan-out retention (ms), 4 fan-out budget (bytes), 5 budget slices,
// 6 fan entry overhead, then each script's own from 7. Removes expired connections; every script starts with it.
// Join and leave are emitted here, into the shard's fan-out stream, in the same atomic step that changes the roster: one
// `join` when an identity's first connection enters, one `leave` when its last one leaves or expires, however many tabs
// and gateways it uses. Gateways deliver them to the channel's subscribers.
// Every event is charged to the product's fan-out byte budget on the shard, like a publication: a join past it is refused
// (the enter with it, nothing written), a leave never is (refusing it would leave a member on the roster for ever).
const LUA_PRELUDE = `${FAN_BUDGET_LUA}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[3])
local slices = tonumber(ARGV[5])
local function event_cost(kind, identity, info)
  return #ARGV[1] + #ARGV[2] + #kind + #identity + #info + tonumber(ARGV[6])
end
local function emit(kind, identity, info)
  -- Trimmed by age only, as every writer of the stream does (broker.ts): never by length.
  redis.call('XADD', KEYS[4], 'MINID', '~', now - window, '*', 'n', redis.call('INCR', KEYS[5]), 'channel', ARGV[2], 'product', ARGV[1], 'id', '', 't', now,
    'kind', kind, 'identity', identity, 'info', info)
  fan_charge(KEYS[6], window, slices, now, event_cost(kind, identity, info))
end
local function identity_of(member)
  local colon = string.find(member, ':', 1, true)
  local len = tonumber(string.sub(member, 1, colon - 1))
  return string.sub(member, colon + 1, colon + len)
end
local function drop(member)
  if redis.call('ZREM', KEYS[3], member) == 0 then return end
  local identity = identity_of(member)
  if redis.call('HINCRBY', KEYS[2], identity, -1) <= 0 then
    redis.call('HDEL', KEYS[2], identity)
    redis.call('HDEL', KEYS[1], identity)
    emit('leave', identity, '')
  end
end
for _, member in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)) do drop(member) end
`

// ARGV: 7 identity, 8 member, 9 info JSON ('' = none given), 10 ttl ms, 11 max members. Returns 2 when the identity
// joined, 1 when it was already there (another connection, or a refresh), 0 when the roster is full, {-1, ms until the
// budget may allow it} when the join would pass the product's fan-out budget (nothing written).
const ENTER_LUA = `${LUA_PRELUDE}
local identity = ARGV[7]
local present = redis.call('HEXISTS', KEYS[2], identity) == 1
if not present then
  if redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[11]) then return 0 end
  local info = ARGV[9] ~= '' and ARGV[9] or 'null'
  local used, wait = fan_used(KEYS[6], window, slices, now)
  if used + event_cost('join', identity, info) > tonumber(ARGV[4]) then return {-1, wait} end
end
if redis.call('ZADD', KEYS[3], now + tonumber(ARGV[10]), ARGV[8]) == 1 then redis.call('HINCRBY', KEYS[2], identity, 1) end
if ARGV[9] ~= '' then redis.call('HSET', KEYS[1], identity, ARGV[9]) else redis.call('HSETNX', KEYS[1], identity, 'null') end
-- The roster's keys outlive its longest-lived connection by a grace period, so an abandoned channel leaves nothing
-- behind, yet the gateways' sweeps still find the expired connections there and emit their leaves.
local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
local at = math.floor(tonumber(last[2])) + ${PRESENCE_KEY_GRACE_MS}
for i = 1, 3 do redis.call('PEXPIREAT', KEYS[i], at) end
if present then return 1 end
emit('join', identity, redis.call('HGET', KEYS[1], identity))
return 2
`

// ARGV: 7 member
const LEAVE_LUA = `${LUA_PRELUDE}
drop(ARGV[7])
return 1
`

const LIST_LUA = `${LUA_PRELUDE}
return {redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2])}
`

// Only the prelude: drops expired connections, emitting their identities' leaves.
const SWEEP_LUA = `${LUA_PRELUDE}
return 1
`

const COUNT_LUA = `${LUA_PRELUDE}
return {redis.call('HLEN', KEYS[2]), redis.call('ZCARD', KEYS[3])}
`

interface PresenceRedis extends Redis {
  rtPresenceEnter(...args: (string | number)[]): Promise<number | [number, number]>
  rtPresenceLeave(...args: (string | number)[]): Promise<number>
  rtPresenceList(...args: (string | number)[]): Promise<[string[], string[]]>
  rtPresenceCount(...args: (string | number)[]): Promise<[number, number]>
  rtPresenceSweep(...args: (string | number)[]): Promise<number>
}

const prepared = new WeakSet<Redis>()

function client(): PresenceRedis {
  const r = redis()
  if (!prepared.has(r)) {
    r.defineCommand('rtPresenceEnter', { numberOfKeys: 6, lua: ENTER_LUA })
    r.defineCommand('rtPresenceLeave', { numberOfKeys: 6, lua: LEAVE_LUA })
    r.defineCommand('rtPresenceList', { numberOfKeys: 6, lua: LIST_LUA })
    r.defineCommand('rtPresenceCount', { numberOfKeys: 6, lua: COUNT_LUA })
    r.defineCommand('rtPresenceSweep', { numberOfKeys: 6, lua: SWEEP_LUA })
    prepared.add(r)
  }
  return r as PresenceRedis
}

async function guarded<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run()
  } catch (error) {
    if (error instanceof ApiError) throw error
    logUnlessOutage('realtime presence failed', error)
    throw unavailable('Realtime presence is unavailable')
  }
}

/** The product's fan-out budget that presence events are charged to (defaults from config; tests pass their own). */
export interface PresenceBudget {
  fanoutRetentionMs: number
  fanoutMaxBytes: number
}

const defaultBudget = (): PresenceBudget => ({ fanoutRetentionMs: config.realtime.fanoutRetentionMs, fanoutMaxBytes: config.realtime.productFanoutMaxBytes })

/** The six keys and the six leading arguments every presence script takes. */
function keysOf(productId: string, channel: string, budget = defaultBudget()): (string | number)[] {
  const keys = channelKeys(productId, channel)
  return [keys.pres, keys.presCount, keys.presExp, keys.fan, keys.fanSeq, keys.fanBudget,
    productId, channel, budget.fanoutRetentionMs, budget.fanoutMaxBytes, FAN_BUDGET_SLICES, FAN_ENTRY_OVERHEAD_BYTES]
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
}, budget = defaultBudget()): Promise<{ joined: boolean }> {
  requireNonEmpty(input.identity, 'identity')
  requireNonEmpty(input.connectionId, 'connectionId')
  const ttl = input.ttlSeconds ?? PRESENCE_TTL_DEFAULT_SECONDS
  if (!Number.isInteger(ttl) || ttl < 1 || ttl > PRESENCE_TTL_MAX_SECONDS)
    throw badRequest(`ttlSeconds must be an integer from 1 to ${PRESENCE_TTL_MAX_SECONDS}`, [{ path: '/ttlSeconds', message: `integer 1..${PRESENCE_TTL_MAX_SECONDS}` }])
  const info = input.info === undefined ? '' : (JSON.stringify(input.info) ?? 'null')
  const size = Buffer.byteLength(info, 'utf8')
  if (size > PRESENCE_INFO_MAX_BYTES)
    throw new ApiError(400, 'invalid', `Presence info is ${size} bytes serialized; the limit is ${PRESENCE_INFO_MAX_BYTES}`, { limit: PRESENCE_INFO_MAX_BYTES })
  const entered = await guarded(() =>
    client().rtPresenceEnter(...keysOf(input.productId, input.channel, budget), input.identity, memberOf(input.identity, input.connectionId), info, ttl * 1000, PRESENCE_MAX_MEMBERS),
  )
  if (Array.isArray(entered)) throw fanoutBudgetExceeded(Number(entered[1]), budget.fanoutMaxBytes, budget.fanoutRetentionMs)
  if (entered === 0) throw new ApiError(429, 'presence_full', `The presence roster of this channel is full (${PRESENCE_MAX_MEMBERS} members)`, { limit: PRESENCE_MAX_MEMBERS })
  return { joined: entered === 2 }
}

/**
 * Removes one connection; the identity leaves the roster with its last connection. Leaving twice is harmless. Never
 * refused: its `leave` is charged to the product's fan-out budget even past it.
 */
export async function leavePresence(input: { productId: string; channel: string; identity: string; connectionId: string }, budget = defaultBudget()): Promise<void> {
  await guarded(() => client().rtPresenceLeave(...keysOf(input.productId, input.channel, budget), memberOf(input.identity, input.connectionId)))
}

/** The roster, one member per identity (sorted by identity), expired connections excluded (and removed). */
export async function listPresence(productId: string, channel: string): Promise<PresenceMember[]> {
  const [infos, counts] = await guarded(() => client().rtPresenceList(...keysOf(productId, channel)))
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
  const [members, connections] = await guarded(() => client().rtPresenceCount(...keysOf(productId, channel)))
  return { members: Number(members), connections: Number(connections) }
}

/**
 * Takes expired connections off these channels' rosters, emitting a `leave` for each identity whose last connection
 * expired. Expiry is otherwise noticed only when some script touches the roster; a gateway sweeps the channels its
 * clients subscribe to, so the connections of a gateway that died (SIGKILL) leave within about one lifetime.
 */
export async function sweepPresence(channels: Iterable<{ productId: string; channel: string }>): Promise<void> {
  const r = client()
  let batch: Promise<number>[] = []
  // Sent back to back on the one connection, at most 200 awaiting at a time.
  for (const { productId, channel } of channels) {
    batch.push(r.rtPresenceSweep(...keysOf(productId, channel)))
    if (batch.length >= 200) await guarded(() => Promise.all(batch.splice(0)))
  }
  if (batch.length) await guarded(() => Promise.all(batch))
}
