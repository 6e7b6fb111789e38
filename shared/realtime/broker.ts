// The Redis broker of the realtime data plane: publish (history + fan-out in one Lua script) and history reads.
// Key layout: ./keys.ts. Semantics and failure modes: docs/realtime-data-plane.md.
import { randomUUID } from 'node:crypto'
import type Redis from 'ioredis'
import { config } from '../config'
import { ApiError, badRequest, logUnlessOutage, unavailable } from '../errors'
import { redis } from '../redis'
import { FAN_BUDGET_LUA, FAN_ENTRY_OVERHEAD_BYTES, fanoutBudgetExceeded } from './fan-budget'
import { channelKeys, FAN_BUDGET_SLICES } from './keys'

/** A namespace's history policy. History is kept only when both are positive; 0/0 = no history. */
export interface HistoryPolicy {
  /** Retention window in seconds (≤ 30 days): entries older than this are never returned, and a channel idle this long loses its history and epoch. */
  historyTtlSeconds: number
  /** Entries kept per channel (≤ 10 000); older ones are trimmed on publish. */
  historySize: number
}

/** An over-cap payload stored in S3 (see ./payloads.ts); delivered instead of `data`. */
export interface PayloadRef {
  bucket_key: string
  /** Bytes. */
  size: number
  content_type?: string
}

export interface PublishInput {
  productId: string
  channel: string
  policy: HistoryPolicy
  /** Serialized JSON, delivered inline. Exactly one of `data` and `ref`. */
  data?: string
  ref?: PayloadRef
  /** Message id; default a random UUID. */
  id?: string
  /**
   * Set for a client event: the sending connection's id. The message is then ephemeral whatever the policy (never
   * stored, no offset or epoch) and its fan-out entry carries `sender` so the sender's gateway skips that connection.
   */
  senderConnectionId?: string
}

/** `offset`/`epoch` only when the message went to history. */
export interface PublishResult {
  id: string
  offset?: number
  epoch?: string
}

export interface HistoryEntry {
  id: string
  offset: number
  epoch: string
  /** ISO-8601, from the Redis server clock at publish. */
  publishedAt: string
  /** Parsed JSON; absent when the entry carries `ref`. */
  data?: unknown
  ref?: PayloadRef
}

/** Exactly one: the newest `last_n` (1..1000), those published within the last `last_ms` ms, or everything after a cursor. */
export type HistoryQuery = { last_n: number } | { last_ms: number } | { offset: number; epoch: string }

export interface HistoryResult {
  /** Ascending by offset. */
  entries: HistoryEntry[]
  /** The channel's top offset; 0 if it has none. */
  offset: number
  /** The channel's current epoch; '' if the channel has no history stream. */
  epoch: string
  /**
   * False only for a cursor read whose epoch differs, whose first missed entry is gone, or whose gap is larger than one
   * reply may carry (config.realtime.historyMaxReplyBytes); then `entries` is empty and the client must resync.
   */
  recovered: boolean
  /** Present (true) when a window read stopped at the reply budget: `entries` are the newest that fit. */
  truncated?: true
}

/** True when a namespace policy keeps history. */
export const keepsHistory = (policy: HistoryPolicy) => policy.historyTtlSeconds > 0 && policy.historySize > 0

export const LAST_N_MAX = 1000

