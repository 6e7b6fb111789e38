// Mail area, platform side: sending domains (DKIM, DNS records, verification), sending API keys (lmk_), templates, and
// the email log read back.
import Type from 'typebox'
import { defineOperation, productOf } from '../../../shared/catalog/operation'
import { iso, Strict, Timestamp, Uuid } from '../../../shared/catalog/schemas'
import { HasMore, listObject, pageQuery } from '../../../shared/catalog/pagination'
import { MAIL_SCOPES, MailScopeName } from '../../../shared/mail/keys'
import { DomainName, EmailSchema, EmailSummarySchema, TemplateFields } from '../../../shared/mail/schemas'
import { emailPageQuery, listEmailLog, readEmail, readEmailSummary, wholeProduct } from '../../../shared/mail/email-log'
import { createMailKey, listMailKeys, revokeMailKey, type MailKey } from './key-management'
import { listSuppressions, removeSuppression, type Suppression } from './suppressions'
import { deliveryFields, deliveryOut } from '../webhooks/operations'
import { type EndpointDelivery, listEmailDeliveries } from '../../../shared/webhooks/deliveries'
import { createDomain, deleteDomain, getDomain, listDomains, verifyDomain, type Domain } from '../../../shared/mail/domains'
import {
  createTemplate, deleteTemplate, getTemplate, listTemplates, placeholders, type Template, updateTemplate,
} from '../../../shared/mail/templates'

// ---- domains

const Status = <V extends string>(values: readonly V[], description: string) => Type.Unsafe<V>(Type.Union(values.map((v) => Type.Literal(v)), { description }))
const RecordSchema = Strict({
  record: Status(['DKIM', 'SPF', 'Ownership'], 'What the record is for'),
  type: Type.Literal('TXT'),
  name: Type.String({ description: 'The full name to publish the record at' }),
  value: Type.String(),
  status: Status(['pending', 'verified', 'failed'], 'What the last check found'),
})
const DomainSchema = Strict({
  id: Uuid(), name: Type.String(),
  status: Status(['pending', 'verified', 'failed'], 'Only verified domains send; pending until checked, failed when a check missed a record'),
  records: Type.Array(RecordSchema),
  createdAt: Timestamp(),
  checkedAt: Type.Union([Timestamp(), Type.Null()]),
  verifiedAt: Type.Union([Timestamp(), Type.Null()]),
})
/** Any string: an id that is not a UUID names nothing (404), the rule for every Mail id. */
// No maxLength, on purpose: an id that is not a UUID names nothing and is 404 however long (the spec's rule for Mail ids),
// told by its shape before any query; the request line's own bound bounds it.
const IdPath = (what: string) => Strict({ id: Type.String({ minLength: 1, description: `${what} id` }) })
const domainOut = (d: Domain) => ({
  ...d, createdAt: iso(d.createdAt), checkedAt: d.checkedAt && iso(d.checkedAt), verifiedAt: d.verifiedAt && iso(d.verifiedAt),
})

export const domainCreate = defineOperation({
  id: 'mail_domain_create', method: 'POST', path: '/mail/domains', area: 'mail', auth: 'product',
  rateClass: 'expensive', // an RSA 2048 key pair per call
  summary: 'Register a sending domain: answers the DNS records to publish (DKIM, SPF, ownership); it sends once verified',
  description: 'A new RSA 2048 DKIM key pair is made for the domain; the private key never leaves the server.',
  body: Strict({ name: DomainName() }),
  response: DomainSchema,
  handler: async ({ body }, ctx) => domainOut(await createDomain(productOf(ctx), body.name.toLowerCase())),
})

export const domainList = defineOperation({
  id: 'mail_domain_list', method: 'GET', path: '/mail/domains', area: 'mail', auth: 'product',
  summary: "List the product's sending domains, newest first (paginated)",
  query: Strict(pageQuery('domain')),
  response: Strict({ object: Type.Literal('list'), has_more: HasMore(), data: Type.Array(DomainSchema) }),
  handler: ({ query }, ctx) => listObject(query, (page) => listDomains(productOf(ctx), page), domainOut),
})

