// Request schemas of Realtime's publish, token issue and reads (typebox, the catalog's schema source), shared by the
// public routes and the platform API's operations, and validated by validateInput() for both.
import Type from 'typebox'
import { Strict } from '../catalog/schemas'
import { LAST_N_MAX } from './broker'
import { ChannelName, OPS, OpName, Subject } from './names'
import { TOKEN_TTL_DEFAULT, TOKEN_TTL_MAX, TOKEN_TTL_MIN } from './tokens'

export const MAX_TOKEN_CHANNELS = 32

export const TokenIssueBody = Strict({
  subject: Subject,
  channels: Type.Array(
    Strict({
      name: ChannelName,
      ops: Type.Array(OpName, { minItems: 1, maxItems: OPS.length, uniqueItems: true, description: `Any of ${OPS.join(', ')}` }),
    }),
    { minItems: 1, maxItems: MAX_TOKEN_CHANNELS },
  ),
  ttlSeconds: Type.Optional(Type.Integer({ minimum: TOKEN_TTL_MIN, maximum: TOKEN_TTL_MAX, default: TOKEN_TTL_DEFAULT })),
})
export type TokenIssueBody = Type.Static<typeof TokenIssueBody>

export const PublishBody = Strict({
  channel: ChannelName,
  data: Type.Unknown({ description: 'Any JSON value (null included); required' }),
})
export type PublishBody = { channel: string; data: unknown }

/** Channels one broadcast may name (Pusher's trigger takes 100). */
export const BROADCAST_MAX_CHANNELS = 100

/** One payload to several channels (POST /messages/broadcast). */
export const BroadcastBody = Strict({
  channels: Type.Array(ChannelName, { minItems: 1, maxItems: BROADCAST_MAX_CHANNELS, uniqueItems: true, description: `Distinct channels, 1 to ${BROADCAST_MAX_CHANNELS}` }),
  data: Type.Unknown({ description: 'Any JSON value (null included), at most the inline cap serialized; required' }),
})
export type BroadcastBody = { channels: string[]; data: unknown }

export const ChannelPath = Strict({ channel: ChannelName })

/** Routes that take no query parameters refuse unknown ones, as every route refuses unknown body fields. */
export const NoQuery = Strict({})

/** Window (last_n or last_ms) or cursor (offset and epoch); which combination is allowed is checked in channel-reads.ts. */
export const HistoryQuery = Strict({
  last_n: Type.Optional(Type.Integer({ minimum: 1, maximum: LAST_N_MAX })),
  last_ms: Type.Optional(Type.Number({ exclusiveMinimum: 0 })),
  offset: Type.Optional(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER })),
  epoch: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
})
export type HistoryQuery = { last_n?: number; last_ms?: number; offset?: number; epoch?: string }
