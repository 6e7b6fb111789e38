// Group commit for the hottest request: the single-channel publishes without an Idempotency-Key that one process serves
// in one turn of its event loop go to Redis as one run of ./lua/publish-batch.lua, on one Redis (not a cluster). The
// run does for each request, in order, what its own run would have done (IP limit, quota, publish_one): the same
// answers, the same exactness; what the batch saves is each run's own cost (the call's dispatch, its KEYS and ARGV made,
// the clock read), which was about a tenth of a publish's Redis work (docs/performance.md, "Publishes batched").
// The batch leaves in the turn's one coalesced write (beforeTurnWrite), so no request waits longer than before: a
// process serving one request at a time sends batches of one.
import { ReplyError } from 'ioredis'
import { type RedisScript, unavailableError } from '../redis-script'
import { redis } from '../redis/client'
import { beforeTurnWrite } from '../redis/ioredis-internals'
import { PUBLISH_ARG, type PublishBudgets, type PublishCall, publishingScript } from './broker'
import type { WindowLimit } from './publish-request'
import FIXED_WINDOW_LUA from '../fixed-window.lua' with { type: 'text' }
import PUBLISH_BATCH_LUA from './lua/publish-batch.lua' with { type: 'text' }

/** One request's three values (publish-batch.lua): 1, offset, epoch; -1, budget, ms; -5 or -2, count, null. */
export type BatchedReply = [kind: number, value: number | string | null, more: number | string | null]

/** At most this many requests in one run: a run holds Redis for all of them (about 15 µs each). */
export const MAX_BATCH_REQUESTS = 64
/**
 * And at most this many payload characters (UTF-16 units, read without measuring each payload's UTF-8: at most 3 MiB
 * of bytes; a request's payload is at most the inline cap).
 */
const MAX_BATCH_PAYLOAD_CHARS = 1024 * 1024

const ARG = PUBLISH_ARG
/** The most keys, and values, one batch names (a reference is one ASCII character: places 1 to 127). */
const MAX_POOLED = 127

interface Waiter {
  resolve(reply: BatchedReply): void
  reject(error: unknown): void
}

/** A pool of distinct strings, each sent once, named by its place (1-based) in a reference character. */
class Pool {
  readonly items: string[] = []
  private readonly places = new Map<string, number>()
  place(item: string): string {
    let at = this.places.get(item)
    if (at === undefined) {
      // Never past the last place: a reference read wrong would name another request's keys. publishBatched opens a new
      // batch before a pool could fill; this holds it if that reckoning ever drifts.
      if (this.items.length >= MAX_POOLED) throw new Error(`a publish batch names at most ${MAX_POOLED} keys and ${MAX_POOLED} values`)
      this.items.push(item)
      this.places.set(item, (at = this.items.length))
    }
    return CHARS[at]!
  }
}

/** The reference character of each place, made once. */
const CHARS = Array.from({ length: MAX_POOLED + 1 }, (_, i) => String.fromCharCode(i))

interface Batch {
  script: RedisScript<(number | string | null)[]>
  keys: Pool
  values: Pool
  /** Three per request: references, message id, payload. */
  requests: string[]
  waiters: Waiter[]
  payloadChars: number
  /** The epoch any channel starting one in this batch takes (random, drawn for its first request). */
  epoch: string
  /** The last request's inputs and references (referencesOf). */
  last?: { keys: readonly string[]; args: readonly (string | number)[]; ip: WindowLimit | undefined; quota: WindowLimit | undefined; references: string }
}

/** The batch script's parts (its body after the window counters' library): publishingParts. */
export const PUBLISH_BATCH_PARTS = [PUBLISH_BATCH_LUA, [FIXED_WINDOW_LUA]] as const

const batchScript = publishingScript<(number | string | null)[]>(...PUBLISH_BATCH_PARTS)

/** This turn's batches, in the order they were opened; the open one per script (set of budgets) takes more. */
let turn: Batch[] = []
const open = new Map<RedisScript<(number | string | null)[]>, Batch>()

/**
 * Queues one request to one channel for this turn's batch; resolves to its three values. Rejects with the 503 the
 * request's own run would have got when Redis cannot run the batch (the same error for every request of it), or when a
 * command of this request failed.
 */
export function publishBatched(call: PublishCall, counters: { ip?: WindowLimit | undefined; quota?: WindowLimit | undefined }, budgets: PublishBudgets): Promise<BatchedReply> {
  const { keys, args } = call
  // The references name exactly this shape: a call of another would be read wrong.
  if (keys.length !== 7 || args.length !== 9) throw new Error(`a batched publish has 7 keys and 9 arguments, not ${keys.length} and ${args.length}`)
  const script = batchScript(budgets)
  const payload = String(args[ARG.payload])
  let batch = open.get(script)
  // At most 9 new keys and 11 new values per request: a batch that might not name them all is closed.
  if (batch === undefined || batch.waiters.length >= MAX_BATCH_REQUESTS || batch.payloadChars + payload.length > MAX_BATCH_PAYLOAD_CHARS
    || batch.keys.items.length + 9 > MAX_POOLED || batch.values.items.length + 11 > MAX_POOLED) {
    batch = { script, keys: new Pool(), values: new Pool(), requests: [], waiters: [], payloadChars: 0, epoch: String(args[ARG.epoch]) }
    open.set(script, batch)
    if (turn.length === 0) beforeTurnWrite(redis(), sendTurn)
    turn.push(batch)
  }
  const { ip, quota } = counters
  const references = referencesOf(batch, keys, args, ip, quota)
  batch.requests.push(references, String(args[ARG.id]), payload)
  batch.payloadChars += payload.length
  return new Promise<BatchedReply>((resolve, reject) => batch.waiters.push({ resolve, reject }))
}

