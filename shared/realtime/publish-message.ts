// Publish from a backend (the public routes) or the platform API: to one channel (inline up to the cap, stored in S3
// and delivered as a `ref` above it), or one payload to up to 100 channels (a broadcast, inline only); counted by the
// quota, idempotent under an Idempotency-Key. docs/realtime-public-api.md, "Publish" and "Broadcast".
import { randomUUID } from 'node:crypto'
import { ApiError } from '../errors'
import { countWhileDown, type Window } from '../fixed-window'
import { payloadHash } from '../http/idempotency-key'
import { onCluster } from '../redis/cluster'
import type { PayloadRef, PublishInput, PublishResult } from './broker'
import { namespaceNotRegistered, payloadStorageNotProvisioned } from './channel-errors'
import { namespaceOf } from './names'
import { INLINE_CAP_BYTES, payloadKey, storePayload } from './payloads'
import { heldPolicies, productPolicies, type ProductPolicies } from './policies'
import {
  type ChannelOutcome, claimIdempotencyKey, type KeyedRequest, keyedRequest, publishedUnderKey, publishInOneStep,
  publishPerShard, releaseIdempotencyKey, replayedWhole, scriptNotRun,
} from './publish-request'
import { countPublishes, QUOTA_WHAT, quotaExceeded, quotaWindow } from './publish-quota'
import type { BroadcastBody, PublishBody } from './request-schemas'
import { usage } from './usage'

/**
 * The calling request's own limit, counted exactly once: by `check()`, or by the publish script itself (`take()`), as
 * the public route's IP limit does (services/public/http/rate-limit.ts). `refuse` is its 429.
 */
export interface RequestLimit {
  readonly limit: number
  /** The limiter's name in the fallback log and the worker's local counts. */
  readonly what: string
  readonly done: boolean
  check(): Promise<void>
  take(now?: number): Window
  refuse(retryAfter: number): ApiError
}

/** A request counted before the publish (the platform API's rate classes): the publish counts only the quota. */
export const COUNTED_ALREADY: RequestLimit = {
  limit: Infinity, what: 'counted already', done: true, check: async () => {},
  take: () => { throw new Error('a request counted already has no window to take') },
  refuse: () => { throw new Error('a request counted already is never refused here') },
}

export interface PublishResponse {
  /** Message id (UUID); also the last segment of `ref.bucket_key` when stored. */
  id: string
  channel: string
  /** Position in the channel's history; only when the namespace keeps history. */
  offset?: number
  epoch?: string
  /** Present when the serialized data was above the inline cap and went to payload storage. */
  ref?: PayloadRef
}

/** A published message, with whether it was published by an earlier request under the same Idempotency-Key. */
export interface Published {
  message: PublishResponse
  /** True when the key's earlier request published it: this one published nothing (answered `Idempotent-Replayed: true`). */
  replayed: boolean
}

/** One channel of a broadcast: 200 and the publication, or the status and error body a single publish would answer. */
export type BroadcastResult = ({ status: 200 } & PublishResponse) | ({ status: number; channel: string } & Record<string, unknown>)

/**
 * Publishes `data` to `channel`. Serialized size = UTF-8 bytes of JSON.stringify(data).
 * 404 unregistered namespace; 503 over the cap without payload storage; 429 past the request's own limit (`ip`: the
 * public route's IP limit, not yet counted: counted here, first; COUNTED_ALREADY for the platform API), past the
 * publish quota, or past the product's fan-out or history byte budget on the channel's shard (with Retry-After);
 * 409 invalid_idempotent_request when `idempotencyKey` named another request within IDEMPOTENCY_WINDOW_MS.
 */
export async function publishMessage(productId: string, body: PublishBody, ip: RequestLimit, idempotencyKey: string | null = null): Promise<Published> {
  const prepared = prepare(productId, [body.channel], body.data, ip, idempotencyKey, 'publish')
  const request = prepared instanceof Promise ? await prepared : prepared
  const target = request.targets[0]!
  if ('error' in target) throw target.error
  const [outcome] = request.inline && !onCluster()
    ? await inOneStep(request, ip)
    : await inSteps(request, ip)
  const result = answer(request, target, outcome!)
  if (result instanceof ApiError) throw result
  return { message: result, replayed: request.replayed }
}

