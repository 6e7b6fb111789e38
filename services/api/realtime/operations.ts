// Realtime area, control plane: namespaces and their policy, grants, payload storage; and a channel's archive, history,
// presence and status, a publish, and delegated tokens for the platform's own callers (the console's channel inspector).
import Type from 'typebox'
import { defineOperation, productOf } from '../../../shared/catalog/operation'
import { iso, Strict, Timestamp, Uuid } from '../../../shared/catalog/schemas'
import { HasMore, listed, pageQuery } from '../../../shared/catalog/pagination'
import { config } from '../../../shared/config'
import { ApiError } from '../../../shared/errors'
import { ArchiveQuerySchema, readArchive } from '../../../shared/realtime/archive-read'
import { CHANNEL_PATTERN, ChannelName, GrantPattern, NAMESPACE_PATTERN, NamespaceName, namespaceOf, OPS, OpName } from '../../../shared/realtime/names'
import { productPolicies } from '../../../shared/realtime/policies'
import { channelHistory, channelPresence, channelStatus } from '../../../shared/realtime/channel-reads'
import { broadcastMessage, COUNTED_ALREADY, publishMessage } from '../../../shared/realtime/publish-message'
import { BROADCAST_MAX_CHANNELS, HistoryQuery } from '../../../shared/realtime/request-schemas'
import {
  ArchivePageSchema, BroadcastResults, ChannelStatusSchema, DroppedSchema, HistoryResultSchema, PresenceSchema, publicationFields,
  TokenChannelSchema,
} from '../../../shared/realtime/response-schemas'
import { checkIdempotencyKey, IDEMPOTENCY_KEY_MAX_CHARS } from '../../../shared/http/idempotency-key'
import {
  CONNECTION_CHANNELS_SHOWN, CONNECTION_WATCH_MS,
} from '../../../shared/realtime/connection-reports'
import {
  CONSOLE_TOKEN_CHANNELS_MAX, CONSOLE_TOKEN_TTL_DEFAULT, CONSOLE_TOKEN_TTL_MAX, CONSOLE_TOKEN_TTL_MIN, issueConsoleToken,
} from './console-tokens'
import { activeChannels } from './active-channels'
import { productConnections } from './active-connections'
import { createGrant, deleteGrant, listGrants, type Grant } from './grants'
import { createNamespace, deleteNamespace, getNamespace, listNamespaces, updateNamespace, type Namespace } from './namespaces'
import { deletePayloadStorage, getPayloadStorage, provisionPayloadStorage, type PayloadStorage } from './payload-storage'

// ---- namespaces

const HistorySchema = Strict({
  ttlSeconds: Type.Integer({ minimum: 1, maximum: 2_592_000, description: 'Seconds an entry is kept (30 days at most)' }),
  size: Type.Integer({ minimum: 1, maximum: 10_000, description: 'Entries kept per channel' }),
}, 'History retained per channel; null keeps none')
const ArchiveSchema = Strict({
  retentionDays: Type.Integer({ minimum: 1, maximum: 3650, description: 'Days archived messages are kept' }),
}, 'Archive retention; null archives nothing')

// Factories, not shared instances: typebox keeps its markers in non-enumerable keys, so schemas cannot be spread.
const Presence = (options = {}) => Type.Boolean({ description: 'Whether channels of the namespace have presence rosters', ...options })
const ClientEvents = (options = {}) =>
  Type.Boolean({ description: 'Whether browser connections may publish ephemeral client events', ...options })
const policyFields = {
  presence: Presence(),
  clientEvents: ClientEvents(),
  history: Type.Union([HistorySchema, Type.Null()]),
  archive: Type.Union([ArchiveSchema, Type.Null()]),
}
const NamespaceSchema = Strict({ id: Uuid(), name: Type.String(), ...policyFields, createdAt: Timestamp(), updatedAt: Timestamp() })
const NamespacePath = Strict({ name: NamespaceName })

const namespaceOut = (n: Namespace) => ({ ...n, createdAt: iso(n.createdAt), updatedAt: iso(n.updatedAt) })

export const namespacesCreate = defineOperation({
  id: 'realtime_namespaces_create', method: 'POST', path: '/realtime/namespaces', area: 'realtime', auth: 'product',
  summary: 'Register a namespace and its policy; channels "<namespace>:..." exist only under a registered namespace',
  body: Strict({
    name: NamespaceName,
    presence: Type.Optional(Presence({ default: false })),
    clientEvents: Type.Optional(ClientEvents({ default: false })),
    history: Type.Optional(policyFields.history),
    archive: Type.Optional(policyFields.archive),
  }),
  response: NamespaceSchema,
  handler: async ({ body }, ctx) => namespaceOut(await createNamespace(productOf(ctx), body)),
})