/**
 * The request's 20 reference characters. A request like the batch's last one (the same channel, whose key names are one
 * remembered array, under the same counters and values: a hot channel's) names the same places: its references are
 * reused, not looked up again (20 lookups a request were 3 % of a worker's CPU per publish in a profile).
 */
function referencesOf(batch: Batch, keys: readonly string[], args: readonly (string | number)[], ip: WindowLimit | undefined, quota: WindowLimit | undefined): string {
  const last = batch.last
  if (last !== undefined && last.keys === keys && last.ip?.window.key === ip?.window.key && last.ip?.limit === ip?.limit
    && last.ip?.window.expireSeconds === ip?.window.expireSeconds && last.quota?.window.key === quota?.window.key
    && last.quota?.limit === quota?.limit && last.quota?.window.expireSeconds === quota?.window.expireSeconds && last.args[ARG.size] === args[ARG.size] && last.args[ARG.ttl] === args[ARG.ttl]
    && last.args[ARG.product] === args[ARG.product] && last.args[ARG.channel] === args[ARG.channel]
    && last.args[ARG.field] === args[ARG.field] && last.args[ARG.sender] === args[ARG.sender]) return last.references
  const k = batch.keys
  const v = batch.values
  const spare = keys[1]! // a key of the batch, given where a counter is not counted here (never touched)
  const references = k.place(quota?.window.key ?? spare) + k.place(ip?.window.key ?? spare)
    + k.place(keys[0]!) + k.place(keys[1]!) + k.place(keys[2]!) + k.place(keys[3]!) + k.place(keys[4]!) + k.place(keys[5]!) + k.place(keys[6]!)
    + v.place(ip ? String(ip.limit) : '-1') + v.place(ip ? String(ip.window.expireSeconds) : '0')
    + v.place(quota ? String(quota.limit) : '-1') + v.place(quota ? String(quota.window.expireSeconds) : '0')
    + v.place(String(args[ARG.size])) + v.place(String(args[ARG.ttl])) + v.place(batch.epoch)
    + v.place(String(args[ARG.product])) + v.place(String(args[ARG.channel])) + v.place(String(args[ARG.field])) + v.place(String(args[ARG.sender]))
  batch.last = { keys, args, ip, quota, references }
  return references
}

function sendTurn(): void {
  const batches = turn
  turn = []
  open.clear()
  for (const batch of batches) {
    try {
      send(batch)
    } catch (error) {
      // Never a request left waiting: one batch that cannot be sent fails its own requests, and the next go out.
      rejectAll(batch.waiters, error)
    }
  }
}

const KINDS = new Set([1, -1, -2, -5, 0])

function send(batch: Batch): void {
  const { waiters } = batch
  const args: string[] = [String(batch.values.items.length)]
  for (const value of batch.values.items) args.push(value)
  for (const part of batch.requests) args.push(part)
  batch.script.run(batch.keys.items, args).then((reply) => {
    // Three values per request, each led by a kind the script answers: anything else, and no request is told it published.
    if (!Array.isArray(reply) || reply.length !== 3 * waiters.length || !reply.every((value, i) => i % 3 !== 0 || KINDS.has(Number(value)))) {
      // It ran (what it counted stays counted: a ReplyError, so no caller counts again in the worker).
      rejectAll(waiters, new ReplyError(`publish batch: a reply of ${Array.isArray(reply) ? reply.length : typeof reply} values for ${waiters.length} requests`))
      return
    }
    for (let i = 0; i < waiters.length; i++) {
      const kind = Number(reply[3 * i])
      // A request whose command failed inside the batch: its 503, logged, as a single run's error reply would be.
      if (kind === 0) waiters[i]!.reject(unavailableError('realtime publish', new ReplyError(String(reply[3 * i + 1]))))
      else waiters[i]!.resolve([kind, reply[3 * i + 1] ?? null, reply[3 * i + 2] ?? null])
    }
  }, (error: unknown) => rejectAll(waiters, error))
}

/** Every request of a batch Redis did not run: the one 503 a single run's failure gets (logged once). */
function rejectAll(waiters: readonly Waiter[], error: unknown): void {
  const mapped = unavailableError('realtime publish', error)
  for (const waiter of waiters) waiter.reject(mapped)
}
