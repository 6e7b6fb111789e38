// The WebSocket protocol: JSON text frames, one `type` per frame, a client-chosen `id` echoed by each reply.
// Every frame is documented in docs/realtime-protocol.md. Parsing never throws: a bad frame is an `invalid` error frame.
import Type, { type Static } from 'typebox'
import { Compile } from 'typebox/compile'
import { type ErrorCode, isTemporary } from '../shared/error-catalog'
import { type HistoryEntry, LAST_N_MAX } from '../shared/realtime/broker'
import { ChannelName } from '../shared/realtime/names'
import { PRESENCE_TTL_MAX_SECONDS } from '../shared/realtime/presence'

/** Client → gateway request types (this step of the gateway). */
export const REQUEST_TYPES = [
  'connect', 'auth', 'subscribe', 'unsubscribe', 'publish', 'history',
  'presence.enter', 'presence.update', 'presence.leave', 'presence.read', 'ping',
] as const
export type RequestType = (typeof REQUEST_TYPES)[number]

/**
 * The spec's error frame codes: each answers one request and never closes the connection. Each is a code of the error
 * catalog, whose `temporary` the frame carries.
 */
export const FRAME_ERROR_CODES = ['invalid', 'forbidden', 'unavailable', 'rate_limited'] as const satisfies readonly ErrorCode[]
export type FrameErrorCode = (typeof FRAME_ERROR_CODES)[number]

/** Largest client event, serialized (the spec's limit). */
export const CLIENT_EVENT_MAX_BYTES = 32_768

/** Largest frame the gateway reads; larger ones are answered `invalid` (docs: what happens above the hard limit). */
export const MAX_FRAME_BYTES = 65_536

const Id = Type.Union([Type.String({ maxLength: 64 }), Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER })])
const frame = <K extends RequestType, T extends Type.TProperties>(type: K, properties: T) =>
  Type.Object({ type: Type.Literal(type), id: Id, ...properties }, { additionalProperties: false })

const Token = Type.String({ minLength: 1, maxLength: 16_384 })
const Connect = frame('connect', { token: Token })
/** A newer token for the same subject, before the current one expires. */
const Auth = frame('auth', { token: Token })
const Subscribe = frame('subscribe', {
  channel: ChannelName,
  /** The client's last position, to recover what it missed: both or neither. */
  offset: Type.Optional(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER })),
  epoch: Type.Optional(Type.String({ maxLength: 64 })),
})
const Unsubscribe = frame('unsubscribe', { channel: ChannelName })
/** A client event: fanned out to the channel's other subscribers, never stored. */
const Publish = frame('publish', { channel: ChannelName, data: Type.Unknown({ description: 'any JSON value, at most 32 KiB serialized' }) })
/** A history read: a window (last_n or last_ms) or a cursor (offset and epoch). */
const History = frame('history', {
  channel: ChannelName,
  last_n: Type.Optional(Type.Integer({ minimum: 1, maximum: LAST_N_MAX })),
  last_ms: Type.Optional(Type.Number({ exclusiveMinimum: 0 })),
  offset: Type.Optional(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER })),
  epoch: Type.Optional(Type.String({ maxLength: 64 })),
})
const Ping = frame('ping', {})
const Info = Type.Unknown({ description: 'any JSON value, at most 10 240 bytes serialized' })
/** On the channel's roster as the token's subject, for `ttlSeconds` (refreshed by the gateway while connected). */
const PresenceEnter = frame('presence.enter', {
  channel: ChannelName, info: Type.Optional(Info),
  ttlSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: PRESENCE_TTL_MAX_SECONDS })),
})
const PresenceUpdate = frame('presence.update', { channel: ChannelName, info: Info })
const PresenceLeave = frame('presence.leave', { channel: ChannelName })
const PresenceRead = frame('presence.read', { channel: ChannelName })

const Request = Type.Union([Connect, Auth, Subscribe, Unsubscribe, Publish, History, PresenceEnter, PresenceUpdate, PresenceLeave, PresenceRead, Ping])
export type Request = Static<typeof Request>
const check = Compile(Request)
const byType = new Map<string, ReturnType<typeof Compile>>([
  ['connect', Compile(Connect)], ['auth', Compile(Auth)], ['subscribe', Compile(Subscribe)], ['unsubscribe', Compile(Unsubscribe)],
  ['publish', Compile(Publish)], ['history', Compile(History)], ['ping', Compile(Ping)],
  ['presence.enter', Compile(PresenceEnter)], ['presence.update', Compile(PresenceUpdate)],
  ['presence.leave', Compile(PresenceLeave)], ['presence.read', Compile(PresenceRead)],
])

