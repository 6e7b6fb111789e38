// One publish request (to one channel, or a broadcast to several) on Redis, with its limits and its Idempotency-Key.
// On one Redis, one script (./lua/publish-request.lua) counts the request's IP limit, claims the key, and per channel
// checks the key's marker, counts the quota and publishes: one round trip, atomic; a request to one channel without a
// key runs the same steps in the turn's batch (./publish-batch.ts). On a Redis Cluster the counters and
// the claim live in other slots than the channels: the caller counts and claims first (claimIdempotencyKey), then
// publishPerShard runs one script per shard, in parallel, for that shard's channels. Either way a key's marker is
// written by the publish itself, in the channel's slot: two workers running the same request publish once.
// docs/realtime-data-plane.md, "Publish requests".
import { createHash } from 'node:crypto'
import { ApiError } from '../errors'
import type { Window } from '../fixed-window'
import { orUnavailable } from '../redis-script'
import { redis } from '../redis/client'
import { defaultBudgets, IDEMPOTENCY_WINDOW_MS, PUBLISH_ARG, publishCall, type PublishCall, publishingScript, publishResult, type PublishBudgets, type PublishInput, type PublishResult } from './broker'
import { idempotencyClaimKey, idempotencyMarkerKey } from './keys'
import { publishBatched } from './publish-batch'
import FIXED_WINDOW_LUA from '../fixed-window.lua' with { type: 'text' }
import PUBLISH_REQUEST_LUA from './lua/publish-request.lua' with { type: 'text' }

export { IDEMPOTENCY_WINDOW_MS }

/** A counter the request is counted in: its window (shared/fixed-window.ts) and the most hits it allows. */
export interface WindowLimit {
  window: Window
  limit: number
}

/** The request's Idempotency-Key as Redis keeps it: the key's SHA-256 and the request's fingerprint. */
export interface KeyedRequest {
  keyHash: string
  fingerprint: string
}

/**
 * Why Redis did not run a request's script (down, or no answer in time), or undefined when it ran: an answer, or an
 * error reply (its writes before the error stay). When it did not, the counters it would have counted are unknown and
 * the caller counts them in the worker (countWhileDown), as hitWindow does.
 */
export function scriptNotRun(error: unknown): unknown {
  const cause = error instanceof ApiError && error.status === 503 ? (error as Error).cause : undefined
  return cause instanceof Error && cause.name === 'ReplyError' ? undefined : cause
}

/** A key and the request it names: what makes two requests the same (sha256 hex of each). */
export function keyedRequest(key: string, fingerprint: Buffer): KeyedRequest {
  return { keyHash: createHash('sha256').update(key).digest('hex'), fingerprint: fingerprint.toString('hex') }
}

/** What happened on one channel. */
export type ChannelOutcome =
  | { published: PublishResult; replayed: boolean }
  | { overQuota: number }
  | { refused: ApiError }

export type RequestOutcome =
  | { ipRefused: number }
  | { conflict: true }
  | { channels: ChannelOutcome[] }

/** Whether a request published nothing of its own: every channel it published was published before under its key. */
export const replayedWhole = (outcomes: readonly ChannelOutcome[]) => {
  const published = outcomes.filter((o): o is Extract<ChannelOutcome, { published: PublishResult }> => 'published' in o)
  return published.length > 0 && published.every((o) => o.replayed)
}

/**
 * One channel's three values in the script's flat reply (null where there is none): published (offset and epoch, the
 * id the caller gave), published before under the key (its marker), refused by a byte budget, past the quota.
 */
type ChannelReply = [1, number | null, string | null] | [2, string, null] | [-1, string, number] | [-5, number, null]
type Reply = [-2, number] | [-3] | (ChannelReply[number])[]

/** The flat reply's channels, three values each. */
function channelReplies(reply: Reply): ChannelReply[] {
  const out: ChannelReply[] = []
  for (let i = 0; i < reply.length; i += 3) out.push(reply.slice(i, i + 3) as ChannelReply)
  return out
}

