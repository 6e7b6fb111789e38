// The Redis broker of the realtime data plane: publish (history + fan-out in one Lua script) and history reads.
// Key layout: ./keys.ts. Scripts: ./lua/. Semantics and failure modes: docs/realtime-data-plane.md.
import { randomBytes, randomUUID } from 'node:crypto'
import { config } from '../config'
import { ApiError, badRequest } from '../errors'
import { redis } from '../redis/client'
import { orUnavailable, type RedisScript, redisFunction, redisScript } from '../redis-script'
import { FAN_ENTRY_OVERHEAD_BYTES, fanoutBudgetExceeded } from './fan-budget'
import { channelKeys, FAN_BUDGET_SLICES, publishKeys } from './keys'
import FAN_BUDGET_LUA from './lua/fan-budget.lua' with { type: 'text' }
import GENERATION_LUA from './lua/generation.lua' with { type: 'text' }
import HISTORY_LUA from './lua/history.lua' with { type: 'text' }
import HISTORY_BUDGET_LUA from './lua/history-budget.lua' with { type: 'text' }
import NOW_LUA from './lua/now.lua' with { type: 'text' }
import POSITION_LUA from './lua/position.lua' with { type: 'text' }
import PUBLISH_LUA from './lua/publish.lua' with { type: 'text' }
import PUBLISH_ONE_LUA from './lua/publish-one.lua' with { type: 'text' }
import RUN_BEGINS_LUA from './lua/run-begins.lua' with { type: 'text' }

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

/**
 * What a channel's history costs beyond its entries, charged to its bytes (meta `b`) from the start of its epoch until
 * its keys expire: the channel's name appears in the hist and meta key names, the histb field and the histx member,
 * besides the meta hash itself and Redis' per-key overhead. Cost: 4 × the channel's bytes + this.
 */
export const HISTORY_CHANNEL_OVERHEAD_BYTES = 512

/**
 * What a channel with history costs the product's history budget before its first entry: the scripts' channel_cost
 * (history-budget.lua, from HIST_CHANNEL_OVERHEAD), stated here for callers that account bytes (the tests).
 */
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

type StreamEntry = [id: string, fields: string[]]
type HistoryReply = [epoch: string, top: number, recovered: number, entries: StreamEntry[], truncated?: number]

/** publish.lua's reply: {offset, epoch} stored, {} not stored, {-1, budget, ms} refused over a byte budget. */
export type PublishReply = [number, string] | [-1, string, number] | []

/** How long an Idempotency-Key is remembered on a product: Centrifugo's idempotent result TTL. */
export const IDEMPOTENCY_WINDOW_MS = 5 * 60_000

/**
 * The constants publish.lua and the scripts that call it read, by name: the budgets, and the overheads that are the
 * same for every publish. Written into the script's source as literals rather than sent with each run (each argument
 * costs Redis about 1 500 instructions, and the worker its encoding) or declared as locals (every function that reads
 * one would capture it at each run): one script per set of budgets, which a deployment has one of.
 */
function publishConstants(budgets: PublishBudgets): Record<string, string> {
  const whole = (name: string, value: number) => {
    if (!Number.isSafeInteger(value) || value < 0) throw new Error(`publish budget ${name} must be a non-negative integer, got ${value}`)
    return String(value)
  }
  return {
    FAN_WINDOW: whole('fanoutRetentionMs', budgets.fanoutRetentionMs),
    FAN_MAX: whole('fanoutMaxBytes', budgets.fanoutMaxBytes),
    HIST_MAX: whole('historyMaxBytes', budgets.historyMaxBytes),
    ...FIXED_CONSTANTS,
  }
}

/** The constants that are the same whatever the budgets (the position script needs them too). */
const FIXED_CONSTANTS: Record<string, string> = {
  FAN_SLICES: String(FAN_BUDGET_SLICES),
  FAN_ENTRY_OVERHEAD: String(FAN_ENTRY_OVERHEAD_BYTES),
  HIST_ENTRY_OVERHEAD: String(HISTORY_ENTRY_OVERHEAD_BYTES),
  HIST_CHANNEL_OVERHEAD: String(HISTORY_CHANNEL_OVERHEAD_BYTES),
  IDEMPOTENCY_WINDOW: `'${IDEMPOTENCY_WINDOW_MS}'`, // a string: it is only handed to SET PX
}

