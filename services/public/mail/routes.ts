// The Mail public routes, under /{productId}/mail: the sending key in X-Api-Key, then one domain function. Emails
// for every key; domains and templates for full_access keys (services/public/mail/setup.ts).
import { Elysia } from 'elysia'
import type { RateClass } from '../../../shared/catalog/operation'
import { limitCredentialRate, limitOrganizationRate, organizationOfProduct } from '../../../shared/platform-rates'
import { jsonBody, noBody, readBody } from '../http/body'
import { endpoint, type Guards, ROUTE_HOOKS } from '../http/endpoint'
import { authenticateMailKey, type MailKeyIdentity } from './key-auth'
import { getEmail, listEmails, queueEmail } from './emails'
import { idempotencyKeyOf } from '../../../shared/http/idempotency-key'
import { domains, templates } from './setup'
import { elysiaPath, PUBLIC_ROUTES } from '../catalog'

/** POST /emails carries whole messages (html and text): 1 MiB on the wire. */
export const EMAIL_BODY_LIMIT = 1_048_576

/**
 * The Mail guards of a route: no browsers (sending keys live on servers), an `lmk_` key of the path's product, for
 * management operations the platform API's rate class (429, per key and per organization), then `read`.
 */
const guards = (read: (request: Request) => Promise<unknown>, rateClass?: RateClass): Guards<MailKeyIdentity> => ({
  browser: false,
  authenticate: async (request, productId) => {
    const key = await authenticateMailKey(request, productId)
    if (rateClass) await limitRates(rateClass, key)
    return key
  },
  read,
})

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

const emailBody = (request: Request) => readBody(request, EMAIL_BODY_LIMIT)

const M = PUBLIC_ROUTES.mail

// Paths come from the route's entry in services/public/catalog.ts; its schemas are the ones emails.ts and setup.ts validate with.

export const mailRoutes = () =>
  new Elysia()
    .post(elysiaPath(M.emailsSend), endpoint(guards(emailBody), ({ key, body, request }) => queueEmail(key, body, idempotencyKeyOf(request))), ROUTE_HOOKS)
    .get(elysiaPath(M.emailsList), endpoint(guards(noBody), ({ key, query }) => listEmails(key, query)), ROUTE_HOOKS)
    .get(elysiaPath(M.emailsGet), endpoint(guards(noBody), ({ key, params }) => getEmail(key, params.id!)), ROUTE_HOOKS)
    .post(elysiaPath(M.domainCreate), endpoint(guards(jsonBody, 'expensive'), ({ key, body }) => domains.create(key, body)), ROUTE_HOOKS)
    .get(elysiaPath(M.domainList), endpoint(guards(noBody), ({ key, query }) => domains.list(key, query)), ROUTE_HOOKS)
    .get(elysiaPath(M.domainGet), endpoint(guards(noBody), ({ key, params }) => domains.get(key, params.id!)), ROUTE_HOOKS)
    .post(elysiaPath(M.domainVerify), endpoint(guards(noBody, 'expensive'), ({ key, params }) => domains.verify(key, params.id!)), ROUTE_HOOKS)
    .delete(elysiaPath(M.domainDelete), endpoint(guards(noBody, 'write'), ({ key, params }) => domains.delete(key, params.id!)), ROUTE_HOOKS)
    .post(elysiaPath(M.templateCreate), endpoint(guards(emailBody, 'write'), ({ key, body }) => templates.create(key, body)), ROUTE_HOOKS)
    .get(elysiaPath(M.templateList), endpoint(guards(noBody), ({ key, query }) => templates.list(key, query)), ROUTE_HOOKS)
    .get(elysiaPath(M.templateGet), endpoint(guards(noBody), ({ key, params }) => templates.get(key, params.id!)), ROUTE_HOOKS)
    .patch(elysiaPath(M.templateUpdate), endpoint(guards(emailBody, 'write'), ({ key, params, body }) => templates.update(key, params.id!, body)), ROUTE_HOOKS)
    .delete(elysiaPath(M.templateDelete), endpoint(guards(noBody, 'write'), ({ key, params }) => templates.delete(key, params.id!)), ROUTE_HOOKS)