/** What a marker (`fingerprint id offset epoch`, or `fingerprint id` without history) says was published. */
function markerResult(marker: string): { fingerprint: string; result: PublishResult } {
  const [fingerprint, id, offset, epoch] = marker.split(' ')
  return { fingerprint: fingerprint!, result: offset === undefined ? { id: id! } : { id: id!, offset: Number(offset), epoch: epoch! } }
}

/** The request script's parts (its body after the window counters' library): publishingParts. */
export const PUBLISH_REQUEST_PARTS = [PUBLISH_REQUEST_LUA, [FIXED_WINDOW_LUA]] as const

const requestScript = publishingScript<Reply>(...PUBLISH_REQUEST_PARTS)

const PAYLOAD_ARG = PUBLISH_ARG.payload

/**
 * The script's KEYS and ARGV for `inputs` (one slot on a cluster), with the counters and claim given, or none: the
 * claim's and the markers' keys only with an Idempotency-Key (each argument costs Redis about 1 500 instructions).
 */
function requestCall(inputs: readonly PublishInput[], calls: readonly PublishCall[], options: {
  ip?: WindowLimit | undefined; quota?: WindowLimit; keyed?: KeyedRequest | undefined
}, claim = false): [string[], (string | number)[]] {
  const spare = calls[0]!.keys[1]! // a key of the same slot, given where a run uses none (never touched)
  const { ip, quota, keyed } = options
  // The same payload for every channel (a broadcast) is sent once: its place in each channel's arguments is left ''.
  const shared = calls.length > 1 && calls.every((call) => call.args[PAYLOAD_ARG] === calls[0]!.args[PAYLOAD_ARG]) ? calls[0]!.args[PAYLOAD_ARG]! : ''
  const keys = [quota?.window.key ?? spare, ip?.window.key ?? spare]
  const args: (string | number)[] = [
    ip?.limit ?? -1, ip?.window.expireSeconds ?? 0, quota?.limit ?? -1, quota?.window.expireSeconds ?? 0,
    keyed ? `${claim ? '+' : '='}${keyed.fingerprint}` : '',
  ]
  // Pushed one by one: a spread into push, like an object spread, costs more than the loop.
  for (const call of calls) {
    for (const key of call.keys) keys.push(key)
    for (let k = 0; k < call.args.length; k++) args.push(shared !== '' && k === PAYLOAD_ARG ? '' : call.args[k]!)
  }
  if (shared !== '') args.push(shared)
  if (keyed) {
    keys.push(claim ? idempotencyClaimKey(inputs[0]!.productId, keyed.keyHash) : spare)
    for (const input of inputs) keys.push(idempotencyMarkerKey(input.productId, input.channel, keyed.keyHash))
  }
  return [keys, args]
}

/** One channel's outcome; `id`: the id its publish was given (publishCall's, made when the input had none). */
function channelOutcome(reply: ChannelReply, id: string, budgets: PublishBudgets): ChannelOutcome {
  const kind = Number(reply[0])
  if (kind === -5) return { overQuota: Number(reply[1]) }
  if (kind === -1) {
    try {
      publishResult([-1, String(reply[1]), Number(reply[2])], id, budgets)
    } catch (error) {
      return { refused: error as ApiError }
    }
  }
  if (kind === 2) return { published: markerResult(String(reply[1])).result, replayed: true }
  const [, offset, epoch] = reply as [1, number | null, string | null]
  return { published: offset === null ? { id } : { id, offset: Number(offset), epoch: String(epoch) }, replayed: false }
}

/**
 * The whole request in one script, on one Redis (not a cluster): the IP limit (when given), the key's claim (when
 * keyed), then per channel the marker, the quota and the publish. Every input has its `id` set.
 * Throws 503 when Redis cannot run it (the counters' state is then unknown: the caller counts as hitWindow would).
 */
