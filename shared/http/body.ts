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

/** Deepest nesting of arrays and objects accepted in a request body. */
export const MAX_JSON_DEPTH = 64

/**
 * Refuses JSON nested deeper than MAX_JSON_DEPTH before it is parsed: parsing, validating and serializing deeply nested
 * values recurse, and a small body of brackets would otherwise exhaust the stack (a 500 anyone could trigger).
 */
function checkDepth(text: string): void {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 92 /* \\ */) i++
      else if (c === 34 /* " */) inString = false
    } else if (c === 34) inString = true
    else if (c === 91 /* [ */ || c === 123 /* { */) {
      if (++depth > MAX_JSON_DEPTH) throw new ApiError(400, 'invalid_json', `Request body is nested deeper than ${MAX_JSON_DEPTH} levels`)
    } else if (c === 93 /* ] */ || c === 125 /* } */) depth--
  }
}

/** An empty body is `undefined`; anything else must be valid UTF-8 JSON, nested at most MAX_JSON_DEPTH deep. */
export function parseJson(bytes: Uint8Array): unknown {
  if (bytes.byteLength === 0) return undefined
  let text: string
  try {
    text = utf8.decode(bytes)
  } catch {
    throw new ApiError(400, 'invalid_json', 'Request body is not valid UTF-8')
  }
  checkDepth(text)
  try {
    return JSON.parse(text)
  } catch (error) {
    throw new ApiError(400, 'invalid_json', `Request body is not valid JSON: ${(error as Error).message}`)
  }
}

export async function readJson(request: Request, limit: number): Promise<unknown> {
  return parseJson(await readBytes(request, limit))
}
