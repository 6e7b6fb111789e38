// The platform's one error type and one error body: {"error": code, "message": text, ...extra}.
// Every process maps thrown errors through toErrorResponse(), so no route invents its own shape.
import { ERRORS, type ErrorCode, type StatusOf } from './error-catalog'
import { describeError, log } from './log'
import { isPgError, SQLSTATE } from './db/error-codes'

/** One failing input field: `path` is a JSON pointer into the request part (e.g. "/body/tiles/0/layout/w"). */
export interface FieldError {
  path: string
  message: string
}

export interface ErrorBody {
  error: ErrorCode
  message: string
  fields?: FieldError[]
  [extra: string]: unknown
}

/**
 * A failure the caller can see: a code of the catalog (shared/error-catalog.ts), which gives its HTTP status, a human
 * message, optional extra members of the body, and the response headers it needs (e.g. Retry-After).
 * @example new ApiError('invalid_credentials', 'Email or password is incorrect')
 */
export class ApiError<C extends ErrorCode = ErrorCode> extends Error {
  readonly status: number

  /** `status` only for a code with a second one in the catalog (`alsoStatus`); otherwise the catalog's. */
  constructor(
    readonly code: C,
    message: string,
    readonly extra: Record<string, unknown> = {},
    /** Response headers the failure needs (e.g. Retry-After). */
    readonly headers: Record<string, string> = {},
    status: StatusOf<C> = ERRORS[code].status,
  ) {
    super(message)
    this.status = status
  }

  body(): ErrorBody {
    return { error: this.code, message: this.message, ...this.extra }
  }
}

export const badRequest = (message: string, fields?: FieldError[]) =>
  new ApiError('validation_failed', message, fields ? { fields } : {})
export const unauthorized = (message = 'A valid bearer token is required') => new ApiError('unauthorized', message)
export const forbidden = (message: string) => new ApiError('forbidden', message)
export const notFound = (what = 'Resource') => new ApiError('not_found', `${what} not found`)
/** 404 for a route no handler serves. */
export const noRoute = (method: string, path: string) => new ApiError('not_found', `No route ${method} ${path}`)
export const conflict = (message: string, fields?: FieldError[]) =>
  new ApiError('conflict', message, fields ? { fields } : {})
export const payloadTooLarge = (limit: number) =>
  new ApiError('payload_too_large', `Request body exceeds ${limit} bytes`, { limit })
export const unprocessable = (message: string, fields?: FieldError[]) =>
  new ApiError('unprocessable', message, fields ? { fields } : {})
/** 503 for a backing service that cannot serve now; Retry-After in whole seconds (every 503 carries one). */
export const unavailable = (message: string, retryAfter = 1) =>
  new ApiError('unavailable', message, {}, { 'retry-after': String(retryAfter) })
/** 500 for anything unexpected: the body says nothing of what failed (the log does). */
export const internalError = () => new ApiError('internal', 'Internal error')

/** Turn anything thrown into the platform's JSON error response; unknown failures become a logged 500. */
export function toErrorResponse(error: unknown, onUnexpected?: (error: unknown) => void): Response {
  const apiError = error instanceof ApiError ? error : internal(error, onUnexpected)
  const response = Response.json(apiError.body(), { status: apiError.status, headers: apiError.headers })
  // A 503 always says when to come back, whichever module raised it.
  if (apiError.status === 503 && !response.headers.has('retry-after')) response.headers.set('retry-after', '1')
  return response
}

function internal(error: unknown, onUnexpected?: (error: unknown) => void): ApiError {
  onUnexpected?.(error)
  if (backendUnreachable(error)) {
    return unavailable('A backing service is unavailable; retry shortly')
  }
  return internalError()
}

// Connection-level failures of PostgreSQL (postgres.js codes) or Redis (ioredis) are outages, not bugs: retry later.
// CONNECTION_DESTROYED is also what a pool with several hosts answers when none of them is the primary (during a
// promotion). The SQLSTATEs are PostgreSQL ending or refusing the connection itself: 57P01 admin shutdown (a fast stop,
// as in a switchover), 57P02 crash shutdown (another backend crashed), 57P03 cannot connect now (starting up, shutting
// down, recovering after a crash).
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN',
  'CONNECT_TIMEOUT', 'CONNECTION_CLOSED', 'CONNECTION_ENDED', 'CONNECTION_DESTROYED',
  SQLSTATE.adminShutdown, SQLSTATE.crashShutdown, SQLSTATE.cannotConnectNow,
])

/** A failure whose code says the server cannot be reached (socket or postgres.js), as opposed to a failing statement. */
export const isConnectionFailure = (error: unknown) =>
  typeof (error as { code?: unknown } | null)?.code === 'string' && UNREACHABLE_CODES.has((error as { code: string }).code)

/**
 * PostgreSQL refused a write because the server is read-only now (SQLSTATE 25006, read_only_sql_transaction): a primary
 * fenced for a switchover (default_transaction_read_only), or a URL that points at a standby. The server is up and
 * answers reads, so this is no connection failure, but the write can only succeed once the primary is back: retry later.
 */
export const isReadOnlyServer = (error: unknown) => isPgError(error, 'readOnlySqlTransaction')

// ioredis says it in words: a closed connection, a command timeout, a command refused while disconnected (shared/redis/).
const REDIS_UNREACHABLE_MESSAGES = new Set([
  'Connection is closed.', 'Command timed out', "Stream isn't writeable and enableOfflineQueue options is false",
  // ioredis' Cluster client: no node could take the command, or the cluster is not usable now.
  "Cluster isn't ready and enableOfflineQueue options is false", 'Cluster is ended.',
])
/**
 * Failures whose message carries details, matched by their start: a cluster's (the last error, the node); READONLY, a
 * write that reached a master demoted by a failover (under Sentinel the connection is then made again to the new one:
 * shared/redis/client.ts); NOREPLICAS, a master with `min-replicas-to-write` that has lost its replicas (partitioned away, or
 * about to be demoted), refusing writes it could lose. Nothing was written: try again.
 */
const REDIS_UNREACHABLE_PREFIXES = ['Too many Cluster redirections', 'CLUSTERDOWN', 'Failed to refresh slots cache', 'READONLY ', 'NOREPLICAS ']

/**
 * A failure a data-access module turns into its own 503 and logs: outages are logged once by the service's breaker
 * (shared/breaker.ts), so only anything else (a bug, a wrong key type) is logged per request, at error level.
 */
export function logUnlessOutage(what: string, error: unknown, fields: Record<string, unknown> = {}): void {
  if (backendUnreachable(error) || (error instanceof ApiError && error.status === 503)) return
  log('error', what, { ...fields, ...describeError(error) })
}

/** True for a connection-level failure of PostgreSQL or Redis (an outage), as opposed to a failing statement or command. */
export function backendUnreachable(error: unknown): boolean {
  if (!(error instanceof Error)) return false
  return isConnectionFailure(error) || error.name === 'MaxRetriesPerRequestError' || REDIS_UNREACHABLE_MESSAGES.has(error.message) ||
    REDIS_UNREACHABLE_PREFIXES.some((prefix) => error.message.startsWith(prefix))
}