export function publishInOneStep(inputs: readonly PublishInput[], options: {
  ip?: WindowLimit | undefined; quota: WindowLimit; keyed?: KeyedRequest | undefined
}, budgets: PublishBudgets = defaultBudgets()): Promise<RequestOutcome> {
  const calls = inputs.map((input) => publishCall(input))
  // The common request (one channel, no key) joins the turn's batch: the same steps, one run for many requests.
  if (calls.length === 1 && options.keyed === undefined) {
    return publishBatched(calls[0]!, options, budgets).then((reply): RequestOutcome => {
      if (reply[0] === -2) return { ipRefused: Number(reply[1]) }
      return { channels: [channelOutcome(reply as ChannelReply, calls[0]!.id, budgets)] }
    })
  }
  const [keys, args] = requestCall(inputs, calls, options, true)
  // The reply read in a callback, not after an await in an async frame of its own (one frame fewer per publish).
  return requestScript(budgets).run(keys, args).then((reply): RequestOutcome => {
    if (Number(reply[0]) === -2) return { ipRefused: Number(reply[1]) }
    if (Number(reply[0]) === -3) return { conflict: true }
    return { channels: channelReplies(reply).map((r, i) => channelOutcome(r, calls[i]!.id, budgets)) }
  })
}

/**
 * Publishes `inputs` with their limits counted and the key claimed already: one script per shard, in parallel (on one
 * Redis they are still grouped by shard, which changes nothing). Outcomes in the order of `inputs`.
 */
export async function publishPerShard(inputs: readonly PublishInput[], keyed?: KeyedRequest, budgets: PublishBudgets = defaultBudgets()): Promise<ChannelOutcome[]> {
  const calls = inputs.map((input) => publishCall(input))
  const byShard = new Map<number, number[]>()
  calls.forEach((call, i) => byShard.set(call.shard, [...(byShard.get(call.shard) ?? []), i]))
  const outcomes: ChannelOutcome[] = new Array(inputs.length)
  const groups = [...byShard.values()]
  const replies = await requestScript(budgets).runEach(groups.map((group) => requestCall(group.map((i) => inputs[i]!), group.map((i) => calls[i]!), { keyed })))
  groups.forEach((group, g) => {
    const channels = channelReplies(replies[g]!)
    group.forEach((i, k) => (outcomes[i] = channelOutcome(channels[k]!, calls[i]!.id, budgets)))
  })
  return outcomes
}

/**
 * Claims the key for this request, as a step of its own (a cluster, or a payload stored in S3 first): 'new' when this
 * request is the first to use it (then `releaseIdempotencyKey` if it publishes nothing), 'repeat' when the same
 * request used it before, 'conflict' when another did.
 */
export async function claimIdempotencyKey(productId: string, keyed: KeyedRequest): Promise<'new' | 'repeat' | 'conflict'> {
  const key = idempotencyClaimKey(productId, keyed.keyHash)
  // SET NX GET: sets it only when absent, and answers what was there (nil when it set it).
  const before = await orUnavailable('realtime publish', () => redis().call('SET', key, keyed.fingerprint, 'PX', String(IDEMPOTENCY_WINDOW_MS), 'NX', 'GET') as Promise<string | null>)
  if (before === null) return 'new'
  return before === keyed.fingerprint ? 'repeat' : 'conflict'
}

/** Takes back a claim this request made and published nothing under (so the key can name another request). */
export async function releaseIdempotencyKey(productId: string, keyed: KeyedRequest): Promise<void> {
  await redis().del(idempotencyClaimKey(productId, keyed.keyHash)).catch(() => 0)
}

/** What this request published on one channel before under its key, or null: for a repeat that would otherwise store its payload first. */
export async function publishedUnderKey(productId: string, channel: string, keyed: KeyedRequest): Promise<PublishResult | null> {
  const marker = await orUnavailable('realtime publish', () => redis().get(idempotencyMarkerKey(productId, channel, keyed.keyHash)))
  if (marker === null) return null
  const { fingerprint, result } = markerResult(marker)
  if (fingerprint !== keyed.fingerprint) return null // another request's, left after its claim expired
  return result
}
