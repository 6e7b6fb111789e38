// Payload storage of a product: the S3 bucket where publishes above the inline cap are stored (one row per product).
import { config } from '../../../shared/config'
import { sql } from '../../../shared/db/client'
import { ApiError, badRequest, unprocessable } from '../../../shared/errors'
import { ensureBucket } from '../../../shared/realtime/payloads'
import { publishInvalidation } from '../../../shared/cache/invalidation'

export interface PayloadStorage {
  bucket: string
  /** When the product's storage was first provisioned in this bucket. */
  createdAt: Date
}

/**
 * Creates the bucket when missing and records it for the product. Idempotent: provisioning the same bucket again
 * keeps its createdAt; naming another bucket moves the product there (objects already stored stay where they are).
 */
export async function provisionPayloadStorage(productId: string, bucket: string): Promise<PayloadStorage> {
  const allowed = allowedBuckets()
  if (!allowed.includes(bucket)) {
    throw unprocessable(`Bucket "${bucket}" is not one this platform offers for payload storage`, [
      { path: '/body/bucket', message: `must be one of: ${allowed.join(', ')}` },
    ])
  }
  try {
    await ensureBucket(bucket) // S3 failures are already a 503 there
  } catch (error) {
    // The operation's schema mirrors the S3 client's name rules; should they ever differ, name the request's field.
    if (error instanceof ApiError && error.status === 400) {
      throw badRequest(`Invalid bucket name "${bucket}"`, [{ path: '/body/bucket', message: 'is not a valid S3 bucket name' }])
    }
    throw error
  }
  const [row] = await sql`
    insert into realtime_payload_storage (product_id, bucket) values (${productId}, ${bucket})
    on conflict (product_id) do update set
      bucket = excluded.bucket,
      created_at = case when realtime_payload_storage.bucket = excluded.bucket
                        then realtime_payload_storage.created_at else now() end
    returning bucket, created_at`
  await publishInvalidation({ kind: 'payload_storage', productId })
  return { bucket: row!.bucket, createdAt: row!.created_at }
}

/** The platform's buckets a product may choose: objects are keyed by product id, so products can share one safely. */
export const allowedBuckets = () => [...new Set([config.realtime.payloadBucket, ...config.realtime.payloadBucketsAllowed])]

export async function getPayloadStorage(productId: string): Promise<PayloadStorage | null> {
  const [row] = await sql`select bucket, created_at from realtime_payload_storage where product_id = ${productId}`
  return row ? { bucket: row.bucket, createdAt: row.created_at } : null
}

/** Forgets the product's storage (idempotent); stored objects are kept, and later over-cap publishes fail 503. */
export async function deletePayloadStorage(productId: string): Promise<void> {
  const [row] = await sql`delete from realtime_payload_storage where product_id = ${productId} returning product_id`
  if (row) await publishInvalidation({ kind: 'payload_storage', productId })
}
