// The SDK's request and answer types, each read from the generated OpenAPI types (schema.ts) by operation id, and the
// one result shape every call answers with: `{ data, error }`, never a throw on an HTTP error.
import type { components, operations } from './schema.js'

export type OperationId = keyof operations
type Json<T> = T extends { content: { 'application/json': infer B } } ? B : never

/** The JSON body an operation takes. */
export type RequestBody<O extends OperationId> = operations[O] extends { requestBody?: infer R } ? Json<NonNullable<R>> : never
/** The query parameters an operation takes (all optional on the public routes). */
export type QueryOf<O extends OperationId> = NonNullable<operations[O]['parameters']['query']>
/** The 200 body of an operation. */
export type Answer<O extends OperationId> = Json<operations[O]['responses'][200]>

/** A code the platform answers with (docs/errors.md). */
export type PlatformErrorCode = components['schemas']['Error']['error']
/**
 * A code the SDK answers with when no platform answer explains the failure: the request never got an answer
 * (`network_error`, `timeout`), the answer was not the platform's JSON (`invalid_response`), the client has no key for
 * the area (`missing_api_key`), or a webhook did not verify (`webhook_*`).
 */
export type SdkErrorCode =
  | 'network_error' | 'timeout' | 'invalid_response' | 'missing_api_key'
  | 'webhook_headers_missing' | 'webhook_timestamp_invalid' | 'webhook_signature_invalid'

/** A failed call, as data. */
export interface PlatformError {
  code: PlatformErrorCode | SdkErrorCode
  message: string
  /** The HTTP status, or null when no answer arrived (or for a webhook). */
  statusCode: number | null
  /** For validation failures: each bad field as a JSON pointer (`/body/channel`) with the rule it broke. */
  fields?: { path: string; message: string }[]
  /** Whether the same request may succeed later; the SDK already retried where that was safe. */
  retryable: boolean
  /** The wait the platform asked for (Retry-After), in ms. */
  retryAfterMs?: number
  /** The platform's X-Request-Id, for a support request or the logs. */
  requestId?: string
}

/** Every call's answer: exactly one of `data` and `error` is set. */
export type Result<T> = { data: T; error: null } | { data: null; error: PlatformError }