export const namespacesList = defineOperation({
  id: 'realtime_namespaces_list', method: 'GET', path: '/realtime/namespaces', area: 'realtime', auth: 'product',
  summary: "List the product's namespaces, by name (paginated)",
  query: Strict(pageQuery('namespace')),
  response: Strict({ namespaces: Type.Array(NamespaceSchema), has_more: HasMore() }),
  handler: ({ query }, ctx) => listed('namespaces', query, (page) => listNamespaces(productOf(ctx), page), namespaceOut),
})

export const namespacesGet = defineOperation({
  id: 'realtime_namespaces_get', method: 'GET', path: '/realtime/namespaces/{name}', area: 'realtime', auth: 'product',
  summary: 'Get one namespace and its policy',
  params: NamespacePath,
  response: NamespaceSchema,
  handler: async ({ params }, ctx) => namespaceOut(await getNamespace(productOf(ctx), params.name)),
})

export const namespacesUpdate = defineOperation({
  id: 'realtime_namespaces_update', method: 'PATCH', path: '/realtime/namespaces/{name}', area: 'realtime', auth: 'product',
  summary: 'Change the policy of a namespace; only supplied fields change (the name cannot)',
  params: NamespacePath,
  body: Strict({
    presence: Type.Optional(policyFields.presence),
    clientEvents: Type.Optional(policyFields.clientEvents),
    history: Type.Optional(policyFields.history),
    archive: Type.Optional(policyFields.archive),
  }),
  response: NamespaceSchema,
  handler: async ({ params, body }, ctx) => namespaceOut(await updateNamespace(productOf(ctx), params.name, body)),
})

export const namespacesDelete = defineOperation({
  id: 'realtime_namespaces_delete', method: 'DELETE', path: '/realtime/namespaces/{name}', area: 'realtime', auth: 'product',
  summary: 'Delete a namespace and its grants; tokens can no longer be issued for its channels',
  params: NamespacePath,
  response: Strict({ name: Type.String(), deleted: Type.Boolean() }),
  handler: async ({ params }, ctx) => {
    await deleteNamespace(productOf(ctx), params.name)
    return { name: params.name, deleted: true }
  },
})

// ---- grants

const Ops = Type.Array(OpName, { minItems: 1, maxItems: OPS.length, uniqueItems: true, description: `Any of ${OPS.join(', ')}` })
const GrantSchema = Strict({ id: Uuid(), pattern: Type.String(), namespace: Type.String(), ops: Ops, createdAt: Timestamp() })
const grantOut = (g: Grant) => ({ ...g, createdAt: iso(g.createdAt) })

const GRANTS_DESCRIPTION = 'A namespace with no grants lets delegated tokens carry every operation its policy allows on any of '
  + 'its channels; once it has a grant, a token may carry an operation on one of its channels only if some grant matches the '
  + 'channel ("*" matches exactly one segment; segment counts must be equal) and lists the operation. Grants never widen the '
  + "namespace policy and do not restrict the backend's own API-key calls."

export const grantsCreate = defineOperation({
  id: 'realtime_grants_create', method: 'POST', path: '/realtime/grants', area: 'realtime', auth: 'product',
  summary: 'Grant operations on the channels matching a pattern; the first segment must be a registered namespace',
  description: GRANTS_DESCRIPTION,
  body: Strict({ pattern: GrantPattern, ops: Ops }),
  response: GrantSchema,
  handler: async ({ body }, ctx) => grantOut(await createGrant(productOf(ctx), body)),
})

export const grantsList = defineOperation({
  id: 'realtime_grants_list', method: 'GET', path: '/realtime/grants', area: 'realtime', auth: 'product',
  summary: "List the product's grants by pattern, optionally of one namespace (paginated)",
  description: 'What a grant allows: realtime_grants_create.',
  query: Strict({ namespace: Type.Optional(NamespaceName), ...pageQuery('grant') }),
  response: Strict({ grants: Type.Array(GrantSchema), has_more: HasMore() }),
  handler: ({ query }, ctx) => listed('grants', query, (page) => listGrants(productOf(ctx), query.namespace, page), grantOut),
})

export const grantsDelete = defineOperation({
  id: 'realtime_grants_delete', method: 'DELETE', path: '/realtime/grants/{grantId}', area: 'realtime', auth: 'product',
  summary: 'Delete a grant',
  params: Strict({ grantId: Uuid('Grant id') }),
  response: Strict({ id: Uuid(), deleted: Type.Boolean() }),
  handler: async ({ params }, ctx) => {
    await deleteGrant(productOf(ctx), params.grantId)
    return { id: params.grantId, deleted: true }
  },
})

