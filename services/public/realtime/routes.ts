// The Realtime public routes, rooted at /{productId}/realtime. Handlers are thin: guards, then one domain function.
import { Elysia } from 'elysia'
import { validateInput } from '../../../shared/catalog/validate'
import { config } from '../../../shared/config'
import type { PublicScope } from '../../../shared/realtime/public-keys'
import { jsonBody, MESSAGES_BODY_LIMIT, noBody, readBody } from '../http/body'
import { endpoint, type Guards, ROUTE_HOOKS } from '../http/endpoint'
import { authenticate, type KeyIdentity } from './key-auth'
import { channelArchive, channelHistory, channelPresence, channelStatus } from '../../../shared/realtime/channel-reads'
import { issueToken } from '../../../shared/realtime/token-issue'
import { broadcastMessage, publishMessage } from '../../../shared/realtime/publish-message'
import { idempotencyKeyOf } from '../../../shared/http/idempotency-key'
import { ArchiveQuerySchema, type ArchiveQuery } from '../../../shared/realtime/archive-read'
import { BroadcastBody, ChannelPath, HistoryQuery, NoQuery, PublishBody, TokenIssueBody } from '../../../shared/realtime/request-schemas'

/** The realtime guards of a route: browser origin allowed, an `rtk_` key holding `scope`, then `read`. */
const guards = (scope: PublicScope, read: (request: Request) => Promise<unknown>, deferIpLimit = false): Guards<KeyIdentity> =>
  ({ browser: true, authenticate: (request, productId, beforeLookup) => authenticate(request, productId, scope, beforeLookup), read, deferIpLimit })

/** The decoded `:channel` path parameter, checked against the channel grammar (400). */
function channelOf(params: Record<string, string>): string {
  const channel = String(params.channel ?? '')
  validateInput({ params: ChannelPath }, { params: { channel } })
  return channel
}

const messageBody = (request: Request) =>
  readBody(request, MESSAGES_BODY_LIMIT, { gzip: { maxDecompressed: config.realtime.maxDecompressedBytes } })

export const realtimeRoutes = () =>
  new Elysia({ prefix: '/:productId/realtime' })
    .post('/tokens/issue', endpoint(guards('tokens:issue', jsonBody), ({ key, body }) => {
      const input = validateInput({ body: TokenIssueBody }, { body })
      return issueToken(key.productId, key.keyId, input.body as TokenIssueBody)
    }), ROUTE_HOOKS)
    // The IP limit is counted by the publish itself: with the quota and the publish, one Redis round trip.
    // A repeat under the same Idempotency-Key answers what the first request published, with Idempotent-Replayed: true.
    .post('/messages', endpoint(guards('messages:publish', messageBody, true), async ({ key, body, ip, request, headers }) => {
      const input = validateInput({ body: PublishBody }, { body })
      const { message, replayed } = await publishMessage(key.productId, input.body as PublishBody, ip, idempotencyKeyOf(request))
      if (replayed) headers['idempotent-replayed'] = 'true'
      return message
    }), ROUTE_HOOKS)
    .post('/messages/broadcast', endpoint(guards('messages:publish', messageBody, true), async ({ key, body, ip, request, headers }) => {
      const input = validateInput({ body: BroadcastBody }, { body })
      const { results, replayed } = await broadcastMessage(key.productId, input.body as BroadcastBody, ip, idempotencyKeyOf(request))
      if (replayed) headers['idempotent-replayed'] = 'true'
      return { results }
    }), ROUTE_HOOKS)
    .get('/channels/:channel', endpoint(guards('channels:read', noBody), ({ key, params, query }) => {
      const channel = channelOf(params)
      validateInput({ query: NoQuery }, { query })
      return channelStatus(key.productId, channel)
    }), ROUTE_HOOKS)
    .get('/channels/:channel/history', endpoint(guards('history:read', noBody), ({ key, params, query }) => {
      const channel = channelOf(params)
      // The catalog's validation, as realtime_history_read's: numbers written as plain decimals only.
      const input = validateInput({ query: HistoryQuery }, { query })
      return channelHistory(key.productId, channel, input.query as HistoryQuery)
    }), ROUTE_HOOKS)
    // The archive is history kept longer: the same scope reads it.
    .get('/channels/:channel/archive', endpoint(guards('history:read', noBody), ({ key, params, query }) => {
      const channel = channelOf(params)
      const input = validateInput({ query: ArchiveQuerySchema }, { query })
      return channelArchive(key.productId, channel, input.query as ArchiveQuery)
    }), ROUTE_HOOKS)
    .get('/channels/:channel/presence', endpoint(guards('presence:read', noBody), ({ key, params, query }) => {
      const channel = channelOf(params)
      validateInput({ query: NoQuery }, { query })
      return channelPresence(key.productId, channel)
    }), ROUTE_HOOKS)
