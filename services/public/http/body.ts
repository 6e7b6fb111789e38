// Request bodies of the public routes: byte limit on the wire, optional gzip (POST /messages) with a decompressed cap.
import { gunzipSync } from 'node:zlib'
import { ApiError } from '../../../shared/errors'
import { parseJson, readBytes } from '../../../shared/http/body'
import { KiB } from '../../../shared/units'

/** Every public route except POST /messages. */
export const BODY_LIMIT = 64 * KiB
/**
 * POST /messages, counted in bytes on the wire (compressed bytes for a gzip body): the spec's body limit. The same
 * 256 KiB as the inline cap (shared/realtime/payloads.ts, INLINE_CAP_BYTES) by the spec, not by derivation: that one
 * counts serialized `data`, this one the whole request as sent (docs/realtime-public-api.md).
 */
export const MESSAGES_BODY_LIMIT = 256 * KiB

/**
 * Reads a JSON body of at most `limit` wire bytes. With `gzip` set, `Content-Encoding: gzip` is decompressed up to
 * `maxDecompressed` bytes (413 beyond); any other encoding is 415.
 */
export async function readBody(request: Request, limit: number, options: { gzip?: { maxDecompressed: number } } = {}): Promise<unknown> {
  const encoding = (request.headers.get('content-encoding') ?? 'identity').trim().toLowerCase()
  const gzip = encoding === 'gzip' || encoding === 'x-gzip'
  if (encoding !== 'identity' && !(gzip && options.gzip)) {
    throw new ApiError('unsupported_encoding', options.gzip
      ? `Content-Encoding "${encoding}" is not supported; send identity or gzip`
      : `Content-Encoding "${encoding}" is not supported on this route; send the body uncompressed`)
  }
  const bytes = await readBytes(request, limit)
  if (!gzip || bytes.byteLength === 0) return parseJson(bytes)
  const max = options.gzip!.maxDecompressed
  let inflated: Buffer
  try {
    inflated = gunzipSync(bytes, { maxOutputLength: max })
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE' || error instanceof RangeError) {
      throw new ApiError('payload_too_large', `Decompressed request body exceeds ${max} bytes`, { limit: max })
    }
    throw new ApiError('invalid_body', 'Request body is not valid gzip data')
  }
  return parseJson(inflated)
}

/** Routes without a body still refuse one above the limit. */
export const noBody = async (request: Request) => {
  await readBytes(request, BODY_LIMIT)
  return undefined
}

/** A JSON body of at most BODY_LIMIT bytes. */
export const jsonBody = (request: Request) => readBody(request, BODY_LIMIT)