// Shared Lua helpers. Times are milliseconds from the Redis server clock, so writers on different hosts agree.
const LUA_NOW = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`

// The product's history bytes on a shard (docs/realtime-data-plane.md, "Budgets"): the per-channel copies and their sum
// (field #) in histb; histx says when each channel's keys expire, so channels that expired are taken off the sum (100
// per call) and the sum cannot drift past the channels that still exist.
// - hist_other(histb, histx, channel, now) → the product's bytes on the shard without this channel's, expired ones dropped
// - hist_set(histb, histx, channel, bytes, other, expires_at, ttl) stores the channel's bytes and when its keys expire
const HIST_BUDGET_LUA = `
local function hist_other(histb, histx, channel, now)
  local gone = redis.call('ZRANGEBYSCORE', histx, '-inf', '(' .. now, 'LIMIT', 0, 100)
  local total = tonumber(redis.call('HGET', histb, '#') or '0')
  for _, ch in ipairs(gone) do
    total = total - tonumber(redis.call('HGET', histb, ch) or '0')
    redis.call('HDEL', histb, ch)
  end
  if #gone > 0 then
    redis.call('ZREM', histx, unpack(gone))
    redis.call('HSET', histb, '#', math.max(0, total))
  end
  return math.max(0, total - tonumber(redis.call('HGET', histb, channel) or '0'))
end
local function hist_set(histb, histx, channel, bytes, other, expires_at, ttl)
  redis.call('HSET', histb, channel, bytes, '#', other + bytes)
  redis.call('ZADD', histx, expires_at, channel)
  -- The product's index lives as long as its longest-lived channel on this shard.
  for _, k in ipairs({histb, histx}) do
    if redis.call('PTTL', k) < ttl then redis.call('PEXPIRE', k, ttl) end
  end