export const domainGet = defineOperation({
  id: 'mail_domain_get', method: 'GET', path: '/mail/domains/{id}', area: 'mail', auth: 'product',
  summary: 'Get one sending domain with its DNS records and their status',
  params: IdPath('Domain'),
  response: DomainSchema,
  handler: async ({ params }, ctx) => domainOut(await getDomain(productOf(ctx), params.id)),
})

export const domainVerify = defineOperation({
  id: 'mail_domain_verify', method: 'POST', path: '/mail/domains/{id}/verify', area: 'mail', auth: 'product',
  rateClass: 'expensive', // three DNS lookups, each up to MAIL_DNS_TIMEOUT_MS
  summary: 'Look the DNS records up now: the domain becomes verified when all three are found, else failed',
  params: IdPath('Domain'),
  response: DomainSchema,
  handler: async ({ params }, ctx) => domainOut(await verifyDomain(productOf(ctx), params.id)),
})

export const domainDelete = defineOperation({
  id: 'mail_domain_delete', method: 'DELETE', path: '/mail/domains/{id}', area: 'mail', auth: 'product',
  summary: 'Delete a sending domain; keys locked to it are revoked with it; emails already sent keep their records',
  params: IdPath('Domain'),
  response: Strict({ id: Type.String(), deleted: Type.Literal(true) }),
  handler: async ({ params }, ctx) => {
    await deleteDomain(productOf(ctx), params.id)
    return { id: params.id, deleted: true as const }
  },
})

// ---- sending API keys

const KeySchema = Strict({
  id: Uuid(), name: Type.String(), scope: MailScopeName,
  domainId: Type.Union([Uuid(), Type.Null()], { description: 'The one domain the key is locked to; null when not locked' }),
  prefix: Type.String({ description: 'lmk_ plus the six characters after it' }),
  createdAt: Timestamp(),
})
const keyOut = (k: MailKey) => ({ ...k, createdAt: iso(k.createdAt) })

export const apiKeyCreate = defineOperation({
  id: 'mail_apikey_create', method: 'POST', path: '/mail/api-keys', area: 'mail', auth: 'product',
  summary: 'Create a sending API key (lmk_); the secret is returned only here',
  description: `Scopes: ${MAIL_SCOPES.join(', ')}. Rotation: create a key with the same scope (and domainId), deploy it, `
    + 'confirm nothing uses the old key, then delete the old one; both work in between.',
  body: Strict({
    name: Type.String({ minLength: 1, maxLength: 256, description: 'A label only' }),
    scope: MailScopeName,
    domainId: Type.Optional(Type.Union([Type.String({ maxLength: 200 }), Type.Null()], { description: 'Lock the key to one domain of this product' })),
  }),
  response: Strict({
    id: Uuid(), name: Type.String(), scope: MailScopeName, domainId: Type.Union([Uuid(), Type.Null()]),
    prefix: Type.String(), key: Type.String({ description: 'The secret (lmk_...), shown once' }), createdAt: Timestamp(),
  }),
  handler: async ({ body }, ctx) => {
    const { id, name, scope, domainId, prefix, key, createdAt } = await createMailKey(productOf(ctx), body)
    return { id, name, scope, domainId, prefix, key, createdAt: iso(createdAt) }
  },
})

export const apiKeyList = defineOperation({
  id: 'mail_apikey_list', method: 'GET', path: '/mail/api-keys', area: 'mail', auth: 'product',
  summary: "List the product's active sending keys, newest first (prefixes only, never secrets; paginated)",
  query: Strict(pageQuery('API key')),
  response: Strict({ object: Type.Literal('list'), has_more: HasMore(), data: Type.Array(KeySchema) }),
  handler: ({ query }, ctx) => listObject(query, (page) => listMailKeys(productOf(ctx), page), keyOut),
})

export const apiKeyDelete = defineOperation({
  id: 'mail_apikey_delete', method: 'DELETE', path: '/mail/api-keys/{id}', area: 'mail', auth: 'product',
  summary: 'Revoke a sending key: its next use fails 401 on every public worker; emails already sent are unaffected',
  params: IdPath('API key'),
  response: Strict({ id: Type.String(), revoked: Type.Literal(true) }),
  handler: async ({ params }, ctx) => {
    await revokeMailKey(productOf(ctx), params.id)
    return { id: params.id, revoked: true as const }
  },
})

