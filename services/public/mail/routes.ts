// The Mail public routes, rooted at /{productId}/mail: the sending key in X-Api-Key, then one domain function. Emails
// for every key; domains and templates for full_access keys (services/public/mail/setup.ts).
import { randomUUID } from 'node:crypto'
import { Elysia } from 'elysia'
import type { RateClass } from '../../../shared/catalog/operation'
import { toErrorResponse } from '../../../shared/errors'
import { readBytes } from '../../../shared/http/body'
import { clientIp } from '../../../shared/http/serve'
import { describeError, log } from '../../../shared/log'
import { limitCredentialRate, limitOrganizationRate, organizationOfProduct } from '../../../shared/platform-rates'
import { BODY_LIMIT, readBody } from '../http/body'
import { checkIpRate } from '../http/rate-limit'
import { authenticateMailKey, type MailKeyIdentity } from './key-auth'
import { getEmail, listEmails, queueEmail } from './emails'
import { idempotencyKeyOf } from './idempotency'
import { domains, templates } from './setup'

/** POST /emails carries whole messages (html and text): 1 MiB on the wire. */
export const EMAIL_BODY_LIMIT = 1_048_576

interface Call {
  request: Request
  key: MailKeyIdentity
  body: unknown
  params: Record<string, string>
  query: Record<string, string>
}

/**
 * IP rate limit (429), sending key (401/404), the platform API's rate class for management operations (429, per key and
 * per organization, shared/platform-rates.ts), body limit (413), then the handler; every response has an x-request-id.
 */
function endpoint(read: (request: Request) => Promise<unknown>, handler: (call: Call) => Promise<unknown>, rateClass?: RateClass) {
  return async ({ request, params }: { request: Request; params: Record<string, string | undefined> }) => {
    const requestId = randomUUID()
    try {
      await checkIpRate(clientIp(request))
      const key = await authenticateMailKey(request, String(params.productId ?? '').toLowerCase())
      if (rateClass) await limitRates(rateClass, key)
      const body = await read(request)
      const query = Object.fromEntries(new URL(request.url).searchParams)
      const result = await handler({ request, key, body, params: params as Record<string, string>, query })
      return Response.json(result, { status: 200, headers: { 'x-request-id': requestId } })
    } catch (error) {
      const response = toErrorResponse(error, (e) => log('error', 'public route failed', { requestId, ...describeError(e) }))
      response.headers.set('x-request-id', requestId)
      return response
    }
  }
}

/**
 * Domain creation (an RSA 2048 key pair) and verification (DNS lookups) cost what the platform API's `expensive`
 * operations cost, and the other management writes what its writes cost: the same budgets, per sending key
 * (`mailkey:<id>`) and per organization, so the public surface is no way around the platform API's limits.
 */
async function limitRates(rateClass: RateClass, key: MailKeyIdentity): Promise<void> {
  await limitCredentialRate(rateClass, `mailkey:${key.keyId}`)
  const organizationId = await organizationOfProduct(key.productId)
  if (organizationId) await limitOrganizationRate(rateClass, organizationId)
}

const noBody = async (request: Request) => {
  await readBytes(request, BODY_LIMIT)
  return undefined
}
const emailBody = (request: Request) => readBody(request, EMAIL_BODY_LIMIT)
const jsonBody = (request: Request) => readBody(request, BODY_LIMIT)

const hooks = { parse: 'none' } as const

export const mailRoutes = () =>
  new Elysia({ prefix: '/:productId/mail' })
    .post('/emails', endpoint(emailBody, async ({ key, body, request }) => {
      return queueEmail(key, body, idempotencyKeyOf(request))
    }), hooks)
    .get('/emails', endpoint(noBody, ({ key, query }) => listEmails(key, query)), hooks)
    .get('/emails/:id', endpoint(noBody, ({ key, params }) => getEmail(key, params.id!)), hooks)
    .post('/domains', endpoint(jsonBody, ({ key, body }) => domains.create(key, body), 'expensive'), hooks)
    .get('/domains', endpoint(noBody, ({ key, query }) => domains.list(key, query)), hooks)
    .get('/domains/:id', endpoint(noBody, ({ key, params }) => domains.get(key, params.id!)), hooks)
    .post('/domains/:id/verify', endpoint(noBody, ({ key, params }) => domains.verify(key, params.id!), 'expensive'), hooks)
    .delete('/domains/:id', endpoint(noBody, ({ key, params }) => domains.delete(key, params.id!), 'write'), hooks)
    .post('/templates', endpoint(emailBody, ({ key, body }) => templates.create(key, body), 'write'), hooks)
    .get('/templates', endpoint(noBody, ({ key, query }) => templates.list(key, query)), hooks)
    .get('/templates/:id', endpoint(noBody, ({ key, params }) => templates.get(key, params.id!)), hooks)
    .patch('/templates/:id', endpoint(emailBody, ({ key, params, body }) => templates.update(key, params.id!, body), 'write'), hooks)
    .delete('/templates/:id', endpoint(noBody, ({ key, params }) => templates.delete(key, params.id!), 'write'), hooks)