end
`

/**
 * What a channel's history costs beyond its entries, charged to its bytes (meta `b`) from the start of its epoch until
 * its keys expire: the channel's name appears in the hist and meta key names, the histb field and the histx member,
 * besides the meta hash itself and Redis' per-key overhead. Cost: 4 × the channel's bytes + this.
 */
export const HISTORY_CHANNEL_OVERHEAD_BYTES = 512

/** What a channel with history costs the product's history budget before its first entry. */
export const historyChannelBytes = (channel: string) => 4 * Buffer.byteLength(channel, 'utf8') + HISTORY_CHANNEL_OVERHEAD_BYTES

/** What a fan-out entry costs beyond its product id, channel, message id, payload and sender. */
export { FAN_ENTRY_OVERHEAD_BYTES }
/** What a history entry costs beyond its message id and payload (field names, t, stream id). */
export const HISTORY_ENTRY_OVERHEAD_BYTES = 64

/** The per-product budgets one publish is checked against (defaults from config; tests pass their own). */
export interface PublishBudgets {
  /** How long fan-out entries stay in the shard stream, ms (XADD MINID); also the window of the fan-out budget. */
  fanoutRetentionMs: number
  /** Bytes one product may append to one shard's fan-out stream within the window. */
  fanoutMaxBytes: number
  /** Bytes of history one product may keep on one shard. */
  historyMaxBytes: number
}

export const defaultBudgets = (): PublishBudgets => ({
  fanoutRetentionMs: config.realtime.fanoutRetentionMs,
  fanoutMaxBytes: config.realtime.productFanoutMaxBytes,
  historyMaxBytes: config.realtime.productHistoryMaxBytes,
})

// KEYS: 1 hist, 2 meta, 3 fan, 4 fan sequence, 5 product's fan-out budget (fanb), 6 product's history bytes (histb),
//       7 product's channel expiries (histx)
// ARGV: 1 historySize (0 = ephemeral), 2 retention ms, 3 epoch candidate, 4 productId, 5 channel, 6 message id,
//       7 payload field ('d' or 'r'), 8 payload, 9 fan-out retention ms, 10 sender connection id ('' = none),
//       11 fan-out budget bytes, 12 history budget bytes, 13 budget slices, 14 fan entry overhead, 15 history entry overhead,
//       16 history channel overhead
// Returns {offset, epoch} when stored, {} otherwise, {-1, 'fanout' | 'history', ms until it may fit} when over a budget
// (then nothing was written but bookkeeping: expired history trimmed and accounted).
// Budgets (docs/realtime-data-plane.md, "Budgets"): both are checked before anything is appended, so a refused publish
// leaves the streams as they were; the fan-out stream is trimmed by age only, never by length.
const PUBLISH_LUA = `${LUA_NOW}${FAN_BUDGET_LUA}${HIST_BUDGET_LUA}
if redis.replicate_commands then redis.replicate_commands() end
local now = now_ms()
local size = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
local stored = size > 0 and ttl > 0
local window = tonumber(ARGV[9])
local slices = tonumber(ARGV[13])
local fan_cost = #ARGV[4] + #ARGV[5] + #ARGV[6] + #ARGV[8] + #ARGV[10] + tonumber(ARGV[14])
local used, fan_wait = fan_used(KEYS[5], window, slices, now)
if used + fan_cost > tonumber(ARGV[11]) then return {-1, 'fanout', fan_wait} end
local result = {}
local epoch = nil
local hist_cost = 0
if stored then
  -- History budget: the channel's bytes live in its meta hash (field b, expiring with its stream): its entries, and
  -- from the start of its epoch the channel's own cost (4 x name + overhead); the product's total in histb.
  local other = hist_other(KEYS[6], KEYS[7], ARGV[5], now)
  epoch = redis.call('HGET', KEYS[2], 'e')
  local bytes = 0
  local function entry_bytes(entry)
    local n = tonumber(ARGV[15])
    -- fields: t, <time>, i, <id>, d|r, <payload>: the id and the payload are what a publish was charged for
    for j = 4, #entry[2], 2 do n = n + #entry[2][j] end
    return n
  end
  local freed = 0
  if epoch then
    bytes = tonumber(redis.call('HGET', KEYS[2], 'b') or '0')
    -- Trim by age: drop leading entries older than the window (bounded work per publish; reads filter by age anyway).
    local cutoff = now - ttl
    local head = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
    if #head > 0 and tonumber(head[1][2][2]) < cutoff then
      local batch = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 100)
      local keep = nil
      for i = 1, #batch do
        if tonumber(batch[i][2][2]) >= cutoff then keep = batch[i][1] break end
        bytes = bytes - entry_bytes(batch[i])
      end
      -- MINID drops ids below it; with none of the batch young enough, drop the whole batch ('<last offset>-1').
      if not keep then keep = string.gsub(batch[#batch][1], '-0$', '-1') end
      redis.call('XTRIM', KEYS[1], 'MINID', keep)
      bytes = math.max(0, bytes)
      redis.call('HSET', KEYS[2], 'b', bytes)
    end
    -- What the size trim of this publish's XADD will drop (MAXLEN is exact).
    local over = redis.call('XLEN', KEYS[1]) - size + 1
    if over > 0 then
      for _, entry in ipairs(redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', over)) do freed = freed + entry_bytes(entry) end
    end
  end
  hist_cost = #ARGV[6] + #ARGV[8] + tonumber(ARGV[15])
  -- A new epoch starts with the channel's own cost.
  local base = epoch and math.max(0, bytes - freed) or (4 * #ARGV[5] + tonumber(ARGV[16]))
  local after = base + hist_cost
  if other + after > tonumber(ARGV[12]) then
    -- Refused: keep the bookkeeping of what was trimmed by age. It may fit once the product's first channel expires.
    if epoch then
      redis.call('HSET', KEYS[6], ARGV[5], bytes, '#', other + bytes)
    else
      redis.call('HSET', KEYS[6], '#', other)
      redis.call('HDEL', KEYS[6], ARGV[5])
    end
    local first = redis.call('ZRANGE', KEYS[7], 0, 0, 'WITHSCORES')
    return {-1, 'history', first[2] and (tonumber(first[2]) - now) or ttl}
  end
  if not epoch then
    -- A new epoch: whatever history stream survives belongs to the old one and must not be served under the new.
    epoch = ARGV[3]
    redis.call('DEL', KEYS[1])
    redis.call('HSET', KEYS[2], 'e', epoch)
  end
  local offset = redis.call('HINCRBY', KEYS[2], 'o', 1)
  redis.call('XADD', KEYS[1], 'MAXLEN', size, string.format('%d-0', offset), 't', now, 'i', ARGV[6], ARGV[7], ARGV[8])
  redis.call('HSET', KEYS[2], 'b', after)
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
  hist_set(KEYS[6], KEYS[7], ARGV[5], after, other, now + ttl, ttl)
  result = {offset, epoch}
end
-- Trimmed by age only: an entry stays at least the window, whatever other products append (never MAXLEN).
local fan = {'XADD', KEYS[3], 'MINID', '~', now - window, '*', 'channel', ARGV[5], 'product', ARGV[4], 'id', ARGV[6], 't', now}
if stored then
  table.insert(fan, 'offset') table.insert(fan, result[1])
  table.insert(fan, 'epoch') table.insert(fan, result[2])
end
if ARGV[10] ~= '' then table.insert(fan, 'sender') table.insert(fan, ARGV[10]) end
table.insert(fan, ARGV[7]) table.insert(fan, ARGV[8])
-- Numbered last, next to the XADD, so that no number is ever taken without its entry.
table.insert(fan, 'n') table.insert(fan, redis.call('INCR', KEYS[4]))
redis.call(unpack(fan))
fan_charge(KEYS[5], window, slices, now, fan_cost)
return result
`

// KEYS: 1 hist, 2 meta
// ARGV: 1 mode ('n' last_n, 'ms' last_ms, 'c' cursor), 2 n | ms | cursor offset, 3 retention ms, 4 cursor epoch,
//       5 reply budget (bytes), 6 what each entry adds to a reply beyond its stored field values (keys, quotes, offset,
//       epoch, channel: see HISTORY_ENTRY_FRAMING_BYTES)
// Returns {epoch or '', top offset, recovered 0/1, entries, truncated 0/1}; entries newest first for 'n'/'ms',
// ascending for 'c'. Every entry's first field is t (publish time), set by the publish script.
// The budget bounds what one reply builds inside Redis: a cursor gap larger than it does not recover (all or nothing);
// a window returns the newest entries that fit and says it was truncated.
const HISTORY_LUA = `${LUA_NOW}
local budget = tonumber(ARGV[5])
local framing = tonumber(ARGV[6]) or 0
local function entry_bytes(entry)
  local n = framing
  for j = 2, #entry[2], 2 do n = n + #entry[2][j] end
  return n
end
local now = now_ms()
local meta = redis.call('HMGET', KEYS[2], 'e', 'o')
local epoch = meta[1] or ''
local top = tonumber(meta[2]) or 0
local cutoff = now - tonumber(ARGV[3])
local mode = ARGV[1]
if mode == 'c' then
  local offset = tonumber(ARGV[2])
  if ARGV[4] ~= epoch or offset > top then return {epoch, top, 0, {}} end
  if offset == top then return {epoch, top, 1, {}} end
  local from = string.format('%d-0', offset + 1)
  local first = redis.call('XRANGE', KEYS[1], from, from)
  -- All or nothing: the first missed entry must still be there and inside the retention window.
  if #first == 0 or tonumber(first[1][2][2]) < cutoff then return {epoch, top, 0, {}} end
  local out = {}
  local bytes = 0
  local start = from
  while true do
    local batch = redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', 500)
    for i = 1, #batch do
      bytes = bytes + entry_bytes(batch[i])
      if bytes > budget then return {epoch, top, 0, {}} end
      out[#out + 1] = batch[i]
    end
    if #batch < 500 then break end
    start = '(' .. batch[#batch][1]
  end
  return {epoch, top, 1, out}
end
if epoch == '' then return {'', 0, 1, {}} end
local count = 0
if mode == 'n' then count = tonumber(ARGV[2])
else cutoff = math.max(cutoff, now - tonumber(ARGV[2])) end
local out = {}
local bytes = 0
local last = '+'
while true do
  local batch = redis.call('XREVRANGE', KEYS[1], last, '-', 'COUNT', 500)
  if #batch == 0 then break end
  for i = 1, #batch do
    if tonumber(batch[i][2][2]) < cutoff then return {epoch, top, 1, out} end
    bytes = bytes + entry_bytes(batch[i])
    if bytes > budget then return {epoch, top, 1, out, 1} end
    out[#out + 1] = batch[i]
    if count > 0 and #out >= count then return {epoch, top, 1, out} end
  end
  if #batch < 500 then break end
  last = '(' .. batch[#batch][1]
end
return {epoch, top, 1, out}
`

type StreamEntry = [id: string, fields: string[]]
type HistoryReply = [epoch: string, top: number, recovered: number, entries: StreamEntry[], truncated?: number]

interface BrokerRedis extends Redis {
  rtPublish(...args: (string | number)[]): Promise<[number, string] | [-1, string, number] | []>
  rtHistory(...args: (string | number)[]): Promise<HistoryReply>
  rtPosition(...args: (string | number)[]): Promise<[string, number]>
}

/** 16 random hex characters: the epoch a script takes when the channel has none. */
const epochCandidate = () => randomUUID().replaceAll('-', '').slice(0, 16)

// KEYS: 1 hist, 2 meta, 3 histb, 4 histx. ARGV: 1 epoch candidate, 2 retention ms, 3 channel, 4 history budget bytes,
// 5 history channel overhead. Returns {epoch, top offset}, starting an epoch at offset 0 when the channel has none (as
// a publish would, leftover history stream included), charged to the product's history budget like a publish's new
// epoch; when the channel's cost does not fit, {'', 0} and nothing is created (the subscriber's cursor then names no
// epoch: after the first publish it does not recover, a visible resync, never a silent gap).
const POSITION_LUA = `${LUA_NOW}${HIST_BUDGET_LUA}
local meta = redis.call('HMGET', KEYS[2], 'e', 'o')
if meta[1] then return {meta[1], tonumber(meta[2]) or 0} end
local now = now_ms()
local ttl = tonumber(ARGV[2])
local other = hist_other(KEYS[3], KEYS[4], ARGV[3], now)
local cost = 4 * #ARGV[3] + tonumber(ARGV[5])
if other + cost > tonumber(ARGV[4]) then
  redis.call('HSET', KEYS[3], '#', other)
  redis.call('HDEL', KEYS[3], ARGV[3])
  return {'', 0}
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[2], 'e', ARGV[1], 'o', 0, 'b', cost)
redis.call('PEXPIRE', KEYS[2], ttl)
hist_set(KEYS[3], KEYS[4], ARGV[3], cost, other, now + ttl, ttl)
return {ARGV[1], 0}
`

const prepared = new WeakSet<Redis>()

/** The shared command connection with the broker's scripts defined (EVALSHA, reloaded on NOSCRIPT by ioredis). */
function client(): BrokerRedis {
  const r = redis()
  if (!prepared.has(r)) {
    r.defineCommand('rtPublish', { numberOfKeys: 7, lua: PUBLISH_LUA })
    r.defineCommand('rtHistory', { numberOfKeys: 2, lua: HISTORY_LUA, readOnly: true })
    r.defineCommand('rtPosition', { numberOfKeys: 4, lua: POSITION_LUA })
    prepared.add(r)
  }
  return r as BrokerRedis
}

/** Redis failures become 503 (the spec's "fan-out or history unavailable"); ApiErrors pass through. */
async function guarded<T>(what: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run()
  } catch (error) {
    if (error instanceof ApiError) throw error
    logUnlessOutage(`realtime ${what} failed`, error)
    throw unavailable(`Realtime ${what} is unavailable`)
  }
}

/**
 * Publishes one message: when the policy keeps history (and it is not a client event) it advances the channel's offset,
 * appends the history entry and the shard's fan-out entry in ONE Lua script, so subscribers never see an offset that
 * history lacks or a gap in offsets.
 * @example await publish({ productId, channel: 'chat:1', policy, data: JSON.stringify({ text: 'hi' }) })
 */
export async function publish(input: PublishInput, budgets: PublishBudgets = defaultBudgets()): Promise<PublishResult> {
  if ((input.data === undefined) === (input.ref === undefined)) throw badRequest('A publish carries exactly one of data or ref')
  const id = input.id ?? randomUUID()
  const stored = input.senderConnectionId === undefined && keepsHistory(input.policy)
  const keys = channelKeys(input.productId, input.channel)
  const [field, payload] = input.data !== undefined ? ['d', input.data] : ['r', JSON.stringify(input.ref)]
  const reply = await guarded('publish', () =>
    client().rtPublish(
      keys.hist,
      keys.meta,
      keys.fan,
      keys.fanSeq,
      keys.fanBudget,
      keys.histBytes,
      keys.histExpiry,
      stored ? input.policy.historySize : 0,
      stored ? input.policy.historyTtlSeconds * 1000 : 0,
      epochCandidate(),
      input.productId,
      input.channel,
      id,
      field,
      payload,
      budgets.fanoutRetentionMs,
      input.senderConnectionId ?? '',
      budgets.fanoutMaxBytes,
      budgets.historyMaxBytes,
      FAN_BUDGET_SLICES,
      FAN_ENTRY_OVERHEAD_BYTES,
      HISTORY_ENTRY_OVERHEAD_BYTES,
      HISTORY_CHANNEL_OVERHEAD_BYTES,
    ),
  )
  if (reply.length === 0) return { id }
  if (Number(reply[0]) === -1) throw overBudget(String(reply[1]), Number(reply[2]), budgets)
  return { id, offset: Number(reply[0]), epoch: String(reply[1]) }
}

/**
 * 429 for a publish past one of its product's byte budgets, with Retry-After (whole seconds, at least 1): when the
 * oldest counted bytes leave the fan-out window, or when the product's first channel on the shard expires.
 */
function overBudget(kind: string, waitMs: number, budgets: PublishBudgets): ApiError {
  if (kind !== 'history') return fanoutBudgetExceeded(waitMs, budgets.fanoutMaxBytes, budgets.fanoutRetentionMs)
  const retryAfter = Math.max(1, Math.ceil(waitMs / 1000))
  return new ApiError(429, 'history_budget_exceeded',
    `The product's history on this channel's shard would pass ${budgets.historyMaxBytes} bytes; it frees as channels trim or expire`,
    { retryAfter, limitBytes: budgets.historyMaxBytes }, { 'retry-after': String(retryAfter) })
}

function validateQuery(query: HistoryQuery): [mode: 'n' | 'ms' | 'c', value: number, epoch: string] {
  if ('last_n' in query) {
    if (!Number.isInteger(query.last_n) || query.last_n < 1 || query.last_n > LAST_N_MAX)
      throw badRequest(`last_n must be an integer from 1 to ${LAST_N_MAX}`, [{ path: '/last_n', message: `integer 1..${LAST_N_MAX}` }])
    return ['n', query.last_n, '']
  }
  if ('last_ms' in query) {
    if (typeof query.last_ms !== 'number' || !Number.isFinite(query.last_ms) || query.last_ms <= 0)
      throw badRequest('last_ms must be a positive number', [{ path: '/last_ms', message: 'positive number' }])
    return ['ms', query.last_ms, '']
  }
  if (!Number.isSafeInteger(query.offset) || query.offset < 0 || typeof query.epoch !== 'string')
    throw badRequest('A cursor is a non-negative integer offset and an epoch string', [{ path: '/offset', message: 'non-negative integer' }])
  return ['c', query.offset, query.epoch]
}

function toEntry([streamId, fields]: StreamEntry, epoch: string): HistoryEntry {
  const entry: HistoryEntry = { id: '', offset: Number(streamId.slice(0, streamId.indexOf('-'))), epoch, publishedAt: '' }
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const value = fields[i + 1]!
    switch (fields[i]) {
      case 't':
        entry.publishedAt = new Date(Number(value)).toISOString()
        break
      case 'i':
        entry.id = value
        break
      case 'd':
        try {
          entry.data = JSON.parse(value)
        } catch {
          entry.data = value // publishers pass serialized JSON; keep anything else as the text it was
        }
        break
      case 'r':
        entry.ref = JSON.parse(value) as PayloadRef
        break
    }
  }
  return entry
}

/**
 * Reads a channel's history. A namespace without history answers `{entries: [], offset: 0, epoch: '', recovered: true}`
 * without touching Redis. Entries older than the retention window are never returned. A cursor read is all-or-nothing:
 * `recovered: false` with no entries when the epoch differs or the first missed entry (offset + 1) is gone.
 */
/**
 * What one entry adds to a reply beyond its stored values (publish time, id, data), channel name aside: the most of a
 * gateway publication frame (`{"type":"publication","channel":…,"id":…,"offset":…,"epoch":…,"data":…}`, about 92 bytes)
 * and an HTTP history entry (`{"id":…,"offset":…,"epoch":…,"publishedAt":…,"data":…}`, about 99), with room to
 * spare. So the budget bounds what is written, not only what is stored: many small messages cannot pass it 2-3 times over.
 */
export const HISTORY_ENTRY_FRAMING_BYTES = 128

export async function readHistory(
  productId: string, channel: string, policy: HistoryPolicy, query: HistoryQuery,
  maxReplyBytes = config.realtime.historyMaxReplyBytes,
): Promise<HistoryResult> {
  const [mode, value, cursorEpoch] = validateQuery(query)
  if (!keepsHistory(policy)) return { entries: [], offset: 0, epoch: '', recovered: true }
  const keys = channelKeys(productId, channel)
  const [epoch, top, recovered, rows, truncated] = await guarded('history', () =>
    client().rtHistory(keys.hist, keys.meta, mode, value, policy.historyTtlSeconds * 1000, cursorEpoch, maxReplyBytes, HISTORY_ENTRY_FRAMING_BYTES + channel.length),
  )
  const entries = rows.map((row) => toEntry(row, String(epoch)))
  if (mode !== 'c') entries.reverse()
  return { entries, offset: Number(top), epoch: String(epoch), recovered: recovered === 1, ...(truncated === 1 ? { truncated: true } : {}) }
}

/**
 * Where a new subscription of a history channel starts: its top offset and epoch. A channel without an epoch yet gets
 * one here, at offset 0, living as long as the retention window (each publish extends it, as always). So the cursor a
 * subscriber keeps is a real one: the first publications of the epoch are recovered after a reconnect, and an epoch
 * that expires before its first publish gives `recovered: false`, never a silent gap. The new epoch's meta hash costs
 * the product's history budget what a channel costs (historyChannelBytes); when that does not fit, nothing is created
 * and the answer is `{offset: 0, epoch: ''}` (a cursor to it recovers nothing once the channel has an epoch: resync).
 */
export async function subscriptionPosition(
  productId: string, channel: string, policy: HistoryPolicy, historyMaxBytes = config.realtime.productHistoryMaxBytes,
): Promise<{ offset: number; epoch: string }> {
  const keys = channelKeys(productId, channel)
  const [epoch, offset] = await guarded('history', () =>
    client().rtPosition(keys.hist, keys.meta, keys.histBytes, keys.histExpiry, epochCandidate(), policy.historyTtlSeconds * 1000,
      channel, historyMaxBytes, HISTORY_CHANNEL_OVERHEAD_BYTES),
  )
  return { offset: Number(offset), epoch: String(epoch) }
}

/** The channel's top offset and epoch, or null when it has no history stream (never published, or expired). */
export async function channelTop(productId: string, channel: string): Promise<{ offset: number; epoch: string } | null> {
  const keys = channelKeys(productId, channel)
  const [epoch, offset] = await guarded('history', () => redis().hmget(keys.meta, 'e', 'o'))
  if (!epoch) return null
  return { offset: Number(offset ?? 0), epoch }
}