// ---- payload storage

// S3 naming rules as the S3 client applies them: no "..", nothing shaped like an IP address (a dotted quad anywhere).
const BucketName = Type.String({
  minLength: 3, maxLength: 63, pattern: '^(?!.*\\.\\.)(?!.*[0-9]+\\.[0-9]+\\.[0-9]+\\.[0-9]+)[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$',
  description: 'One of the buckets this platform offers (REALTIME_PAYLOAD_BUCKET, the default, and REALTIME_PAYLOAD_BUCKETS; another is 422). '
    + 'S3 bucket name: 3 to 63 characters of [a-z0-9.-], starting and ending with a letter or digit, no "..", not an IP address',
})
const StorageSchema = Strict({
  provisioned: Type.Boolean(),
  bucket: Type.Union([Type.String(), Type.Null()]),
  createdAt: Type.Union([Timestamp(), Type.Null()]),
})
const storageOut = (s: PayloadStorage | null) =>
  s ? { provisioned: true, bucket: s.bucket, createdAt: iso(s.createdAt) } : { provisioned: false, bucket: null, createdAt: null }

export const payloadStorageProvision = defineOperation({
  id: 'realtime_payload-storage_provision', method: 'PUT', path: '/realtime/payload-storage', area: 'realtime', auth: 'product',
  rateClass: 'expensive', // creates an S3 bucket when missing
  summary: 'Provision payload storage for publishes above the inline cap: creates the bucket if missing; idempotent',
  body: Strict({ bucket: Type.Optional(BucketName) }),
  response: StorageSchema,
  handler: async ({ body }, ctx) =>
    storageOut(await provisionPayloadStorage(productOf(ctx), body.bucket ?? config.realtime.payloadBucket)),
})

export const payloadStorageGet = defineOperation({
  id: 'realtime_payload-storage_get', method: 'GET', path: '/realtime/payload-storage', area: 'realtime', auth: 'product',
  summary: "Whether the product's payload storage is provisioned, and in which bucket",
  response: StorageSchema,
  handler: async (_input, ctx) => storageOut(await getPayloadStorage(productOf(ctx))),
})

export const payloadStorageDelete = defineOperation({
  id: 'realtime_payload-storage_delete', method: 'DELETE', path: '/realtime/payload-storage', area: 'realtime', auth: 'product',
  summary: 'Stop storing over-cap payloads (such publishes then fail 503); objects already stored are kept',
  response: Strict({ provisioned: Type.Boolean() }),
  handler: async (_input, ctx) => {
    await deletePayloadStorage(productOf(ctx))
    return { provisioned: false }
  },
})

// ---- archive

export const archiveRead = defineOperation({
  id: 'realtime_archive_read', method: 'GET', path: '/realtime/channels/{channel}/archive', area: 'realtime', auth: 'product',
  summary: "Read a page of one channel's archive by time range, newest or oldest first; pass `next` as cursor for the next page",
  description: 'Entries as history answers them (data or ref, offset, epoch, id, publishedAt), from namespaces with an archive '
    + 'retention. A namespace that does not archive answers an empty page. Another product\'s channel is never visible.',
  params: Strict({ channel: ChannelName }),
  query: ArchiveQuerySchema,
  response: ArchivePageSchema,
  handler: async ({ params, query }, ctx) => {
    const productId = productOf(ctx)
    const namespace = namespaceOf(params.channel)
    const policy = (await productPolicies(productId)).namespaces.get(namespace)
    if (!policy) {
      throw new ApiError('namespace_not_registered', `Namespace "${namespace}" is not registered for this product`,
        { fields: [{ path: '/params/channel', message: `names namespace "${namespace}", which is not registered` }] })
    }
    return readArchive(productId, params.channel, policy.archiveDays ?? 0, query)
  },
})

// ---- the channel inspector: a token for the gateway, and the public routes' publish and reads

