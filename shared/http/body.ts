// Request bodies read with a byte limit (checked on the declared length and while streaming), then parsed as JSON.
import { ApiError, payloadTooLarge } from '../errors'

/** Reads at most `limit` bytes; a larger body is a 413 without buffering the rest. */
export async function readBytes(request: Request, limit: number): Promise<Uint8Array> {
  const declared = Number(request.headers.get('content-length') ?? NaN)
  if (declared > limit) throw payloadTooLarge(limit)
  if (!request.body) return new Uint8Array()
  const chunks: Uint8Array[] = []
  let total = 0
  const reader = request.body.getReader()
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    total += value.byteLength
    if (total > limit) {
      await reader.cancel().catch(() => {})
      throw payloadTooLarge(limit)
    }
    chunks.push(value)
  }
  return Buffer.concat(chunks)
}

const utf8 = new TextDecoder('utf-8', { fatal: true })

/** An empty body is `undefined`; anything else must be valid UTF-8 JSON. */
export function parseJson(bytes: Uint8Array): unknown {
  if (bytes.byteLength === 0) return undefined
  try {
    return JSON.parse(utf8.decode(bytes))
  } catch (error) {
    throw new ApiError(400, 'invalid_json', `Request body is not valid JSON: ${(error as Error).message}`)
  }
}

export async function readJson(request: Request, limit: number): Promise<unknown> {
  return parseJson(await readBytes(request, limit))
}
