// Webhook endpoints of a product in one area: create, list, get, update, delete, rotate the secret. Every read and write
// names the product and the area, so an endpoint is invisible from another product and from another area's routes.
import { randomBytes } from 'node:crypto'
import { type PageRequest, PAGE_DEFAULT } from '../catalog/pagination'
import { config } from '../config'
import { insertUnderCeiling, precheckCeiling } from '../db/ceiling'
import { sql } from '../db/client'
import { keysetPage, NEWEST_FIRST } from '../db/keyset'
import { aadOf } from '../db/seal-secrets'
import { badRequest, notFound, unprocessable } from '../errors'
import { isUuid } from '../ids'
import { open, seal } from '../secrets'
import { ALL_KINDS, EVENT_KINDS, type WebhookArea } from './events'
import { SECRET_PREFIX } from './signature'
import { checkWebhookUrl, serversResolve, type UrlPolicy } from './url-policy'
import { isPgError } from '../db/error-codes'

/** Standard Webhooks secrets: `whsec_` (SECRET_PREFIX) then the base64 of 32 random bytes. */
const SECRET_BYTES = 32
/** How long a rotated-out secret still signs (beside the new one), so receivers can switch without losing events. */
export const PREVIOUS_SECRET_HOURS = 24
/** Most characters of an endpoint's description. */
export const DESCRIPTION_MAX = 256

export interface Endpoint {
  id: string
  url: string
  description: string | null
  /** Kinds of the endpoint's area, or ['*'] for all of them. */
  eventKinds: string[]
  enabled: boolean
  /** Why the platform disabled it (set by delivery); null otherwise. */
  disabledReason: string | null
  /** `whsec_` and the six characters after it: enough to tell secrets apart, never enough to sign. */
  secretPrefix: string
  /** Until when the secret replaced by the last rotation still signs; null when there is none. */
  previousSecretExpiresAt: Date | null
  createdAt: Date
  updatedAt: Date
}

export interface EndpointInput {
  url: string
  description?: string | null
  eventKinds: string[]
  enabled?: boolean
}

const endpointOut = (row: Record<string, any>): Endpoint => ({
  id: row.id,
  url: row.url,
  description: row.description,
  eventKinds: row.event_kinds,
  enabled: row.enabled,
  disabledReason: row.disabled_reason,
  secretPrefix: row.secret_prefix,
  previousSecretExpiresAt: row.previous_secret_expires_at,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
})

// An expired previous secret is not shown: it signs nothing. Judged by the database's clock, as signing is.
const COLUMNS = sql`id, url, description, event_kinds, enabled, disabled_reason, secret_prefix,
  case when previous_secret_expires_at > now() then previous_secret_expires_at end as previous_secret_expires_at, created_at, updated_at`

/** The policy URLs are checked under: the deployment's flag and DNS timeout. */
export const urlPolicy = (): UrlPolicy => ({
  allowPrivate: config.webhooks.allowPrivateUrls, dnsTimeoutMs: config.webhooks.dnsTimeoutMs,
  resolve: serversResolve(config.webhooks.dnsServers, config.webhooks.dnsTimeoutMs),
})

/** The URL normalized, or the 400/422 naming /body/url and the rule it breaks. */
async function checkedUrl(url: string, policy: UrlPolicy): Promise<string> {
  const verdict = await checkWebhookUrl(url, policy)
  if (verdict.ok) return verdict.url
  const fields = [{ path: '/body/url', message: verdict.reason }]
  throw verdict.status === 400 ? badRequest(`url ${verdict.reason}`, fields) : unprocessable(`url ${verdict.reason}`, fields)
}

