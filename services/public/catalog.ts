// Every public route described once: method, path, credential, the schemas its handler validates with, its answer and
// the error codes it can answer with. The areas' routes mount from these entries and the OpenAPI document
// (services/public/openapi.ts) is built from them, so a schema is never written twice.
import type { TSchema } from 'typebox'
import Type from 'typebox'
import { CaptureBatchSchema } from '../../shared/analytics/capture'
import { Strict } from '../../shared/catalog/schemas'
import type { Method } from '../../shared/catalog/operation'
import type { ErrorCode } from '../../shared/error-catalog'
import { EmailSchema, EmailSummarySchema } from '../../shared/mail/schemas'
import { HasMore } from '../../shared/catalog/pagination'
import { ArchiveQuerySchema } from '../../shared/realtime/archive-read'
import type { PublicScope } from '../../shared/realtime/public-keys'
import { BroadcastBody, ChannelPath, HistoryQuery, NoQuery, PublishBody, TokenIssueBody } from '../../shared/realtime/request-schemas'
import {
  ArchivePageSchema, BroadcastResults, ChannelStatusSchema, HistoryResultSchema, PresenceSchema, publicationFields, TokenIssueResultSchema,
} from '../../shared/realtime/response-schemas'
import { ListQuery, SendBody } from './mail/emails'
import { DomainBody, DomainPage, PublicDomainSchema, PublicTemplateSchema, TemplateBody, TemplatePage, TemplatePatch } from './mail/setup'

/** The credential a route takes: a Realtime product key (rtk_, X-Api-Key), a Mail sending key (lmk_, X-Api-Key), a capture key (ptk_, `key` query). */
export type PublicCredential = 'realtime_key' | 'mail_key' | 'capture_key'

export interface PublicRoute {
  /** The OpenAPI operationId, `<area>_<resource>_<verb>`. */
  id: string
  method: Method
  /** OpenAPI-style, parameters in braces, `{productId}` first: `/{productId}/realtime/channels/{channel}`. */
  path: string
  area: 'realtime' | 'mail' | 'capture'
  credential: PublicCredential
  /** The Realtime key scope the route needs, or `full_access` for Mail's setup routes. */
  scope?: PublicScope | 'full_access'
  summary: string
  description?: string
  /** Path parameters besides productId, as the handler checks them (Mail ids are any string: an unknown one is 404). */
  params?: TSchema
  query?: TSchema
  body?: TSchema
  /** The 200 body. */
  response: TSchema
  /** Headers the 200 may carry besides x-request-id. */
  responseHeaders?: Record<string, { description: string; schema: Record<string, unknown> }>
  /** Codes the route itself can answer with, besides those of its credential and body (COMMON_ERRORS). */
  errors: readonly ErrorCode[]
  /** Takes an Idempotency-Key header. */
  idempotencyKey?: boolean
  /** Accepts Content-Encoding: gzip. */
  gzip?: boolean
  /** A request body the route accepts (the round-trip test sends it through the route's own validation). */
  example?: unknown
}

/** What every route of a credential can answer: the guards of services/public/http/endpoint.ts and its authenticator. */
export const CREDENTIAL_ERRORS: Record<PublicCredential, readonly ErrorCode[]> = {
  realtime_key: ['invalid_api_key', 'origin_not_allowed', 'insufficient_scope', 'not_found', 'rate_limited', 'unavailable'],
  mail_key: ['restricted_api_key', 'not_found', 'rate_limited', 'unavailable'],
  capture_key: ['invalid_api_key', 'origin_not_allowed', 'not_found', 'rate_limited', 'unavailable'],
}
/** What reading and validating a request can answer: every route reads its body within a limit and validates its input. */
export const REQUEST_ERRORS: readonly ErrorCode[] = ['validation_failed', 'invalid_json', 'payload_too_large', 'unsupported_encoding']

const idem = ['invalid_idempotency_key', 'invalid_idempotent_request'] as const
const publishErrors = [...idem, 'invalid_body', 'namespace_not_registered', 'quota_exceeded', 'fanout_budget_exceeded', 'history_budget_exceeded'] as const
const channelRead = (scope: PublicScope) => ({ area: 'realtime', credential: 'realtime_key', scope, params: ChannelPath } as const)
const IdPath = (what: string) => Strict({ id: Type.String({ minLength: 1, description: `${what} id; one that names nothing the key may see is 404` }) })
const ListOf = (item: TSchema) => Strict({ object: Type.Literal('list'), has_more: HasMore(), data: Type.Array(item) })
const Deleted = (object: 'domain' | 'template') => Strict({ object: Type.Literal(object), id: Type.String(), deleted: Type.Literal(true) })
const mail = { area: 'mail', credential: 'mail_key' } as const
const setup = { ...mail, scope: 'full_access' } as const
const Replayed = {
  'Idempotent-Replayed': { description: '`true` when this answers an earlier request with the same Idempotency-Key: nothing was published again', schema: { type: 'string', enum: ['true'] } },
}

