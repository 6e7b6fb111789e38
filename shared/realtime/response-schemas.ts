// Response schemas of Realtime's channel reads, publishes and token issue (typebox), shared by the platform API's
// operations and the public routes' description (services/public/route-catalog.ts): one shape, documented once.
import Type from 'typebox'
import { Strict, Timestamp } from '../catalog/schemas'
import { OpName } from './names'

/** A history or archive entry: `data` inline, or `ref` for an over-cap publish. */
export const ArchiveEntrySchema = Strict({
  id: Type.String(), offset: Type.Integer(), epoch: Type.String(), publishedAt: Timestamp(),
  data: Type.Optional(Type.Unknown({ description: 'The published JSON; absent when the entry carries ref' })),
  ref: Type.Optional(Type.Unknown({ description: 'The payload object (bucket_key, size, content_type) of an over-cap publish' })),
})

/** A page of the archive; `next` is the cursor of the next page, null on the last. */
export const ArchivePageSchema = Strict({ channel: Type.String(), entries: Type.Array(ArchiveEntrySchema), next: Type.Union([Type.String(), Type.Null()]) })

/** The fields of a publication, to spread into a response object (typebox schemas themselves cannot be spread). */
export const publicationFields = () => ({
  id: Type.String(), channel: Type.String(),
  offset: Type.Optional(Type.Integer()), epoch: Type.Optional(Type.String()),
  ref: Type.Optional(Type.Unknown({ description: 'The payload object (bucket_key, size, content_type) of an over-cap publish' })),
})

/** One channel's outcome of a broadcast. */
export const BroadcastResultSchema = Type.Object({
  status: Type.Integer({ description: '200 published; otherwise the status a publish to this channel alone would answer' }),
  channel: Type.String(),
  id: Type.Optional(Type.String()), offset: Type.Optional(Type.Integer()), epoch: Type.Optional(Type.String()),
  error: Type.Optional(Type.String({ description: 'The error code when status is not 200' })),
  message: Type.Optional(Type.String()),
  replayed: Type.Optional(Type.Literal(true, { description: 'Published by an earlier request under the same Idempotency-Key: nothing was published now' })),
}, { additionalProperties: true })
export const BroadcastResults = () => Type.Array(BroadcastResultSchema, { description: 'One per channel, in the order given' })

export const ChannelStatusSchema = Strict({
  channel: Type.String(), namespace: Type.String(),
  presence: Type.Union([Strict({ members: Type.Integer(), connections: Type.Integer() }), Type.Null()]),
  history: Type.Union([Strict({ offset: Type.Integer(), epoch: Type.String() }), Type.Null()]),
})

export const HistoryResultSchema = Strict({
  channel: Type.String(), entries: Type.Array(ArchiveEntrySchema, { description: 'Ascending by offset' }),
  offset: Type.Integer({ description: "The channel's top offset; 0 if it has none" }),
  epoch: Type.String({ description: "The channel's current epoch; '' if it has no history stream" }),
  recovered: Type.Boolean({ description: 'False only when a cursor cannot be resumed: resync from a window' }),
  truncated: Type.Optional(Type.Literal(true, { description: 'A window read stopped at the reply budget: the newest that fit' })),
})

export const PresenceSchema = Strict({
  channel: Type.String(),
  members: Type.Array(Strict({ identity: Type.String(), connections: Type.Integer(), info: Type.Unknown() })),
})

export const TokenChannelSchema = Strict({ name: Type.String(), ops: Type.Array(OpName) })
/** What was asked for but left out of a token, and why. */
export const DroppedSchema = Strict({
  name: Type.String(), ops: Type.Array(OpName),
  reason: Type.Union([Type.Literal('namespace_not_registered'), Type.Literal('not_allowed')]),
})

/** The public POST /tokens/issue's answer (shared/realtime/token-issue.ts, IssueResult). */
export const TokenIssueResultSchema = Strict({
  token: Type.String(), gatewayUrl: Type.String(), expiresAt: Timestamp(),
  subject: Type.String({ description: 'The identity the token carries (ext:<subject>), as presence rosters show it' }),
  channels: Type.Array(TokenChannelSchema, { description: 'What the token carries, after narrowing' }),
  dropped: Type.Array(DroppedSchema, { description: 'What was asked for but left out, and why' }),
})