// ---- templates

const TemplateSchema = Strict({
  id: Uuid(), name: Type.String(), subject: Type.String(), html: Type.String(), text: Type.Union([Type.String(), Type.Null()]),
  variables: Type.Array(Type.String(), { description: 'The placeholders the template uses: every one must be given at send time' }),
  createdAt: Timestamp(), updatedAt: Timestamp(),
})
const templateOut = (t: Template) => ({
  ...t, variables: placeholders(t.subject, t.html, t.text), createdAt: iso(t.createdAt), updatedAt: iso(t.updatedAt),
})

export const templateCreate = defineOperation({
  id: 'mail_template_create', method: 'POST', path: '/mail/templates', area: 'mail', auth: 'product',
  summary: 'Create an email template: subject, html and optional text with {{variable}} placeholders',
  body: Strict({ name: TemplateFields.name(), subject: TemplateFields.subject(), html: TemplateFields.html(), text: Type.Optional(TemplateFields.text()) }),
  response: TemplateSchema,
  handler: async ({ body }, ctx) => templateOut(await createTemplate(productOf(ctx), body)),
})

export const templateList = defineOperation({
  id: 'mail_template_list', method: 'GET', path: '/mail/templates', area: 'mail', auth: 'product',
  summary: "List the product's email templates, newest first (paginated)",
  query: Strict(pageQuery('template')),
  response: Strict({ object: Type.Literal('list'), has_more: HasMore(), data: Type.Array(TemplateSchema) }),
  handler: ({ query }, ctx) => listObject(query, (page) => listTemplates(productOf(ctx), page), templateOut),
})

export const templateGet = defineOperation({
  id: 'mail_template_get', method: 'GET', path: '/mail/templates/{id}', area: 'mail', auth: 'product',
  summary: 'Get one email template',
  params: IdPath('Template'),
  response: TemplateSchema,
  handler: async ({ params }, ctx) => templateOut(await getTemplate(productOf(ctx), params.id)),
})

export const templateUpdate = defineOperation({
  id: 'mail_template_update', method: 'PATCH', path: '/mail/templates/{id}', area: 'mail', auth: 'product',
  summary: 'Change an email template; only supplied fields change; emails already sent keep what they were sent with',
  params: IdPath('Template'),
  body: Strict({
    name: Type.Optional(TemplateFields.name()), subject: Type.Optional(TemplateFields.subject()),
    html: Type.Optional(TemplateFields.html()), text: Type.Optional(TemplateFields.text()),
  }),
  response: TemplateSchema,
  handler: async ({ params, body }, ctx) => templateOut(await updateTemplate(productOf(ctx), params.id, body)),
})

export const templateDelete = defineOperation({
  id: 'mail_template_delete', method: 'DELETE', path: '/mail/templates/{id}', area: 'mail', auth: 'product',
  summary: 'Delete an email template',
  params: IdPath('Template'),
  response: Strict({ id: Type.String(), deleted: Type.Literal(true) }),
  handler: async ({ params }, ctx) => {
    await deleteTemplate(productOf(ctx), params.id)
    return { id: params.id, deleted: true as const }
  },
})

// ---- the email log

export const emailsList = defineOperation({
  id: 'mail_emails_list', method: 'GET', path: '/mail/emails', area: 'mail', auth: 'product',
  summary: "List the product's emails, newest first, as the public GET /emails answers them (filtered; paginated by after or before)",
  description: 'Every email of the product, whichever sending key sent it. `after` pages to older emails, `before` to newer '
    + 'ones (not both); a cursor that names no email of this product is 400 on its field. The filters (status, recipient, '
    + 'domain, since, until) combine with and, and page the same way; a domain the product does not have matches nothing.',
  query: Strict(emailPageQuery()),
  response: Strict({ object: Type.Literal('list'), has_more: HasMore(), data: Type.Array(EmailSummarySchema) }),
  handler: ({ query }, ctx) => listEmailLog(wholeProduct(productOf(ctx)), query),
})

