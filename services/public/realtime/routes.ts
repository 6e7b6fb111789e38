// The Realtime public routes, rooted at /{productId}/realtime. Handlers are thin: guards, then one domain function.
import { randomUUID } from 'node:crypto'
import { Elysia } from 'elysia'
import { validateInput } from '../../../shared/catalog/validate'
import { config } from '../../../shared/config'
import { badRequest, toErrorResponse } from '../../../shared/errors'
import { readBytes } from '../../../shared/http/body'
import { clientIp } from '../../../shared/http/serve'
import { describeError, log } from '../../../shared/log'
import type { PublicScope } from '../../../shared/realtime/public-keys'
import { authenticate } from './key-auth'
import { BODY_LIMIT, MESSAGES_BODY_LIMIT, readBody } from '../http/body'
import { channelHistory, channelPresence, channelStatus } from './channels'
import { issueToken } from './issue'
import { publishMessage } from './messages'
import { checkOrigin } from '../http/origin'
import { checkIpRate } from '../http/rate-limit'
import { ChannelPath, HistoryQuery, NoQuery, nonDecimals, nonIntegers, PublishBody, TokenIssueBody } from './schemas'

interface Call {
  request: Request
  /** The key's product (equal to the path's). */
  productId: string
  /** The authenticated product API key. */
  keyId: string
  /** Decoded from the path; null when the route has none. */
  channel: string | null
  body: unknown
  query: Record<string, string>
}

/**
 * Every route runs the same guards in the same order: origin (403), IP rate limit (429), API key and scope
 * (401/404/403), body limit (413), then its handler. Every response, errors included, carries the CORS headers of an
 * allowed origin and an x-request-id.
 */
function endpoint(scope: PublicScope, read: (request: Request) => Promise<unknown>, handler: (call: Call) => Promise<unknown>) {
  return async ({ request, params }: { request: Request; params: Record<string, string | null | undefined> }) => {
    const requestId = randomUUID()
    let cors: Record<string, string> = {}
    try {
      cors = checkOrigin(request)
      await checkIpRate(clientIp(request))
      const key = await authenticate(request, String(params.productId ?? '').toLowerCase(), scope)
      const body = await read(request)
      const channel = 'channel' in params ? String(params.channel ?? '') : null
      if (channel !== null) validateInput({ params: ChannelPath }, { params: { channel } })
      const query = Object.fromEntries(new URL(request.url).searchParams)
      const result = await handler({ request, productId: key.productId, keyId: key.keyId, channel, body, query })
      return Response.json(result, { headers: { ...cors, 'x-request-id': requestId } })
    } catch (error) {
      const response = toErrorResponse(error, (e) => log('error', 'public route failed', { requestId, ...describeError(e) }))
      for (const [name, value] of Object.entries({ ...cors, 'x-request-id': requestId })) response.headers.set(name, value)
      return response
    }
  }
}

/** Routes without a body still refuse one above the limit. */
const noBody = async (request: Request) => {
  await readBytes(request, BODY_LIMIT)
  return undefined
}
const jsonBody = (request: Request) => readBody(request, BODY_LIMIT)
const messageBody = (request: Request) =>
  readBody(request, MESSAGES_BODY_LIMIT, { gzip: { maxDecompressed: config.realtime.maxDecompressedBytes } })

const hooks = { parse: 'none' } as const

export const realtimeRoutes = () =>
  new Elysia({ prefix: '/:productId/realtime' })
    .post('/tokens/issue', endpoint('tokens:issue', jsonBody, ({ productId, keyId, body }) => {
      const input = validateInput({ body: TokenIssueBody }, { body })
      return issueToken(productId, keyId, input.body as TokenIssueBody)
    }), hooks)
    .post('/messages', endpoint('messages:publish', messageBody, ({ productId, body }) => {
      const input = validateInput({ body: PublishBody }, { body })
      return publishMessage(productId, input.body as PublishBody)
    }), hooks)
    .get('/channels/:channel', endpoint('channels:read', noBody, ({ productId, channel, query }) => {
      validateInput({ query: NoQuery }, { query })
      return channelStatus(productId, channel!)
    }), hooks)
    .get('/channels/:channel/history', endpoint('history:read', noBody, ({ productId, channel, query }) => {
      const malformed = [...nonIntegers(query, ['last_n', 'offset']), ...nonDecimals(query, ['last_ms'])]
      if (malformed.length) throw badRequest(`Invalid request: ${malformed.map((f) => `${f.path} ${f.message}`).join('; ')}`, malformed)
      const input = validateInput({ query: HistoryQuery }, { query })
      return channelHistory(productId, channel!, input.query as HistoryQuery)
    }), hooks)
    .get('/channels/:channel/presence', endpoint('presence:read', noBody, ({ productId, channel, query }) => {
      validateInput({ query: NoQuery }, { query })
      return channelPresence(productId, channel!)
    }), hooks)
