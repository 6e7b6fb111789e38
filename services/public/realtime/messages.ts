// Publish from a backend: inline up to the cap, stored in S3 and delivered as a `ref` above it; counted by the quota.
import { randomUUID } from 'node:crypto'
import { publish, type PayloadRef } from '../../../shared/realtime/broker'
import { namespaceOf } from '../../../shared/realtime/names'
import { usage } from '../../../shared/realtime/usage'
import { INLINE_CAP_BYTES, storePayload } from '../../../shared/realtime/payloads'
import { namespaceNotRegistered, payloadStorageNotProvisioned } from './errors'
import { productPolicies } from '../../../shared/realtime/policies'
import { enforcePublishQuota } from './quota'
import type { PublishBody } from './schemas'

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
 * 404 unregistered namespace; 503 over the cap without payload storage; 429 past the publish quota, or past the
 * product's fan-out or history byte budget on the channel's shard (thrown by the publish script, with Retry-After).
 */
export async function publishMessage(productId: string, body: PublishBody): Promise<PublishResponse> {
  const policies = await productPolicies(productId)
  const namespace = namespaceOf(body.channel)
  const policy = policies.namespaces.get(namespace)
  if (!policy) throw namespaceNotRegistered(namespace, '/body/channel')
  const serialized = JSON.stringify(body.data)
  const size = Buffer.byteLength(serialized, 'utf8')
  const inline = size <= INLINE_CAP_BYTES
  if (!inline && policies.payloadBucket === null) throw payloadStorageNotProvisioned(size, INLINE_CAP_BYTES)
  await enforcePublishQuota(productId)
  const id = randomUUID()
  const ref = inline ? undefined : await storePayload({
    bucket: policies.payloadBucket!, productId, channel: body.channel, messageId: id,
    body: Buffer.from(serialized, 'utf8'), contentType: 'application/json',
  })
  const result = await publish({ productId, channel: body.channel, policy: policy.broker, id, ...(ref ? { ref } : { data: serialized }) })
  usage.count(productId, body.channel, { publishes: 1, bytes: size })
  return {
    id: result.id, channel: body.channel,
    ...(result.offset !== undefined ? { offset: result.offset, epoch: result.epoch } : {}),
    ...(ref ? { ref } : {}),
  }
}