export const tokensIssue = defineOperation({
  id: 'realtime_tokens_issue', method: 'POST', path: '/realtime/tokens', area: 'realtime', auth: 'product',
  summary: 'Issue a short-lived delegated token for the calling session or platform key, to watch channels through the gateway',
  description: `Narrowed as the public POST /tokens/issue narrows (namespace policy and client events, then grants); 422 when `
    + `nothing is left. The subject is the caller's: console:<userId> (session) or console:<platformKeyId> (platform key). The `
    + `token only watches: it reads presence but never enters a roster. It dies with the session, the key or the user's `
    + `membership that asked for it (the gateway closes it 4001).`,
  body: Strict({
    channels: Type.Array(Strict({
      name: ChannelName,
      ops: Type.Array(OpName, { minItems: 1, maxItems: OPS.length, uniqueItems: true, description: `Any of ${OPS.join(', ')}` }),
    }), { minItems: 1, maxItems: CONSOLE_TOKEN_CHANNELS_MAX }),
    ttlSeconds: Type.Optional(Type.Integer({ minimum: CONSOLE_TOKEN_TTL_MIN, maximum: CONSOLE_TOKEN_TTL_MAX, default: CONSOLE_TOKEN_TTL_DEFAULT })),
  }),
  response: Strict({
    token: Type.String(), gatewayUrl: Type.String(), expiresAt: Timestamp(),
    subject: Type.String({ description: 'The identity the token carries (ext:console:...); it never enters a presence roster' }),
    channels: Type.Array(TokenChannelSchema, { description: 'What the token carries, after narrowing' }),
    dropped: Type.Array(DroppedSchema, { description: 'What was asked for but left out, and why' }),
  }),
  handler: ({ body }, ctx) => issueConsoleToken(productOf(ctx), ctx, body.channels, body.ttlSeconds),
})

const IdempotencyKeyField = Type.Optional(Type.String({
  minLength: 1, maxLength: IDEMPOTENCY_KEY_MAX_CHARS,
  description: 'The public route\'s Idempotency-Key: a repeat within 5 minutes answers what the first published and publishes nothing',
}))
const Replayed = Type.Optional(Type.Literal(true, { description: 'A repeat of an earlier request with the same idempotencyKey: nothing was published' }))
const keyOf = (key: string | undefined) => (key === undefined ? null : checkIdempotencyKey(key, '/body/idempotencyKey'))

export const messagesPublish = defineOperation({
  id: 'realtime_messages_publish', method: 'POST', path: '/realtime/messages', area: 'realtime', auth: 'product',
  summary: 'Publish to a channel as the public POST /messages does: the same publish quota, inline cap and over-cap payload storage',
  description: 'Counted by the product\'s publish quota (429 quota_exceeded) beside this API\'s write class. Above the inline cap '
    + 'the data is stored in the product\'s payload storage and delivered as a ref (503 when none is provisioned). With an '
    + 'idempotencyKey, a repeat within 5 minutes answers the first publication (replayed: true) and a different request under '
    + 'the same key is 409 invalid_idempotent_request.',
  body: Strict({
    channel: ChannelName,
    data: Type.Unknown({ description: 'Any JSON value (null included); required' }),
    idempotencyKey: IdempotencyKeyField,
  }),
  response: Strict({ ...publicationFields(), replayed: Replayed }),
  handler: async ({ body }, ctx) => {
    const { message, replayed } = await publishMessage(productOf(ctx), { channel: body.channel, data: body.data }, COUNTED_ALREADY, keyOf(body.idempotencyKey))
    return { ...message, ...(replayed ? { replayed: true as const } : {}) }
  },
})

export const messagesBroadcast = defineOperation({
  id: 'realtime_messages_broadcast', method: 'POST', path: '/realtime/messages/broadcast', area: 'realtime', auth: 'product',
  summary: `Publish one payload to up to ${BROADCAST_MAX_CHANNELS} channels, each answered on its own`,
  description: 'As the public POST /messages/broadcast: each channel is checked and counted as a publish to it would be (namespace, '
    + 'publish quota, byte budgets) and answered with its own status, offset and epoch; data at most the inline cap. With an '
    + 'idempotencyKey a repeat publishes only on the channels the first request did not.',
  body: Strict({
    channels: Type.Array(ChannelName, { minItems: 1, maxItems: BROADCAST_MAX_CHANNELS, uniqueItems: true, description: `Distinct channels, 1 to ${BROADCAST_MAX_CHANNELS}` }),
    data: Type.Unknown({ description: 'Any JSON value (null included), at most the inline cap serialized; required' }),
    idempotencyKey: IdempotencyKeyField,
  }),
  response: Strict({
    results: BroadcastResults(),
    replayed: Replayed,
  }),
  handler: async ({ body }, ctx) => {
    const { results, replayed } = await broadcastMessage(productOf(ctx), { channels: body.channels, data: body.data }, COUNTED_ALREADY, keyOf(body.idempotencyKey))
    return { results, ...(replayed ? { replayed: true as const } : {}) }
  },
})