const realtime = {
  tokensIssue: {
    id: 'realtime_tokens_issue', method: 'POST', path: '/{productId}/realtime/tokens/issue', area: 'realtime', credential: 'realtime_key', scope: 'tokens:issue',
    summary: 'Issue a gateway token for one subject, narrowed by namespace policy and grants',
    body: TokenIssueBody, response: TokenIssueResultSchema, errors: ['unprocessable'],
    example: { subject: 'user-42', channels: [{ name: 'chat:room-1', ops: ['subscribe', 'publish'] }], ttlSeconds: 600 },
  },
  messagesPublish: {
    id: 'realtime_messages_publish', method: 'POST', path: '/{productId}/realtime/messages', area: 'realtime', credential: 'realtime_key', scope: 'messages:publish',
    summary: 'Publish to a channel; data above the inline cap goes to payload storage and is delivered as a ref',
    body: PublishBody, response: Strict(publicationFields()), responseHeaders: Replayed, idempotencyKey: true, gzip: true,
    errors: [...publishErrors, 'payload_storage_not_provisioned'],
    example: { channel: 'chat:room-1', data: { text: 'hello' } },
  },
  messagesBroadcast: {
    id: 'realtime_messages_broadcast', method: 'POST', path: '/{productId}/realtime/messages/broadcast', area: 'realtime', credential: 'realtime_key', scope: 'messages:publish',
    summary: 'Publish one payload to up to 100 channels, each answered with its own status',
    body: BroadcastBody, response: Strict({ results: BroadcastResults() }), responseHeaders: Replayed, idempotencyKey: true,
    errors: publishErrors,
    example: { channels: ['chat:room-1', 'chat:room-2'], data: { text: 'hello' } },
  },
  channelGet: {
    id: 'realtime_channel_get', method: 'GET', path: '/{productId}/realtime/channels/{channel}', ...channelRead('channels:read'),
    summary: 'Whether anyone is on a channel and where its stream is', query: NoQuery, response: ChannelStatusSchema, errors: ['namespace_not_registered'],
  },
  historyRead: {
    id: 'realtime_history_read', method: 'GET', path: '/{productId}/realtime/channels/{channel}/history', ...channelRead('history:read'),
    summary: "Read a channel's history: a window (last_n or last_ms) or a cursor (offset and epoch), with recovered",
    query: HistoryQuery, response: HistoryResultSchema, errors: ['namespace_not_registered'],
  },
  archiveRead: {
    id: 'realtime_archive_read', method: 'GET', path: '/{productId}/realtime/channels/{channel}/archive', ...channelRead('history:read'),
    summary: "Read a page of a channel's archive by time range; pass `next` as cursor for the next page",
    query: ArchiveQuerySchema, response: ArchivePageSchema, errors: ['namespace_not_registered'],
  },
  presenceRead: {
    id: 'realtime_presence_read', method: 'GET', path: '/{productId}/realtime/channels/{channel}/presence', ...channelRead('presence:read'),
    summary: "A channel's presence roster", query: NoQuery, response: PresenceSchema, errors: ['namespace_not_registered', 'presence_disabled'],
  },
} as const satisfies Record<string, PublicRoute>