/** `parts`, each of the names in `constants` replaced by its value. */
function writeConstants(parts: readonly string[], constants: Record<string, string>): string[] {
  const pattern = new RegExp(`\\b(${Object.keys(constants).join('|')})\\b`, 'g')
  return parts.map((part) => part.replace(pattern, (name) => constants[name]!))
}

/** `parts`, each of publishConstants' names replaced by its value for `budgets`. */
export const publishSource = (parts: readonly string[], budgets: PublishBudgets): string[] =>
  writeConstants(parts, publishConstants(budgets))

/** The position script's parts, the fixed constants written in (a test checks none is left). */
export const POSITION_PARTS = writeConstants([NOW_LUA, GENERATION_LUA, HISTORY_BUDGET_LUA, POSITION_LUA], FIXED_CONSTANTS)

/** A publishing function's parts (redisFunction's), before the constants are written in. */
export const publishingParts = (body: string, libraries: readonly string[] = []) =>
  [...PUBLISH_LIBRARY, ...libraries, `${RUN_BEGINS_LUA}\n${body}`]

/** The names publishSource replaces (a test checks none is left, and that each is used). */
export const PUBLISH_CONSTANTS = Object.keys(publishConstants({ fanoutRetentionMs: 0, fanoutMaxBytes: 0, historyMaxBytes: 0 }))

/** The libraries a script calling publish_one needs, in order, before its body. */
export const PUBLISH_LIBRARY = [NOW_LUA, GENERATION_LUA, FAN_BUDGET_LUA, HISTORY_BUDGET_LUA, PUBLISH_LUA] as const

/**
 * A script that calls publish.lua's publish_one, run as a Redis Function (the publish is the hottest script: its
 * libraries are defined once per Redis, not at each publish): the libraries it needs and `libraries` of its own, then
 * `body`, with the constants for `budgets` written in; one per body and set of budgets, made once.
 */
export function publishingScript<Reply>(body: string, libraries: readonly string[] = []): (budgets: PublishBudgets) => RedisScript<Reply> {
  const made = new Map<string, RedisScript<Reply>>()
  const parts = publishingParts(body, libraries)
  let last: { budgets: PublishBudgets; script: RedisScript<Reply> } | undefined
  return (budgets) => {
    // The same budgets as the last call (every publish of a deployment): no key made (0.8 % of a publish in a profile).
    if (last !== undefined && last.budgets.fanoutRetentionMs === budgets.fanoutRetentionMs
      && last.budgets.fanoutMaxBytes === budgets.fanoutMaxBytes && last.budgets.historyMaxBytes === budgets.historyMaxBytes) return last.script
    const key = `${budgets.fanoutRetentionMs}/${budgets.fanoutMaxBytes}/${budgets.historyMaxBytes}`
    let script = made.get(key)
    if (!script) {
      script = redisFunction<Reply>('realtime publish', ...publishSource(parts, budgets))
      made.set(key, script)
    }
    last = { budgets: { ...budgets }, script }
    return script
  }
}

const publishScript = publishingScript<PublishReply>(PUBLISH_ONE_LUA)
const historyScript = redisScript<HistoryReply>('realtime history', NOW_LUA, GENERATION_LUA, HISTORY_LUA)
const positionScript = redisScript<[string, number]>('realtime history', ...POSITION_PARTS)

let randomHex = ''
let randomHexAt = 0

/**
 * 16 random hex characters: the epoch a script takes when the channel has none. Cut from random bytes drawn 2 KiB at
 * a time: every publish sends one, and a UUID per publish, its dashes taken out, cost more than the cut.
 */
function epochCandidate(): string {
  if (randomHexAt + 16 > randomHex.length) {
    randomHex = randomBytes(2048).toString('hex')
    randomHexAt = 0
  }
  randomHexAt += 16
  return randomHex.slice(randomHexAt - 16, randomHexAt)
}

/**
 * Publishes one message: when the policy keeps history (and it is not a client event) it advances the channel's offset,
 * appends the history entry and the shard's fan-out entry in ONE Lua script, so subscribers never see an offset that
 * history lacks or a gap in offsets.
 * @example await publish({ productId, channel: 'chat:1', policy, data: JSON.stringify({ text: 'hi' }) })
 */
