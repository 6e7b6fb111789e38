// The Idempotency-Key header of the public routes that take one (POST /emails, POST /realtime/messages and
// /realtime/broadcasts): its one rule (1 to 256 characters) and the fingerprint a repeat is compared by.
import { createHash } from 'node:crypto'
import { ApiError } from '../errors'

export const IDEMPOTENCY_KEY_MAX_CHARS = 256

/** A key given elsewhere than the header (the platform API's body field): 400 invalid_idempotency_key outside 1..256 characters. */
export function checkIdempotencyKey(key: string, path = '/headers/idempotency-key'): string {
  if (key.length < 1 || key.length > IDEMPOTENCY_KEY_MAX_CHARS) {
    throw new ApiError('invalid_idempotency_key', `Idempotency-Key must be 1 to ${IDEMPOTENCY_KEY_MAX_CHARS} characters`, {
      fields: [{ path, message: `must be 1 to ${IDEMPOTENCY_KEY_MAX_CHARS} characters` }],
    })
  }
  return key
}

/** The header's value, or null without one; 400 invalid_idempotency_key outside 1..256 characters. */
export function idempotencyKeyOf(request: Request): string | null {
  const key = request.headers.get('idempotency-key')
  return key === null ? null : checkIdempotencyKey(key)
}

/** JSON with object keys sorted, so the same payload hashes the same whatever its key order. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`
  if (value !== null && typeof value === 'object') {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`).join(',')}}`
  }
  return JSON.stringify(value) ?? 'null'
}

/** SHA-256 of the payload's canonical JSON: two requests with the same payload, in any key order, have the same. */
export const payloadHash = (body: unknown) => createHash('sha256').update(canonical(body)).digest()