const mailRoutes = {
  emailsSend: {
    id: 'mail_emails_send', method: 'POST', path: '/{productId}/mail/emails', ...mail,
    summary: 'Queue an email from a verified domain: html and/or text, or a template with variables',
    body: SendBody, response: Strict({ id: Type.String({ description: 'The email id' }) }), idempotencyKey: true,
    errors: ['domain_not_verified', 'unprocessable', ...idem, 'concurrent_idempotent_requests', 'rate_limit_exceeded'],
    example: { from: 'Acme <hello@mail.example.com>', to: 'ada@example.org', subject: 'Welcome', text: 'Hello Ada' },
  },
  emailsList: {
    id: 'mail_emails_list', method: 'GET', path: '/{productId}/mail/emails', ...mail,
    summary: 'The emails the key may read, newest first: after pages to older ones, before to newer ones',
    query: ListQuery, response: ListOf(EmailSummarySchema), errors: [],
  },
  emailsGet: {
    id: 'mail_emails_get', method: 'GET', path: '/{productId}/mail/emails/{id}', ...mail,
    summary: 'One email with its content and every event', params: IdPath('Email'), response: EmailSchema, errors: [],
  },
  domainCreate: {
    id: 'mail_domain_create', method: 'POST', path: '/{productId}/mail/domains', ...setup,
    summary: 'Register a sending domain; answers the DNS records to publish', body: DomainBody, response: PublicDomainSchema,
    errors: ['conflict', 'limit_reached'], example: { name: 'mail.example.com' },
  },
  domainList: {
    id: 'mail_domain_list', method: 'GET', path: '/{productId}/mail/domains', ...setup,
    summary: "The product's sending domains, newest first", query: DomainPage, response: ListOf(PublicDomainSchema), errors: [],
  },
  domainGet: {
    id: 'mail_domain_get', method: 'GET', path: '/{productId}/mail/domains/{id}', ...setup,
    summary: 'One sending domain with its records', params: IdPath('Domain'), response: PublicDomainSchema, errors: [],
  },
  domainVerify: {
    id: 'mail_domain_verify', method: 'POST', path: '/{productId}/mail/domains/{id}/verify', ...setup,
    summary: "Check the domain's DNS records now", params: IdPath('Domain'), response: PublicDomainSchema, errors: [],
  },
  domainDelete: {
    id: 'mail_domain_delete', method: 'DELETE', path: '/{productId}/mail/domains/{id}', ...setup,
    summary: 'Delete a sending domain', params: IdPath('Domain'), response: Deleted('domain'), errors: [],
  },
  templateCreate: {
    id: 'mail_template_create', method: 'POST', path: '/{productId}/mail/templates', ...setup,
    summary: 'Create a template with {{variable}} placeholders', body: TemplateBody, response: PublicTemplateSchema,
    errors: ['conflict', 'limit_reached'], example: { name: 'welcome', subject: 'Welcome, {{name}}', html: '<p>Hello {{name}}</p>' },
  },
  templateList: {
    id: 'mail_template_list', method: 'GET', path: '/{productId}/mail/templates', ...setup,
    summary: "The product's templates, newest first", query: TemplatePage, response: ListOf(PublicTemplateSchema), errors: [],
  },
  templateGet: {
    id: 'mail_template_get', method: 'GET', path: '/{productId}/mail/templates/{id}', ...setup,
    summary: 'One template', params: IdPath('Template'), response: PublicTemplateSchema, errors: [],
  },
  templateUpdate: {
    id: 'mail_template_update', method: 'PATCH', path: '/{productId}/mail/templates/{id}', ...setup,
    summary: 'Change a template; only supplied fields change', params: IdPath('Template'), body: TemplatePatch, response: PublicTemplateSchema,
    errors: ['conflict'],
  },
  templateDelete: {
    id: 'mail_template_delete', method: 'DELETE', path: '/{productId}/mail/templates/{id}', ...setup,
    summary: 'Delete a template', params: IdPath('Template'), response: Deleted('template'), errors: [],
  },
} as const satisfies Record<string, PublicRoute>

const capture = {
  eventsCapture: {
    id: 'capture_events_capture', method: 'POST', path: '/{productId}/capture', area: 'capture', credential: 'capture_key',
    summary: 'Capture a batch of analytics events from a browser or an app, with a publishable key',
    description: 'Any Content-Type is read as JSON (sendBeacon sends text/plain); gzip bodies are accepted. Browser origins are the key\'s own.',
    body: CaptureBatchSchema, response: Strict({ accepted: Type.Integer({ description: 'Events stored' }) }), gzip: true, errors: ['invalid_body'],
    example: { events: [{ event: 'page_view', identity: { anonymous_id: 'a-1' }, properties: { path: '/' } }] },
  },
} as const satisfies Record<string, PublicRoute>

/** The public routes by area, each entry's schemas the ones its handler validates with. */
export const PUBLIC_ROUTES = { realtime, mail: mailRoutes, capture } as const

/** Every public route, in the document's order. */
export const publicRoutes: readonly PublicRoute[] = [...Object.values(realtime), ...Object.values(mailRoutes), ...Object.values(capture)]

/**
 * Routes of the public app that are not product routes, left out of the document on purpose: probes, the document
 * itself, and CORS preflights (answered by the browser for its own requests, never called by a product's code).
 */
export const UNDESCRIBED = ['GET /healthz', 'GET /readyz', 'GET /openapi.json', 'OPTIONS /*', 'OPTIONS /{productId}/capture'] as const

/** The route's path as Elysia mounts it: `{name}` as `:name`. */
export const elysiaPath = (route: PublicRoute) => route.path.replace(/\{(\w+)\}/g, ':$1')
