// The Realtime public routes, under /{productId}/realtime. Handlers are thin: guards, then one domain function.
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
import type { ArchiveQuery } from '../../../shared/realtime/archive-read'
import type { BroadcastBody, HistoryQuery, PublishBody, TokenIssueBody } from '../../../shared/realtime/request-schemas'
import { elysiaPath, PUBLIC_ROUTES } from '../catalog'

/** The realtime guards of a route: browser origin allowed, an `rtk_` key holding `scope`, then `read`. */
const guards = (scope: PublicScope, read: (request: Request) => Promise<unknown>, deferIpLimit = false): Guards<KeyIdentity> =>
  ({ browser: true, authenticate: (request, productId, beforeLookup) => authenticate(request, productId, scope, beforeLookup), read, deferIpLimit })

const R = PUBLIC_ROUTES.realtime

/** The decoded `:channel` path parameter, checked against the channel grammar (400). */
function channelOf(params: Record<string, string>): string {
  const channel = String(params.channel ?? '')
  validateInput({ params: R.channelGet.params }, { params: { channel } })
  return channel
}

const messageBody = (request: Request) =>
  readBody(request, MESSAGES_BODY_LIMIT, { gzip: { maxDecompressed: config.realtime.maxDecompressedBytes } })

// Paths and schemas come from the route's entry in services/public/catalog.ts, which the OpenAPI document reads too.
export const realtimeRoutes = () =>
  new Elysia()
    .post(elysiaPath(R.tokensIssue), endpoint(guards(R.tokensIssue.scope, jsonBody), ({ key, body }) => {
      const input = validateInput({ body: R.tokensIssue.body }, { body })
      return issueToken(key.productId, key.keyId, input.body as TokenIssueBody)
    }), ROUTE_HOOKS)
    // The IP limit is counted by the publish itself: with the quota and the publish, one Redis round trip.
    // A repeat under the same Idempotency-Key answers what the first request published, with Idempotent-Replayed: true.
    // Not an async function: the answer read in a callback, one frame fewer per publish.
    .post(elysiaPath(R.messagesPublish), endpoint(guards(R.messagesPublish.scope, messageBody, true), ({ key, body, ip, request, headers }) => {
      const input = validateInput({ body: R.messagesPublish.body }, { body })
      return publishMessage(key.productId, input.body as PublishBody, ip, idempotencyKeyOf(request)).then(({ message, replayed }) => {
        if (replayed) headers['idempotent-replayed'] = 'true'
        return message
      })
    }), ROUTE_HOOKS)
    // 64 KiB, no gzip, as every route but POST /messages (the spec's limits): a broadcast carries one payload to many.
    .post(elysiaPath(R.messagesBroadcast), endpoint(guards(R.messagesBroadcast.scope, jsonBody, true), async ({ key, body, ip, request, headers }) => {
      const input = validateInput({ body: R.messagesBroadcast.body }, { body })
      const { results, replayed } = await broadcastMessage(key.productId, input.body as BroadcastBody, ip, idempotencyKeyOf(request))
      if (replayed) headers['idempotent-replayed'] = 'true'
      return { results }
    }), ROUTE_HOOKS)
    .get(elysiaPath(R.channelGet), endpoint(guards(R.channelGet.scope, noBody), ({ key, params, query }) => {
      const channel = channelOf(params)
      validateInput({ query: R.channelGet.query }, { query })
      return channelStatus(key.productId, channel)
    }), ROUTE_HOOKS)
    .get(elysiaPath(R.historyRead), endpoint(guards(R.historyRead.scope, noBody), ({ key, params, query }) => {
      const channel = channelOf(params)
      // The catalog's validation, as realtime_history_read's: numbers written as plain decimals only.
      const input = validateInput({ query: R.historyRead.query }, { query })
      return channelHistory(key.productId, channel, input.query as HistoryQuery)
    }), ROUTE_HOOKS)
    // The archive is history kept longer: the same scope reads it.
    .get(elysiaPath(R.archiveRead), endpoint(guards(R.archiveRead.scope, noBody), ({ key, params, query }) => {
      const channel = channelOf(params)
      const input = validateInput({ query: R.archiveRead.query }, { query })
      return channelArchive(key.productId, channel, input.query as ArchiveQuery)
    }), ROUTE_HOOKS)
    .get(elysiaPath(R.presenceRead), endpoint(guards(R.presenceRead.scope, noBody), ({ key, params, query }) => {
      const channel = channelOf(params)
      validateInput({ query: R.presenceRead.query }, { query })
      return channelPresence(key.productId, channel)
    }), ROUTE_HOOKS)
