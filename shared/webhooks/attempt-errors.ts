// The words a failed connection is recorded in: a fixed list, never the runtime's own message. That message names the
// address and port connected to and what answered there (`connect ECONNREFUSED 10.1.2.3:5432`, `WRONG_VERSION_NUMBER`,
// `Expected HTTP/`), and an attempt's error is shown to the tenant: with it, a tenant could map what listens where
// from the platform's egress addresses. The raw error goes to the platform's logs only (OutboundResult.cause).

/** Every way a connection can fail, as an attempt records it (docs/webhooks.md, "Deliveries as the product sees them"). */
export const CONNECTION_FAILURES = {
  refused: 'connection refused',
  closed: 'connection closed before an answer',
  timedOut: 'connection timed out',
  unreachable: 'address unreachable',
  tls: 'TLS failed',
  tlsName: 'TLS failed: certificate not valid for the host',
  tlsTrust: 'TLS failed: certificate not trusted',
  notHttp: 'not an HTTP answer',
  other: 'connection failed',
} as const

export type ConnectionFailure = (typeof CONNECTION_FAILURES)[keyof typeof CONNECTION_FAILURES]

const BY_CODE: Record<string, ConnectionFailure> = {
  ECONNREFUSED: CONNECTION_FAILURES.refused,
  ECONNRESET: CONNECTION_FAILURES.closed,
  ECONNABORTED: CONNECTION_FAILURES.closed,
  EPIPE: CONNECTION_FAILURES.closed,
  ERR_SOCKET_CLOSED: CONNECTION_FAILURES.closed,
  ETIMEDOUT: CONNECTION_FAILURES.timedOut,
  EHOSTUNREACH: CONNECTION_FAILURES.unreachable,
  EHOSTDOWN: CONNECTION_FAILURES.unreachable,
  ENETUNREACH: CONNECTION_FAILURES.unreachable,
  ENETDOWN: CONNECTION_FAILURES.unreachable,
  EADDRNOTAVAIL: CONNECTION_FAILURES.unreachable,
  EPROTO: CONNECTION_FAILURES.tls,
  ERR_TLS_CERT_ALTNAME_INVALID: CONNECTION_FAILURES.tlsName,
}

// OpenSSL's verification results, as node and Bun name them in `code`.
const CERTIFICATE_CODE = /CERT|SELF_SIGNED|UNABLE_TO_(GET|VERIFY|DECRYPT|DECODE)|PATH_LENGTH|CHAIN/

/**
 * A connection's failure in the fixed words, read from the error's `code` alone.
 * @example connectionFailure(Object.assign(new Error('connect ECONNREFUSED 10.1.2.3:5432'), { code: 'ECONNREFUSED' })) // 'connection refused'
 */
export function connectionFailure(error: unknown): ConnectionFailure {
  const code = typeof (error as { code?: unknown })?.code === 'string' ? (error as { code: string }).code : ''
  if (BY_CODE[code]) return BY_CODE[code]
  if (code.startsWith('HPE_')) return CONNECTION_FAILURES.notHttp
  if (CERTIFICATE_CODE.test(code)) return CONNECTION_FAILURES.tlsTrust
  if (code.startsWith('ERR_SSL_') || code.startsWith('ERR_TLS_')) return CONNECTION_FAILURES.tls
  return CONNECTION_FAILURES.other
}

/** The raw error, for the platform's logs only: its code and the runtime's message (addresses included). */
export function rawCause(error: unknown): string {
  const code = (error as { code?: unknown })?.code
  const message = error instanceof Error ? error.message : String(error)
  return typeof code === 'string' ? `${code}: ${message}` : message
}