/**
 * Publishes one payload to each of `body.channels` (1..100, distinct), inline only (413 above the cap: one payload
 * stored per channel would multiply the bytes). Each channel is checked as a publish to it would be (namespace, quota,
 * byte budgets) and answered on its own; the request fails whole only past its IP limit (429) or when its
 * Idempotency-Key named another request (409). On one Redis one round trip; on a cluster one per shard, in parallel.
 */
export async function broadcastMessage(productId: string, body: BroadcastBody, ip: RequestLimit, idempotencyKey: string | null = null): Promise<{ results: BroadcastResult[]; replayed: boolean }> {
  const request = await prepare(productId, body.channels, body.data, ip, idempotencyKey, 'broadcast')
  if (!request.inline) {
    throw new ApiError('payload_too_large', `Serialized data is ${request.size} bytes; a broadcast carries at most the inline cap of ${INLINE_CAP_BYTES}`,
      { limit: INLINE_CAP_BYTES, fields: [{ path: '/body/data', message: `at most ${INLINE_CAP_BYTES} bytes serialized` }] })
  }
  const valid = request.targets.filter((t): t is Target => !('error' in t))
  if (valid.length === 0) await ip.check() // nothing to publish: the request still counts
  const outcomes = valid.length === 0 ? [] : !onCluster() ? await inOneStep(request, ip, valid) : await inSteps(request, ip, valid)
  const results = request.targets.map((target): BroadcastResult => {
    if ('error' in target) return { status: target.error.status, channel: target.channel, ...target.error.body() }
    const outcome = outcomes[valid.indexOf(target)]!
    const result = answer(request, target, outcome)
    if (result instanceof ApiError) return { status: result.status, channel: target.channel, ...result.body() }
    return { status: 200, ...result, ...('replayed' in outcome && outcome.replayed ? { replayed: true } : {}) }
  })
  return { results, replayed: request.replayed }
}

interface Target {
  channel: string
  input: PublishInput
}

interface Prepared {
  productId: string
  targets: (Target | { channel: string; error: ApiError })[]
  serialized: string
  size: number
  inline: boolean
  payloadBucket: string | null
  keyed?: KeyedRequest
  /** Set once the key's claim says this request was made before. */
  replayed: boolean
}

/**
 * The request's channels, payload and key checked against the product's policies: without a promise when the worker
 * holds them (an async frame and its await per request, about 1 % of a worker's CPU per publish), read from PostgreSQL
 * otherwise (the request's IP limit counted first).
 */
function prepare(productId: string, channels: readonly string[], data: unknown, ip: RequestLimit, idempotencyKey: string | null, kind: 'publish' | 'broadcast'): Prepared | Promise<Prepared> {
  const held = heldPolicies(productId)
  if (held) return prepareWith(held, productId, channels, data, idempotencyKey, kind)
  return productPolicies(productId, () => ip.check()).then((policies) => prepareWith(policies, productId, channels, data, idempotencyKey, kind))
}

function prepareWith(policies: ProductPolicies, productId: string, channels: readonly string[], data: unknown, idempotencyKey: string | null, kind: 'publish' | 'broadcast'): Prepared {
  const serialized = JSON.stringify(data)
  const size = Buffer.byteLength(serialized, 'utf8')
  const inline = size <= INLINE_CAP_BYTES
  const targets = channels.map((channel, i) => {
    const namespace = namespaceOf(channel)
    const policy = policies.namespaces.get(namespace)
    const path = kind === 'publish' ? '/body/channel' : `/body/channels/${i}`
    if (!policy) return { channel, error: namespaceNotRegistered(namespace, path) }
    return { channel, input: { productId, channel, policy: policy.broker, id: randomUUID(), data: serialized } }
  })
  if (!inline && kind === 'publish' && policies.payloadBucket === null) throw payloadStorageNotProvisioned(size, INLINE_CAP_BYTES)
  const prepared: Prepared = { productId, targets, serialized, size, inline, payloadBucket: policies.payloadBucket, replayed: false }
  // What makes a repeat the same request: its kind, its channels in order and its data (object keys in any order).
  if (idempotencyKey !== null) prepared.keyed = keyedRequest(idempotencyKey, payloadHash({ kind, channels, data }))
  return prepared
}

const conflict = () => new ApiError('invalid_idempotent_request',
  'This Idempotency-Key was already used with a different request; use a new key for a new publish')

/**
 * One Redis, inline payload: the IP limit (unless counted already), the key's claim, the quota and every publish in
 * one script. While Redis cannot run it, the request and the publishes are counted in this worker as hitWindow counts
 * them (same limits, per worker), and the request answers its 503.
 */