/** Kinds must be of the endpoint's area, each once; `*` stands alone. Schemas check the shape; this the meaning. */
function checkedKinds(area: WebhookArea, kinds: string[]): string[] {
  const known: readonly string[] = EVENT_KINDS[area]
  if (kinds.includes(ALL_KINDS)) {
    if (kinds.length > 1) throw badRequest('eventKinds: "*" stands alone', [{ path: '/body/eventKinds', message: '"*" must be the only kind' }])
    return kinds
  }
  const index = kinds.findIndex((kind) => !known.includes(kind))
  if (index >= 0) {
    throw badRequest(`eventKinds: "${kinds[index]}" is not a ${area} event kind`,
      [{ path: `/body/eventKinds/${index}`, message: `must be one of ${known.join(', ')} or "*"` }])
  }
  if (new Set(kinds).size !== kinds.length) throw badRequest('eventKinds: each kind once', [{ path: '/body/eventKinds', message: 'must not repeat a kind' }])
  return kinds
}

function checkedDescription(description: string | null | undefined): string | null {
  if (description == null) return null
  if ([...description].length > DESCRIPTION_MAX) {
    throw badRequest(`description is over ${DESCRIPTION_MAX} characters`, [{ path: '/body/description', message: `must be at most ${DESCRIPTION_MAX} characters` }])
  }
  return description
}

/** A new secret: its text (shown once), its visible prefix and the 32 bytes sealed for the endpoint's row. */
function newSecret(id: string) {
  const bytes = randomBytes(SECRET_BYTES)
  const text = SECRET_PREFIX + bytes.toString('base64')
  return { text, prefix: text.slice(0, SECRET_PREFIX.length + 6), sealed: seal(bytes, aadOf('webhook_endpoints', id)) }
}

/** Creates an endpoint; its secret is in the answer only. At most PRODUCT_MAX_WEBHOOK_ENDPOINTS per product and area. */
export async function createEndpoint(
  productId: string, area: WebhookArea, input: EndpointInput, policy: UrlPolicy = urlPolicy(),
): Promise<Endpoint & { secret: string }> {
  const kinds = checkedKinds(area, input.eventKinds)
  const description = checkedDescription(input.description)
  const count = (q: typeof sql) =>
    q<{ n: number }[]>`select count(*)::int as n from webhook_endpoints where product_id = ${productId} and area = ${area}`
  await precheckCeiling('webhookEndpoints', count) // a product at its ceiling does not get to spend a DNS lookup
  const url = await checkedUrl(input.url, policy)
  const id = crypto.randomUUID()
  const secret = newSecret(id)
  const [row] = await insertUnderCeiling(productId, 'webhookEndpoints', count, (tx) => tx`
    insert into webhook_endpoints ${sql({
      id, product_id: productId, area, url, description, event_kinds: kinds, enabled: input.enabled ?? true,
      secret_sealed: secret.sealed, secret_prefix: secret.prefix,
    })}
    returning ${COLUMNS}`)
  return { ...endpointOut(row!), secret: secret.text }
}

/** The product's endpoints of the area, newest first. */
export async function listEndpoints(productId: string, area: WebhookArea, page: PageRequest = { limit: PAGE_DEFAULT }): Promise<Endpoint[]> {
  const rows = await keysetPage({
    what: 'webhook endpoint', order: NEWEST_FIRST,
    cursor: (after) => sql`from webhook_endpoints where id = ${after} and product_id = ${productId} and area = ${area}`,
    rows: sql`select ${COLUMNS} from webhook_endpoints where product_id = ${productId} and area = ${area}`,
  }, page)
  return rows.map(endpointOut)
}

/** An id that is not a uuid names nothing: 404, as another product's or another area's endpoint. */
const endpointNotFound = () => notFound('Webhook endpoint')

export async function getEndpoint(productId: string, area: WebhookArea, id: string): Promise<Endpoint> {
  if (!isUuid(id)) throw endpointNotFound()
  const [row] = await sql`select ${COLUMNS} from webhook_endpoints where id = ${id} and product_id = ${productId} and area = ${area}`
  if (!row) throw endpointNotFound()
  return endpointOut(row)
}

