// Over-cap payloads: one S3 object per message above INLINE_CAP_BYTES, named `<productId>/<channel>/<messageId>`.
// The `minio` client talks to any S3 server; locally that is s3rver, which does not check SigV4 signatures (only MinIO or
// AWS exercise them) and has no multipart listing, so objects stay below the client's part size (64 MiB).
import type * as Minio from 'minio'
import { config } from '../config'
import { KiB } from '../units'
import { ApiError, badRequest, notFound, unavailable } from '../errors'
import { describeError, log } from '../log'
import type { PayloadRef } from './broker'

/**
 * Serialized `data` (UTF-8 bytes of its JSON) above this is stored in S3 and delivered as a `ref` (the spec's inline
 * cap). Equal to the POST /messages body limit (services/public/http/body.ts, MESSAGES_BODY_LIMIT) because the spec
 * sets both at 256 KiB, not because one follows from the other: this counts the `data` member once serialized, that
 * the request's bytes on the wire (gzip lets a body carry data above this cap), so neither is derived from the other.
 */
export const INLINE_CAP_BYTES = 256 * KiB

let client: Promise<{ client: Minio.Client; module: typeof Minio }> | undefined

/**
 * Builds the client from config.s3Url: http(s)://ACCESS:SECRET@host:port (path-style requests, config.s3Region).
 * `minio` is loaded on first use, not at start: it and what it imports are about 8 % of a public worker's start-up CPU,
 * and most workers never store a payload.
 */
function connect(): Promise<{ client: Minio.Client; module: typeof Minio }> {
  client ??= import('minio').then((module) => {
    const url = new URL(config.s3Url)
    const useSSL = url.protocol === 'https:'
    return {
      module,
      client: new module.Client({
        endPoint: url.hostname,
        port: url.port ? Number(url.port) : useSSL ? 443 : 80,
        useSSL,
        accessKey: decodeURIComponent(url.username),
        secretKey: decodeURIComponent(url.password),
        region: config.s3Region,
        pathStyle: true,
      }),
    }
  }).catch((error) => {
    client = undefined // the next use tries again
    throw error
  })
  return client
}

/** The S3 client (config.s3Url). */
export async function s3(): Promise<Minio.Client> {
  return (await connect()).client
}

/** The object key of a message's payload. */
export const payloadKey = (productId: string, channel: string, messageId: string) => `${productId}/${channel}/${messageId}`

const codeOf = (error: unknown) => (error as { code?: string } | null)?.code

/** S3 failures become 503 (storage unavailable); ApiErrors pass through. */
function storageError(what: string, error: unknown): ApiError {
  if (error instanceof ApiError) return error
  log('error', `payload storage ${what} failed`, describeError(error))
  return unavailable(`Payload storage is unavailable (${what})`)
}

/** Creates the bucket when missing. Idempotent, also when two processes race to create it. */
export async function ensureBucket(bucket: string): Promise<void> {
  let minio: typeof Minio | undefined
  try {
    const { client, module } = await connect()
    minio = module
    if (await client.bucketExists(bucket)) return
    await client.makeBucket(bucket, config.s3Region)
  } catch (error) {
    if (minio && error instanceof minio.InvalidBucketNameError) throw badRequest(`Invalid bucket name "${bucket}"`, [{ path: '/bucket', message: 'not a valid S3 bucket name' }])
    if (codeOf(error) === 'BucketAlreadyOwnedByYou' || codeOf(error) === 'BucketAlreadyExists') return
    throw storageError('bucket creation', error)
  }
}

/**
 * Stores one payload and returns the `ref` that subscribers receive instead of `data`.
 * @example const ref = await storePayload({ bucket, productId, channel, messageId, body: new TextEncoder().encode(json), contentType: 'application/json' })
 */
export async function storePayload(input: {
  bucket: string
  productId: string
  channel: string
  messageId: string
  body: Uint8Array
  contentType?: string
}): Promise<PayloadRef> {
  const key = payloadKey(input.productId, input.channel, input.messageId)
  const body = Buffer.from(input.body.buffer, input.body.byteOffset, input.body.byteLength)
  try {
    await (await s3()).putObject(input.bucket, key, body, body.byteLength, input.contentType ? { 'Content-Type': input.contentType } : {})
  } catch (error) {
    throw storageError('store', error)
  }
  return input.contentType ? { bucket_key: key, size: body.byteLength, content_type: input.contentType } : { bucket_key: key, size: body.byteLength }
}

/** The stored bytes of a payload; 404 when the object does not exist. */
export async function readPayload(bucket: string, key: string): Promise<Uint8Array> {
  try {
    const stream = await (await s3()).getObject(bucket, key)
    const chunks: Buffer[] = []
    for await (const chunk of stream) chunks.push(chunk as Buffer)
    return new Uint8Array(Buffer.concat(chunks))
  } catch (error) {
    if (codeOf(error) === 'NoSuchKey' || codeOf(error) === 'NoSuchBucket' || codeOf(error) === 'NotFound') throw notFound('Payload')
    throw storageError('read', error)
  }
}

/** A time-limited GET URL for a payload (default 1 hour), for clients that fetch a `ref` themselves. */
export async function payloadUrl(bucket: string, key: string, expirySeconds = 3600): Promise<string> {
  try {
    return await (await s3()).presignedGetObject(bucket, key, expirySeconds)
  } catch (error) {
    throw storageError('presign', error)
  }
}