async function inOneStep(request: Prepared, ip: RequestLimit, targets = request.targets as Target[]): Promise<ChannelOutcome[]> {
  const now = Date.now()
  const byIp = ip.done ? undefined : { window: ip.take(now), limit: ip.limit }
  const quota = quotaWindow(request.productId, now)
  try {
    const outcome = await publishInOneStep(targets.map((t) => t.input), { ip: byIp, quota, keyed: request.keyed })
    if ('ipRefused' in outcome) throw ip.refuse(byIp!.window.retryAfter)
    if ('conflict' in outcome) throw conflict()
    request.replayed = replayedWhole(outcome.channels)
    return outcome.channels
  } catch (error) {
    const cause = scriptNotRun(error)
    if (cause === undefined) throw error
    if (byIp && countWhileDown(ip.what, byIp.window, cause, now) > byIp.limit) throw ip.refuse(byIp.window.retryAfter)
    if (countWhileDown(QUOTA_WHAT, quota.window, cause, now, targets.length) > quota.limit) throw quotaExceeded(quota.window.retryAfter, quota.limit)
    throw error
  }
}

/**
 * A cluster (the counters and the claim are in other slots than the channels) or a payload stored in S3 first: the IP
 * limit, the key's claim and the quota (all channels in one count) each a step of their own, then the publishes, one
 * script per shard. A repeat's publish is answered from the channel's marker; a stored payload is uploaded only when
 * the channel has none.
 */
async function inSteps(request: Prepared, ip: RequestLimit, targets = request.targets as Target[]): Promise<ChannelOutcome[]> {
  await ip.check()
  const { keyed, productId } = request
  const claim = keyed ? await claimIdempotencyKey(productId, keyed) : undefined
  if (claim === 'conflict') throw conflict()
  let published = false
  try {
    // One channel whose payload goes to S3 first: a repeat that finds it published answers it, uploading and counting nothing.
    const earlier = !request.inline && claim === 'repeat' ? await publishedUnderKey(productId, targets[0]!.channel, keyed!) : null
    if (earlier) {
      published = true
      request.replayed = true
      return [{ published: earlier, replayed: true }]
    }
    const { count, limit, retryAfter } = await countPublishes(productId, targets.length)
    // The first `allowed` channels fit the quota; the rest are refused as over it.
    const allowed = Math.max(0, limit - (count - targets.length))
    const outcomes: ChannelOutcome[] = targets.map((_, i) => ({ overQuota: count - targets.length + i + 1 }))
    const going = targets.slice(0, allowed)
    if (!request.inline) {
      if (going.length === 0) throw quotaExceeded(retryAfter, limit)
      const target = going[0]!
      const ref = await storePayload({
        bucket: request.payloadBucket!, productId, channel: target.channel, messageId: target.input.id!,
        body: Buffer.from(request.serialized, 'utf8'), contentType: 'application/json',
      })
      target.input = { ...target.input, data: undefined, ref }
    }
    const done = going.length > 0 ? await publishPerShard(going.map((t) => t.input), keyed) : []
    done.forEach((outcome, i) => (outcomes[i] = outcome))
    published = outcomes.some((o) => 'published' in o)
    request.replayed = replayedWhole(outcomes)
    return outcomes
  } finally {
    if (claim === 'new' && !published) await releaseIdempotencyKey(productId, keyed!)
  }
}

/** A channel's outcome as the answer for it: the publication, or the error a single publish would throw. */
function answer(request: Prepared, target: Target, outcome: ChannelOutcome): PublishResponse | ApiError {
  if ('overQuota' in outcome) return quotaExceeded(quotaWindow(request.productId).window.retryAfter)
  if ('refused' in outcome) return outcome.refused
  const { id, offset, epoch } = outcome.published as PublishResult
  if (!outcome.replayed) usage.count(request.productId, target.channel, { publishes: 1, bytes: request.size })
  // A repeat's ref is the first publication's (a repeat racing the first may have uploaded its own copy, never published).
  const ref: PayloadRef | undefined = request.inline ? undefined : !outcome.replayed && target.input.ref ? target.input.ref
    : { bucket_key: payloadKey(request.productId, target.channel, id), size: request.size, content_type: 'application/json' }
  // Built field by field, not spread: object spreads were about 2 % of a worker's CPU per publish.
  const response: PublishResponse = { id, channel: target.channel }
  if (offset !== undefined) {
    response.offset = offset
    response.epoch = epoch
  }
  if (ref) response.ref = ref
  return response
}