/** Changes the supplied fields only. Enabling clears the platform's disabled reason; the URL is checked again. */
export async function updateEndpoint(
  productId: string, area: WebhookArea, id: string, input: Partial<EndpointInput>, policy: UrlPolicy = urlPolicy(),
): Promise<Endpoint> {
  if (!isUuid(id)) throw endpointNotFound()
  const columns: Record<string, unknown> = {}
  if (input.eventKinds !== undefined) columns.event_kinds = checkedKinds(area, input.eventKinds)
  if (input.description !== undefined) columns.description = checkedDescription(input.description)
  // Another product's id costs no DNS lookup: the endpoint is found first.
  if (input.url !== undefined) columns.url = await getEndpoint(productId, area, id).then(() => checkedUrl(input.url!, policy))
  if (input.enabled !== undefined) {
    columns.enabled = input.enabled
    // Enabling starts afresh: no reason shown, and the failing streak that disables an endpoint counts from zero.
    if (input.enabled) Object.assign(columns, { disabled_reason: null, failing_since: null })
  }
  if (Object.keys(columns).length === 0) return getEndpoint(productId, area, id)
  const [row] = await sql`
    update webhook_endpoints set ${sql(columns)}, updated_at = now()
    where id = ${id} and product_id = ${productId} and area = ${area}
    returning ${COLUMNS}`
  if (!row) throw endpointNotFound()
  return endpointOut(row)
}

export async function deleteEndpoint(productId: string, area: WebhookArea, id: string): Promise<void> {
  if (!isUuid(id)) throw endpointNotFound()
  // The delete cascades to the endpoint's deliveries and attempts, which a webhooks process may be locking in the
  // other order while it records an attempt: PostgreSQL then cancels one of the two (deadlock_detected, 40P01). The
  // delete is one statement that changed nothing when cancelled, so it is run again (seen in CI: a 500 otherwise).
  for (let attempt = 1; ; attempt++) {
    try {
      const [row] = await sql`delete from webhook_endpoints where id = ${id} and product_id = ${productId} and area = ${area} returning id`
      if (!row) throw endpointNotFound()
      return
    } catch (error) {
      if (!isPgError(error, 'deadlockDetected') || attempt >= 3) throw error
    }
  }
}

/**
 * A new secret, answered once; the one it replaces keeps signing for PREVIOUS_SECRET_HOURS (Svix's overlap), moved
 * sealed as it was (both are sealed for the same row). A second rotation within the overlap drops the oldest.
 */
export async function rotateEndpointSecret(productId: string, area: WebhookArea, id: string): Promise<Endpoint & { secret: string }> {
  if (!isUuid(id)) throw endpointNotFound()
  const secret = newSecret(id)
  const [row] = await sql`
    update webhook_endpoints set
      previous_secret_sealed = secret_sealed,
      previous_secret_expires_at = now() + make_interval(hours => ${PREVIOUS_SECRET_HOURS}),
      secret_sealed = ${secret.sealed}, secret_prefix = ${secret.prefix}, updated_at = now()
    where id = ${id} and product_id = ${productId} and area = ${area}
    returning ${COLUMNS}`
  if (!row) throw endpointNotFound()
  return { ...endpointOut(row), secret: secret.text }
}

/**
 * The secrets an endpoint signs with now (the webhooks process): the current one, and the previous one while its
 * overlap lasts. Texts as shown to the product (`whsec_...`). An expired previous secret is ignored here and stays in
 * its row, unopened, until the next rotation overwrites it: nothing reads it, so clearing it would buy nothing.
 */
export async function endpointSecrets(id: string): Promise<string[]> {
  const [row] = await sql`
    select secret_sealed, case when previous_secret_expires_at > now() then previous_secret_sealed end as previous_sealed
    from webhook_endpoints where id = ${id}`
  if (!row) throw endpointNotFound()
  const aad = aadOf('webhook_endpoints', id)
  return [row.secret_sealed, row.previous_sealed].filter(Boolean)
    .map((sealed) => SECRET_PREFIX + open(Buffer.from(sealed), aad).toString('base64'))
}