export const emailsGet = defineOperation({
  id: 'mail_emails_get', method: 'GET', path: '/mail/emails/{id}', area: 'mail', auth: 'product',
  summary: 'Get one email with its content, its last_event and every event, as the public GET /emails/{id} answers it',
  params: IdPath('Email'),
  response: EmailSchema,
  handler: ({ params }, ctx) => readEmail(wholeProduct(productOf(ctx)), params.id),
})

const EmailDeliverySchema = Strict({
  ...deliveryFields(),
  endpointId: Uuid(), endpointUrl: Type.String({ description: 'Where the endpoint receives events' }),
})
const emailDeliveryOut = (d: EndpointDelivery) => ({ ...deliveryOut(d), endpointId: d.endpointId, endpointUrl: d.endpointUrl })

export const emailsDeliveries = defineOperation({
  id: 'mail_emails_deliveries_list', method: 'GET', path: '/mail/emails/{id}/webhook-deliveries', area: 'mail', auth: 'product',
  summary: "List the webhook deliveries of one email's events to every Mail endpoint, newest first, each with its last attempt (paginated)",
  description: 'The deliveries of email.sent, email.delivered, ... whose data.emailId is this email, replays included; '
    + 'mail_webhooks_deliveries_get on the endpoint shows every attempt. An email that is not the product\'s is 404.',
  params: IdPath('Email'),
  query: Strict(pageQuery('webhook delivery')),
  response: Strict({ object: Type.Literal('list'), has_more: HasMore(), data: Type.Array(EmailDeliverySchema) }),
  handler: async ({ params, query }, ctx) => {
    const productId = productOf(ctx)
    await readEmailSummary(wholeProduct(productId), params.id)
    return listObject(query, (page) => listEmailDeliveries(productId, params.id, page), emailDeliveryOut)
  },
})

// ---- the suppression list

const SuppressionSchema = Strict({
  address: Type.String({ description: 'The address, lower case' }),
  reason: Type.String({ description: "Why it was suppressed: the SMTP server's refusal" }),
  createdAt: Timestamp(),
})
const suppressionOut = (s: Suppression) => ({ ...s, createdAt: iso(s.createdAt) })
// The address is the entry's id; an address that is not on the list (however long) is 404, bounded by the request line.
const Address = (description: string) => Type.String({ minLength: 1, maxLength: 512, description })

export const suppressionsList = defineOperation({
  id: 'mail_suppressions_list', method: 'GET', path: '/mail/suppressions', area: 'mail', auth: 'product',
  summary: "List the product's suppressed addresses, newest first: the mailer skips them (paginated)",
  description: 'An address goes on the list when an SMTP server refuses it for good (a 5xx at RCPT); emails to it are '
    + 'then not attempted (their event says suppressed). `after` is the last address of the previous page.',
  query: Strict(pageQuery('suppressed address', Address('The last address of the previous page: the page after it'))),
  response: Strict({ object: Type.Literal('list'), has_more: HasMore(), data: Type.Array(SuppressionSchema) }),
  handler: ({ query }, ctx) => listObject(query, (page) => listSuppressions(productOf(ctx), page), suppressionOut),
})

export const suppressionsDelete = defineOperation({
  id: 'mail_suppressions_delete', method: 'DELETE', path: '/mail/suppressions/{address}', area: 'mail', auth: 'product',
  summary: 'Remove an address from the suppression list: the next email to it is attempted again',
  params: Strict({ address: Address('The suppressed address (any case)') }),
  response: Strict({ address: Type.String(), deleted: Type.Literal(true) }),
  handler: async ({ params }, ctx) => {
    const removed = await removeSuppression(productOf(ctx), params.address)
    return { address: removed.address, deleted: true as const }
  },
})

export const mailOperations = [
  domainCreate, domainList, domainGet, domainVerify, domainDelete, apiKeyCreate, apiKeyList, apiKeyDelete,
  templateCreate, templateList, templateGet, templateUpdate, templateDelete, emailsList, emailsGet,
  emailsDeliveries, suppressionsList, suppressionsDelete,
]
