// Over-cap payload storage against a real S3 server (s3rver locally) through the minio client.
import { beforeAll, describe, expect, test } from 'bun:test'
import { randomBytes, randomUUID } from 'node:crypto'
import { ensureBucket, INLINE_CAP_BYTES, payloadKey, payloadUrl, readPayload, s3, storePayload } from '../../shared/realtime/payloads'

const BUCKET = 'rt-payloads-test'

beforeAll(async () => {
  await ensureBucket(BUCKET)
})

describe('payload storage', () => {
  test('ensureBucket creates a missing bucket and is idempotent, also when raced', async () => {
    const bucket = `rt-test-${randomUUID().slice(0, 8)}`
    expect(await (await s3()).bucketExists(bucket)).toBe(false)
    await ensureBucket(bucket)
    expect(await (await s3()).bucketExists(bucket)).toBe(true)
    await ensureBucket(bucket)
    await Promise.all([ensureBucket(bucket), ensureBucket(bucket), ensureBucket(bucket)])
    expect(await (await s3()).bucketExists(bucket)).toBe(true)
    await (await s3()).removeBucket(bucket)
  })

  test('an invalid bucket name is a 400', async () => {
    const error = await ensureBucket('Not_A_Bucket!').catch((e) => e)
    expect(error.status).toBe(400)
  })

  test('storePayload keys the object by product, channel and message id; stat and read give the same bytes', async () => {
    const productId = randomUUID()
    const channel = 'files:big-1'
    const messageId = randomUUID()
    const json = JSON.stringify({ blob: randomBytes(INLINE_CAP_BYTES).toString('base64') })
    const body = new TextEncoder().encode(json)
    expect(body.byteLength).toBeGreaterThan(INLINE_CAP_BYTES)
    const ref = await storePayload({ bucket: BUCKET, productId, channel, messageId, body, contentType: 'application/json' })
    expect(ref).toEqual({ bucket_key: `${productId}/${channel}/${messageId}`, size: body.byteLength, content_type: 'application/json' })
    expect(ref.bucket_key).toBe(payloadKey(productId, channel, messageId))

    const stat = await (await s3()).statObject(BUCKET, ref.bucket_key)
    expect(stat.size).toBe(body.byteLength)
    expect(stat.metaData['content-type']).toBe('application/json')
    const read = await readPayload(BUCKET, ref.bucket_key)
    expect(read.byteLength).toBe(body.byteLength)
    expect(Buffer.from(read).equals(Buffer.from(body))).toBe(true)
  })

  test('binary bodies (a view into a larger buffer) round-trip; no content type means none in the ref', async () => {
    const productId = randomUUID()
    const backing = randomBytes(4096)
    const body = new Uint8Array(backing.buffer, backing.byteOffset + 100, 1000)
    const ref = await storePayload({ bucket: BUCKET, productId, channel: 'bin:x', messageId: 'm1', body })
    expect(ref).toEqual({ bucket_key: `${productId}/bin:x/m1`, size: 1000 })
    expect(Buffer.from(await readPayload(BUCKET, ref.bucket_key)).equals(Buffer.from(body))).toBe(true)
  })

  test('reading a missing payload is a 404', async () => {
    const error = await readPayload(BUCKET, `${randomUUID()}/x:y/none`).catch((e) => e)
    expect(error.status).toBe(404)
  })

  test('a presigned URL serves the payload', async () => {
    const productId = randomUUID()
    const body = new TextEncoder().encode('{"hello":"world"}')
    const ref = await storePayload({ bucket: BUCKET, productId, channel: 'c:1', messageId: 'm', body, contentType: 'application/json' })
    const response = await fetch(await payloadUrl(BUCKET, ref.bucket_key, 60))
    expect(response.status).toBe(200)
    expect(await response.text()).toBe('{"hello":"world"}')
  })
})