export async function publish(input: PublishInput, budgets: PublishBudgets = defaultBudgets()): Promise<PublishResult> {
  const call = publishCall(input)
  return publishResult(await publishScript(budgets).run(call.keys, call.args), call.id, budgets)
}

/** One publish as publish.lua's publish_one takes it (for scripts that call it after checks of their own: ./publish-request.ts). */
export interface PublishCall {
  id: string
  /** The channel's shard: every key below is in its slot. */
  shard: number
  keys: readonly string[]
  args: (string | number)[]
}

/** Where each of publish_one's values is in publishCall's `args`. */
export const PUBLISH_ARG = { size: 0, ttl: 1, epoch: 2, product: 3, channel: 4, id: 5, field: 6, payload: 7, sender: 8 } as const

/** The KEYS and ARGV of publish.lua for `input` (its budgets are the script's: publishingScript). */
export function publishCall(input: PublishInput): PublishCall {
  if ((input.data === undefined) === (input.ref === undefined)) throw badRequest('A publish carries exactly one of data or ref')
  const id = input.id ?? randomUUID()
  const stored = input.senderConnectionId === undefined && keepsHistory(input.policy)
  const { shard, keys } = publishKeys(input.productId, input.channel)
  const [field, payload] = input.data !== undefined ? ['d', input.data] : ['r', JSON.stringify(input.ref)]
  return {
    id,
    shard,
    keys,
    args: [
      stored ? input.policy.historySize : 0,
      stored ? input.policy.historyTtlSeconds * 1000 : 0,
      epochCandidate(),
      input.productId,
      input.channel,
      id,
      field,
      payload,
      input.senderConnectionId ?? '',
    ],
  }
}

/** publish.lua's reply as a result; throws its refusals (429 over a byte budget). */
export function publishResult(reply: PublishReply, id: string, budgets: PublishBudgets): PublishResult {
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
  return new ApiError('history_budget_exceeded',
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
  const [epoch, top, recovered, rows, truncated] = await historyScript.run(
    [keys.hist, keys.meta],
    [mode, value, policy.historyTtlSeconds * 1000, cursorEpoch, maxReplyBytes, HISTORY_ENTRY_FRAMING_BYTES + channel.length, policy.historySize],
  )
  const entries = rows.map((row) => toEntry(row, String(epoch)))
  if (mode !== 'c') entries.reverse()
  return { entries, offset: Number(top), epoch: String(epoch), recovered: recovered === 1, ...(truncated === 1 ? { truncated: true } : {}) }
}

/**
 * Where a new subscription of a history channel starts: its top offset and epoch. A channel without an epoch yet gets
 * one here, at offset 0, living as long as the retention window (each publish keeps it a window, up to an eighth more, past itself). So the cursor a
 * subscriber keeps is a real one: the first publications of the epoch are recovered after a reconnect, and an epoch
 * that expires before its first publish gives `recovered: false`, never a silent gap. The new epoch's meta hash costs
 * the product's history budget what a channel costs (channel_cost, historyChannelBytes); when that does not fit, nothing is created
 * and the answer is `{offset: 0, epoch: ''}` (a cursor to it recovers nothing once the channel has an epoch: resync).
 */
export async function subscriptionPosition(
  productId: string, channel: string, policy: HistoryPolicy, historyMaxBytes = config.realtime.productHistoryMaxBytes,
): Promise<{ offset: number; epoch: string }> {
  const keys = channelKeys(productId, channel)
  const [epoch, offset] = await positionScript.run(
    [keys.hist, keys.meta, keys.histBytes, keys.histExpiry],
    [epochCandidate(), policy.historyTtlSeconds * 1000, channel, historyMaxBytes],
  )
  return { offset: Number(offset), epoch: String(epoch) }
}

/** The channel's top offset and epoch, or null when it has no history stream (never published, or expired). */
export async function channelTop(productId: string, channel: string): Promise<{ offset: number; epoch: string } | null> {
  const keys = channelKeys(productId, channel)
  const [epoch, offset] = await orUnavailable('realtime history', () => redis().hmget(keys.meta, 'e', 'o'))
  if (!epoch) return null
  return { offset: Number(offset ?? 0), epoch }
}