export type Parsed = { ok: true; request: Request } | { ok: false; id: string | number | null; message: string }

const idOf = (value: unknown): string | number | null => {
  const id = (value as { id?: unknown } | null)?.id
  return (typeof id === 'string' && id.length <= 64) || (Number.isSafeInteger(id) && (id as number) >= 0) ? (id as string | number) : null
}

/** Reads one frame; never throws. A reply to a frame with an unusable id carries `id: null`. */
export function parseFrame(message: string | Buffer): Parsed {
  if (typeof message !== 'string') return { ok: false, id: null, message: 'frames are JSON text; binary frames are not accepted' }
  if (message.length > MAX_FRAME_BYTES) return { ok: false, id: null, message: `frame larger than ${MAX_FRAME_BYTES} bytes` }
  let value: unknown
  try {
    value = JSON.parse(message)
  } catch {
    return { ok: false, id: null, message: 'frame is not valid JSON' }
  }
  if (check.Check(value)) return { ok: true, request: value }
  const id = idOf(value)
  const type = (value as { type?: unknown } | null)?.type
  const schema = typeof type === 'string' ? byType.get(type) : undefined
  if (!schema) return { ok: false, id, message: `unknown frame type; one of ${REQUEST_TYPES.join(', ')}` }
  const first = [...schema.Errors(value)][0] as { instancePath?: string; message?: string } | undefined
  return { ok: false, id, message: `${type}: ${first?.instancePath || '/'} ${first?.message ?? 'is invalid'}`.trim() }
}

/** Server → client frames, serialized once. */
export const encode = {
  /**
   * The server ended a subscription: `resubscribe` tells the client to subscribe again at once with its cursor (the
   * gateway cannot prove it delivered everything); without it, the token no longer reaches the channel.
   */
  unsubscribed: (channel: string, reason: string, resubscribe = false) => JSON.stringify({ type: 'unsubscribe', channel, reason, resubscribe }),
  reply: (id: string | number, type: RequestType, extra: Record<string, unknown> = {}) => JSON.stringify({ type: 'reply', id, to: type, ...extra }),
  error: (id: string | number | null, code: FrameErrorCode, message: string) =>
    JSON.stringify({ type: 'error', id, code, message, temporary: isTemporary(code) }),
}

/** The parts of a message a publication frame is made of (a fan-out entry, or a history entry). */
export interface PublicationParts {
  channel: string
  id: string
  offset?: number
  epoch?: string
  /** Data or ref as JSON text (fan-out entries carry them so: they are spliced in, not parsed and serialized again). */
  d?: string
  r?: string
}

/** A publication frame, built once per message for every subscriber of this gateway. */
export function publicationFrame(parts: PublicationParts): string {
  const position = parts.offset !== undefined && parts.epoch !== undefined ? `,"offset":${parts.offset},"epoch":${JSON.stringify(parts.epoch)}` : ''
  const payload = parts.r !== undefined ? `"ref":${parts.r}` : `"data":${parts.d ?? 'null'}`
  return `{"type":"publication","channel":${JSON.stringify(parts.channel)},"id":${JSON.stringify(parts.id)}${position},${payload}}`
}

/** The same frame for a message read back from history. */
export const historyFrame = (channel: string, entry: HistoryEntry) =>
  publicationFrame({
    channel, id: entry.id, offset: entry.offset, epoch: entry.epoch,
    ...(entry.ref ? { r: JSON.stringify(entry.ref) } : { d: JSON.stringify(entry.data ?? null) }),
  })

/** A presence event (one per identity: its first connection joins, its last one leaves), built once per gateway. */
export const presenceFrame = (entry: { kind?: string; channel: string; identity?: string; info?: string }) =>
  `{"type":${JSON.stringify(entry.kind)},"channel":${JSON.stringify(entry.channel)},"identity":${JSON.stringify(entry.identity ?? '')},"info":${entry.info || 'null'}}`
