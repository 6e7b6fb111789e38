// Every error code the platform answers with, its HTTP status and whether it is temporary: one table, as Centrifuge's
// errors.go. ApiError takes its status from here; the OpenAPI Error schema, the MCP tool errors, the gateway's error
// frames and docs/errors.md (checked by test/unit/error-catalog.test.ts) read it too.

interface ErrorEntry {
  /** The HTTP status of a response with this code. */
  status: number
  /** A second status one call site may choose instead (the Mail sending key's 403). */
  alsoStatus?: number
  /** The same request, unchanged, may succeed later: retry after Retry-After, or with backoff. */
  temporary: boolean
  /** When the code is answered, in one line (docs/errors.md, the OpenAPI description). */
  description: string
}

export const ERRORS = {
  validation_failed: { status: 400, temporary: false, description: 'A path, query, header or body field is invalid; `fields` names each one as a JSON pointer' },
  invalid_json: { status: 400, temporary: false, description: 'The body is not valid UTF-8 or JSON, or nests too deeply' },
  invalid_body: { status: 400, temporary: false, description: 'A gzip body that is not valid gzip data' },
  invalid_host: { status: 400, temporary: false, description: 'The Host header is not a valid host name' },
  invalid_idempotency_key: { status: 400, temporary: false, description: 'Mail: the Idempotency-Key header is not 1 to 256 characters' },
  invalid: { status: 400, temporary: false, description: 'Realtime: presence info above its size limit (the gateway answers it as an `invalid` frame)' },
  unauthorized: { status: 401, temporary: false, description: 'Platform API: the bearer token is missing, malformed, expired or revoked' },
  invalid_credentials: { status: 401, temporary: false, description: 'Login: the email or password is incorrect' },
  invalid_api_key: { status: 401, temporary: false, description: 'Realtime and capture public routes: the product API key or capture key is missing, malformed, unknown or revoked' },
  restricted_api_key: { status: 401, alsoStatus: 403, temporary: false, description: 'Mail public routes: the sending key is missing, sent the wrong way, or restricted (403 when a domain-restricted key lists emails)' },
  forbidden: { status: 403, temporary: false, description: 'The credential may not do this (a platform key on a session-only operation, a member not an owner)' },
  insufficient_scope: { status: 403, temporary: false, description: "Realtime public routes: the API key's scope does not include the operation" },
  origin_not_allowed: { status: 403, temporary: false, description: 'A browser origin the public routes do not serve' },
  presence_disabled: { status: 403, temporary: false, description: 'Realtime: presence is not enabled for the namespace' },
  domain_not_verified: { status: 403, temporary: false, description: 'Mail: the sending domain is not registered or not verified' },
  not_found: { status: 404, temporary: false, description: 'No such route or resource, or one the credential may not see' },
  namespace_not_registered: { status: 404, temporary: false, description: 'Realtime: the channel names a namespace not registered for the product' },
  conflict: { status: 409, temporary: false, description: 'The request conflicts with what exists (an email, name or slug already taken; the last owner)' },
  limit_reached: { status: 409, temporary: false, description: 'The product or organization holds its ceiling of this kind; delete one to make room' },
  insight_in_use: { status: 409, temporary: false, description: 'Analytics: the insight is on a dashboard; remove its tiles first' },
  invalid_idempotent_request: { status: 409, temporary: false, description: 'Mail: the Idempotency-Key was already used with a different payload' },
  concurrent_idempotent_requests: { status: 409, temporary: true, description: 'Mail: a request with the same Idempotency-Key is still in progress' },
  payload_too_large: { status: 413, temporary: false, description: 'The body, or its decompressed form, is over the limit; `limit` gives it' },
  unsupported_encoding: { status: 415, temporary: false, description: 'A Content-Encoding the route does not accept' },
  unprocessable: { status: 422, temporary: false, description: 'Valid in shape, but it names something the product lacks or cannot be carried out; `fields` says where' },
  query_timeout: { status: 422, temporary: false, description: 'Analytics: the query ran past its statement timeout; narrow it' },
  upgrade_required: { status: 426, temporary: false, description: 'Gateway: only WebSocket upgrades are served' },
  rate_limited: { status: 429, temporary: true, description: 'A rate limit of the credential, organization, product or address is crossed' },
  rate_limit_exceeded: { status: 429, temporary: true, description: "Mail: more emails a second than the product's send rate" },
  quota_exceeded: { status: 429, temporary: true, description: "Realtime: the product's publish quota for the window is spent" },
  too_many_queries: { status: 429, temporary: true, description: 'Analytics: the product, organization or worker already runs its most queries' },
  fanout_budget_exceeded: { status: 429, temporary: true, description: "Realtime: the product's fan-out bytes on the channel's shard are over budget" },
  history_budget_exceeded: { status: 429, temporary: true, description: "Realtime: the product's history bytes on the channel's shard are over budget" },
  presence_full: { status: 429, temporary: true, description: "Realtime: the channel's presence roster is full (the gateway answers it as a `rate_limited` frame)" },
  client_closed_request: { status: 499, temporary: false, description: 'The client went away before its body arrived (logged only: nobody reads it)' },
  internal: { status: 500, temporary: false, description: 'An unexpected failure, logged; the body has no details' },
  unavailable: { status: 503, temporary: true, description: 'A backing service (PostgreSQL, Redis) cannot serve now' },
  payload_storage_not_provisioned: { status: 503, temporary: false, description: 'Realtime: data above the inline cap needs payload storage provisioned first' },
} as const satisfies Record<string, ErrorEntry>

/** A code of the catalog: any other string is a compile error where an error is raised. */
export type ErrorCode = keyof typeof ERRORS

/** The statuses a code may be answered with: its own, and its `alsoStatus` if it has one. */
export type StatusOf<C extends ErrorCode> =
  (typeof ERRORS)[C]['status'] | ((typeof ERRORS)[C] extends { alsoStatus: infer S extends number } ? S : never)

/** Every code, in the table's order. */
export const ERROR_CODES = Object.keys(ERRORS) as ErrorCode[]

export const isTemporary = (code: ErrorCode): boolean => ERRORS[code].temporary
