// The gateway's close codes and what a client does after each, as data: the gateway closes with them, the reference
// client (shared/realtime-client/client.ts) derives its reconnect delay from them, docs/errors.md lists them (a unit
// test checks it). One frozen table, as Centrifuge's disconnect.go. No imports: the reference client stays
// dependency-free.

/**
 * What a client does after a close. Reconnecting at once holds for the first attempt in a row only: when the next
 * connection is refused too (a token provider handing out refused tokens), backoff applies.
 */
export type ReconnectRule =
  /** At once, with a token fresh from its provider. */
  | 'at-once-fresh-token'
  /** At once (to another gateway, behind the load balancer). */
  | 'at-once'
  /** Full-jitter exponential backoff, resubscribing with each cursor to recover what was missed. */
  | 'backoff'
  /** The same backoff on top of `minDelayMs`: retrying soon cannot help. */
  | 'backoff-after-min-delay'

export interface CloseCode {
  /** The WebSocket close code (4000-4999: the application's; 1009 is the runtime's own, listed for what a client does). */
  code: number
  /** The close frame's reason; the gateway may append `: <detail>`. */
  reason: string
  reconnect: ReconnectRule
  /** For `backoff-after-min-delay`: the least wait, in ms, before the backoff's own. */
  minDelayMs?: number
  /** When the gateway closes with it, in one line (docs/errors.md). */
  description: string
}

export const DISCONNECTS = {
  invalidToken: {
    code: 4001, reason: 'invalid token', reconnect: 'at-once-fresh-token',
    description: 'No valid token: none presented in time, malformed, wrong signature, expired, or its API key was revoked',
  },
  draining: { code: 4100, reason: 'draining', reconnect: 'at-once', description: 'The gateway is draining (shutdown or redeploy)' },
  slowConsumer: {
    code: 4200, reason: 'slow consumer', reconnect: 'backoff',
    description: "The connection's outgoing buffer overflowed: messages were dropped",
  },
  limited: {
    code: 4300, reason: 'rate limited', reconnect: 'backoff-after-min-delay', minDelayMs: 5000,
    description: "A limit was crossed: too many connect frames from the client's address, or too many connections of its subject",
  },
  // Sent by the runtime (Bun), not by the gateway's code: a frame above the hard limit (gateway/server.ts,
  // maxPayloadLength 1 MiB) is never read. The client sent it, so reconnecting soon would only repeat it: backoff.
  tooBig: {
    code: 1009, reason: 'Received too big message', reconnect: 'backoff',
    description: 'A frame above 1 MiB (1 048 576 bytes): the runtime closes before the gateway reads it (frames above 64 KiB and up to 1 MiB are answered `invalid`)',
  },
} as const satisfies Record<string, CloseCode>

export type Disconnect = (typeof DISCONNECTS)[keyof typeof DISCONNECTS]

const BY_CODE = new Map<number, CloseCode>(Object.values(DISCONNECTS).map((entry) => [entry.code, entry]))

/** The entry of a gateway close code; undefined for any other close (1000-range codes, a dropped network). */
export const closeCodeOf = (code: number): CloseCode | undefined => BY_CODE.get(code)
