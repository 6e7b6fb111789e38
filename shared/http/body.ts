// Request bodies read with a byte limit (checked on the declared length and while streaming), then parsed as JSON.
import { ApiError, badRequest, payloadTooLarge } from '../errors'

/**
 * Reads at most `limit` bytes; a larger body is a 413 without buffering the rest. Not an async function itself: a body
 * of declared length is one await (readWhole's), not three nested frames (one per request on every public route).
 */
export function readBytes(request: Request, limit: number): Promise<Uint8Array> {
  const declared = Number(request.headers.get('content-length') ?? NaN)
  if (declared > limit) return Promise.reject(payloadTooLarge(limit))
  // A declared length within the limit bounds the body already (the server reads no more than it): read it whole, which
  // costs a fraction of pulling chunks through a stream reader (measured: docs/performance.md, publish benchmark). Not
  // through `request.body` either: that getter builds a ReadableStream, a cost the publish route felt.
  if (Number.isSafeInteger(declared) && declared >= 0) return declared === 0 ? Promise.resolve(new Uint8Array()) : readWhole(request)
  return readStreamed(request, limit)
}

async function readStreamed(request: Request, limit: number): Promise<Uint8Array> {
  if (!request.body) return new Uint8Array()
  const chunks: Uint8Array[] = []
  let total = 0
  const reader = request.body.getReader()
  for (;;) {
    let chunk: Awaited<ReturnType<typeof reader.read>>
    try {
      chunk = await reader.read()
    } catch {
      // The only way a request body fails to arrive is the client going away: its failure, not ours (and nobody reads
      // the answer). 499 as nginx logs it.
      throw new ApiError('client_closed_request', 'The client closed the connection before the request body arrived')
    }
    const { done, value } = chunk
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

async function readWhole(request: Request): Promise<Uint8Array> {
  try {
    return new Uint8Array(await request.arrayBuffer())
  } catch {
    throw new ApiError('client_closed_request', 'The client closed the connection before the request body arrived')
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true })

/** Deepest nesting of arrays and objects accepted in a request body. */
export const MAX_JSON_DEPTH = 64

/** Where the scanner is inside one array or object: the next index, or the raw span of the last key read. */
type Frame = { array: true; index: number } | { array: false; keyStart: number; keyEnd: number; expectKey: boolean }

const pointerOf = (text: string, stack: Frame[]) =>
  '/body' + stack.map((frame) => '/' + (frame.array
    ? String(frame.index)
    : String(JSON.parse(text.slice(frame.keyStart, frame.keyEnd + 1))).replaceAll('~', '~0').replaceAll('/', '~1'))).join('')

/**
 * One pass over the text before it is parsed, refusing what JSON.parse would accept but the platform must not:
 * - nesting deeper than MAX_JSON_DEPTH: parsing, validating and serializing recurse, and a small body of brackets would
 *   otherwise exhaust the stack (a 500 anyone could trigger);
 * - integer literals beyond ±(2^53 − 1): JSON.parse rounds them silently, so stored or relayed data would change. The
 *   400 names the field by JSON pointer.
 * Syntax errors are left to JSON.parse, which reports them.
 */
function scan(text: string): void {
  const stack: Frame[] = []
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 34 /* " */) {
      const start = i
      for (i++; i < text.length; i++) {
        const d = text.charCodeAt(i)
        if (d === 92 /* \\ */) i++
        else if (d === 34) break
      }
      const top = stack.at(-1)
      if (top && !top.array && top.expectKey) {
        top.keyStart = start
        top.keyEnd = i
        top.expectKey = false
      }
    } else if (c === 91 /* [ */ || c === 123 /* { */) {
      if (stack.length >= MAX_JSON_DEPTH) throw new ApiError('invalid_json', `Request body is nested deeper than ${MAX_JSON_DEPTH} levels`)
      stack.push(c === 91 ? { array: true, index: 0 } : { array: false, keyStart: 0, keyEnd: 0, expectKey: true })
    } else if (c === 93 /* ] */ || c === 125 /* } */) {
      stack.pop()
    } else if (c === 44 /* , */) {
      const top = stack.at(-1)
      if (top?.array) top.index++
      else if (top) top.expectKey = true
    } else if (c === 45 /* - */ || (c >= 48 && c <= 57) /* 0-9 */) {
      let end = i + 1
      let integer = true
      for (; end < text.length; end++) {
        const d = text.charCodeAt(end)
        if (d === 46 /* . */ || d === 101 /* e */ || d === 69 /* E */) integer = false
        else if (!((d >= 48 && d <= 57) || d === 43 || d === 45)) break
      }
      // More than 15 digits may not fit; only then is the exact check worth it.
      if (integer && end - i > 15 && !Number.isSafeInteger(Number(text.slice(i, end)))) {
        let path: string
        try {
          path = pointerOf(text, stack)
        } catch {
          path = '/body' // a malformed key: JSON.parse would refuse the body anyway
        }
        throw badRequest(`Invalid request: ${path} is an integer beyond ±(2^53 − 1), which cannot be kept exactly`, [
          { path, message: 'must be an integer between -(2^53 - 1) and 2^53 - 1 (send larger values as strings)' },
        ])
      }
      i = end - 1
    }
  }
}

/** An empty body is `undefined`; anything else must be valid UTF-8 JSON that scan() accepts. */
export function parseJson(bytes: Uint8Array): unknown {
  if (bytes.byteLength === 0) return undefined
  let text: string
  try {
    text = utf8.decode(bytes)
  } catch {
    throw new ApiError('invalid_json', 'Request body is not valid UTF-8')
  }
  scan(text)
  try {
    return JSON.parse(text)
  } catch (error) {
    throw new ApiError('invalid_json', `Request body is not valid JSON: ${(error as Error).message}`)
  }
}

export async function readJson(request: Request, limit: number): Promise<unknown> {
  return parseJson(await readBytes(request, limit))
}
