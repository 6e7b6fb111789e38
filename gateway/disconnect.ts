// Close codes the gateway uses, and what a client should do on each (the spec's table, plus the runtime's own).
// One frozen table, as Centrifuge's disconnect.go: the reference client reads `reconnect` from here.

export const DISCONNECTS = {
  /** No valid token: none presented in time, malformed, wrong signature, expired, or its API key was revoked. */
  invalidToken: { code: 4001, reason: 'invalid token', reconnect: 'now, with a fresh token' },
  /** The gateway is draining (shutdown or redeploy). */
  draining: { code: 4100, reason: 'draining', reconnect: 'now' },
  /** The connection's outgoing buffer overflowed: messages were dropped. */
  slowConsumer: { code: 4200, reason: 'slow consumer', reconnect: 'with backoff, recovering through the cursor' },
  /** A limit was crossed: too many `connect` frames from the client's address, or too many connections of its subject. */
  limited: { code: 4300, reason: 'rate limited', reconnect: 'with backoff, not before a few seconds' },
} as const

export type Disconnect = (typeof DISCONNECTS)[keyof typeof DISCONNECTS]