const ChannelPathSchema = Strict({ channel: ChannelName })

export const channelGet = defineOperation({
  id: 'realtime_channel_get', method: 'GET', path: '/realtime/channels/{channel}', area: 'realtime', auth: 'product',
  summary: 'Whether anyone is there and where the stream is, as the public GET /channels/{channel} answers',
  params: ChannelPathSchema,
  response: ChannelStatusSchema,
  handler: ({ params }, ctx) => channelStatus(productOf(ctx), params.channel),
})

export const historyRead = defineOperation({
  id: 'realtime_history_read', method: 'GET', path: '/realtime/channels/{channel}/history', area: 'realtime', auth: 'product',
  summary: "Read a channel's history as the public route does: a window (last_n or last_ms) or a cursor (offset and epoch)",
  description: 'Entries oldest first, each with data or ref. A namespace that keeps no history answers an empty result; a cursor '
    + 'whose entries left Redis is recovered from the archive when the namespace archives.',
  params: ChannelPathSchema,
  query: HistoryQuery,
  response: HistoryResultSchema,
  handler: ({ params, query }, ctx) => channelHistory(productOf(ctx), params.channel, query),
})

export const presenceRead = defineOperation({
  id: 'realtime_presence_read', method: 'GET', path: '/realtime/channels/{channel}/presence', area: 'realtime', auth: 'product',
  summary: "A channel's presence roster, as the public route answers it; presence_disabled when the namespace has presence off",
  params: ChannelPathSchema,
  response: PresenceSchema,
  handler: ({ params }, ctx) => channelPresence(productOf(ctx), params.channel),
})

// ---- active channels

const ChannelPrefix = Type.String({ minLength: 1, maxLength: 128, pattern: '^[a-zA-Z0-9._:-]+$', description: 'Name starts with (not with namespace)' })

export const channelsList = defineOperation({
  id: 'realtime_channels_list', method: 'GET', path: '/realtime/channels', area: 'realtime', auth: 'product',
  summary: "The product's channels with a subscriber now, by name, with subscriber and presence counts (paginated)",
  query: Strict({
    prefix: Type.Optional(ChannelPrefix),
    namespace: Type.Optional(Type.String({ maxLength: 64, pattern: NAMESPACE_PATTERN })),
    ...pageQuery('channel', Type.String({ maxLength: 128, pattern: CHANNEL_PATTERN, description: 'Last channel of the previous page' })),
  }),
  response: Strict({
    channels: Type.Array(Strict({
      channel: Type.String(),
      namespace: Type.String(),
      subscribers: Type.Integer({ minimum: 0 }),
      presence: Type.Union([Strict({ members: Type.Integer(), connections: Type.Integer() }), Type.Null()]),
    })),
    has_more: HasMore(),
  }),
  handler: ({ query }, ctx) => activeChannels(productOf(ctx), query),
})

export const connectionsList = defineOperation({
  id: 'realtime_connections_list', method: 'GET', path: '/realtime/connections', area: 'realtime', auth: 'product',
  summary: "The product's connections on one gateway, by id, and the gateways reporting them (paginated)",
  description: `Gateways report about every second for ${CONNECTION_WATCH_MS / 1000} s after an ask: a first answer may be empty.`,
  query: Strict({
    gateway: Type.Optional(Uuid('Default: the first of `gateways`')),
    ...pageQuery('connection'),
  }),
  response: Strict({
    gateways: Type.Array(Strict({
      gateway: Uuid(),
      connections: Type.Integer({ minimum: 0, description: 'All its connections of the product' }),
      reportedAt: Timestamp(),
    })),
    gateway: Type.Union([Uuid(), Type.Null()], { description: 'The gateway of this page' }),
    connections: Type.Array(Strict({
      id: Uuid(),
      subject: Type.String(),
      connectedAt: Timestamp(),
      subscriptions: Type.Integer({ minimum: 0 }),
      channels: Type.Array(Type.String(), { description: `Its first ${CONNECTION_CHANNELS_SHOWN} channels` }),
    })),
    has_more: HasMore(),
  }),
  handler: ({ query }, ctx) => productConnections(productOf(ctx), query),
})

export const realtimeOperations = [
  namespacesCreate, namespacesList, namespacesGet, namespacesUpdate, namespacesDelete,
  grantsCreate, grantsList, grantsDelete,
  payloadStorageProvision, payloadStorageGet, payloadStorageDelete,
  archiveRead, channelsList, connectionsList, channelGet, historyRead, presenceRead, messagesPublish, messagesBroadcast, tokensIssue,
]
