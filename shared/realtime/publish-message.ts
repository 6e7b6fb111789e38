// Publish from a backend (the public route) or the platform API: inline up to the cap, stored in S3 and delivered as a
// `ref` above it; counted by the quota.
import { randomUUID } from 'node:crypto'
import { ApiError } from '../errors'
import { countWhileDown } from '../fixed-window'
import { publish, type PayloadRef, type PublishInput, type PublishResult } from './broker'
import { publishWithinLimits, type WindowLimit } from './limited-publish'
import { onCluster } from '../redis'
import { namespaceOf } from './names'
import { usage } from './usage'
import { INLINE_CAP_BYTES, storePayload } from './payloads'
import { namespaceNotRegistered, payloadStorageNotProvisioned } from './channel-errors'
import { productPolicies } from './policies'
import { enforcePublishQuota, QUOTA_WHAT, quotaExceeded, quotaWindow } from './publish-quota'
import type { Window } from '../fixed-window'
import type { PublishBody } from './request-schemas'

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

/**
 * Publishes `data` to `channel`. Serialized size = UTF-8 bytes of JSON.stringify(data).
 * 404 unregistered namespace; 503 over the cap without payload storage; 429 past the request's own limit (`ip`: the
 * public route's IP limit, not yet counted: counted here, first; COUNTED_ALREADY for the platform API), past the publish quota, or past the product's fan-out or history byte budget on the
 * channel's shard (thrown by the publish script, with Retry-After).
 */
export async function publishMessage(productId: string, body: PublishBody, ip: RequestLimit): Promise<PublishResponse> {
  const policies = await productPolicies(productId, () => ip.check()) // counted first if they must be read from PostgreSQL
  const namespace = namespaceOf(body.channel)
  const policy = policies.namespaces.get(namespace)
  if (!policy) throw namespaceNotRegistered(namespace, '/body/channel')
  const serialized = JSON.stringify(body.data)
  const size = Buffer.byteLength(serialized, 'utf8')
  const inline = size <= INLINE_CAP_BYTES
  if (!inline && policies.payloadBucket === null) throw payloadStorageNotProvisioned(size, INLINE_CAP_BYTES)
  const id = randomUUID()
  let ref: PayloadRef | undefined
  let result: PublishResult
  if (inline && !onCluster()) {
    result = await publishCounted(ip, { productId, channel: body.channel, policy: policy.broker, id, data: serialized })
  } else {
    // Over the cap the quota is checked before the upload (a refused publish stores nothing in S3); on a cluster the
    // counters and the channel's shard are in different slots: one step each, in the same order.
    await ip.check()
    await enforcePublishQuota(productId)
    ref = inline ? undefined : await storePayload({
      bucket: policies.payloadBucket!, productId, channel: body.channel, messageId: id,
      body: Buffer.from(serialized, 'utf8'), contentType: 'application/json',
    })
    result = await publish({ productId, channel: body.channel, policy: policy.broker, id, ...(ref ? { ref } : { data: serialized }) })
  }
  usage.count(productId, body.channel, { publishes: 1, bytes: size })
  return {
    id: result.id, channel: body.channel,
    ...(result.offset !== undefined ? { offset: result.offset, epoch: result.epoch } : {}),
    ...(ref ? { ref } : {}),
  }
}

/**
 * The IP limit, the quota and the publish in one round trip (one script: the limits are conditional, so a pipeline or
 * MULTI of plain commands could not stop at the first refusal). The IP limit is left out when the request is counted
 * already (its key was looked up in PostgreSQL first). While Redis cannot run the script, the request and the publish
 * are counted in this worker as hitWindow counts them (same limits, per worker), and the publish answers its 503.
 */
async function publishCounted(ip: RequestLimit, input: PublishInput): Promise<PublishResult> {
  const now = Date.now()
  const byIp = ip.done ? undefined : { window: ip.take(now), limit: ip.limit }
  const quota = quotaWindow(input.productId, now)
  const limits = byIp ? [byIp, quota] : [quota]
  const refusal = (limit: WindowLimit) =>
    limit === byIp ? ip.refuse(limit.window.retryAfter) : quotaExceeded(limit.window.retryAfter, limit.limit)
  try {
    const outcome = await publishWithinLimits(limits, input)
    if ('published' in outcome) return outcome.published
    throw refusal(limits[outcome.refused]!)
  } catch (error) {
    // A Redis error reply means the script ran, and counted (its writes before an error stay): nothing to count here.
    const cause = error instanceof ApiError && error.status === 503 ? (error as Error).cause : undefined
    if (cause === undefined || (cause instanceof Error && cause.name === 'ReplyError')) throw error
    for (const limit of limits) {
      if (countWhileDown(limit === byIp ? ip.what : QUOTA_WHAT, limit.window, cause, now) > limit.limit) throw refusal(limit)
    }
    throw error
  }
}
