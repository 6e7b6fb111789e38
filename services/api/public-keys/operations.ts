// The public keys: Realtime product API keys (rtk_), managed with the owner's login only, under the spec's
// /governance/ routes (the organization area's operations `organization_public-keys_*`).
import Type from 'typebox'
import { defineOperation, productOf, userOf } from '../../../shared/catalog/operation'
import { iso, ProductPath, Strict, Timestamp, Uuid } from '../../../shared/catalog/schemas'
import { HasMore, listed, pageQuery } from '../../../shared/catalog/pagination'
import { PUBLIC_SCOPES, PublicScopeName } from '../../../shared/realtime/public-keys'
import { createPublicKey, listPublicKeys, revokePublicKey, updatePublicKeyScope, type PublicKey } from './keys'

const BASE = '/governance/api/v1/products/{productId}/public-keys'

const scopeSchema = (options: Record<string, unknown> = {}) => Type.Array(PublicScopeName, {
  minItems: 1, maxItems: PUBLIC_SCOPES.length, uniqueItems: true,
  description: `What the key may do on the public routes: ${PUBLIC_SCOPES.join(', ')}`, ...options,
})
const Scope = scopeSchema()
const PublicKeySchema = Strict({
  id: Uuid(), name: Type.String(), scope: Scope, prefix: Type.String({ description: 'rtk_ plus six characters' }),
  environment: Type.String({ description: 'The environment the key works in; it is unknown in every other one' }),
  createdAt: Timestamp(), updatedAt: Timestamp(),
})
const KeyPath = Strict({ productId: Uuid('Product id'), keyId: Uuid('Public key id') })

const keyOut = (k: PublicKey) => ({ ...k, createdAt: iso(k.createdAt), updatedAt: iso(k.updatedAt) })

// Every route here is ownerOnly: only an owner's login session manages product keys; members and platform keys (even with the
// Realtime area) get 403.
export const publicKeysCreate = defineOperation({
  id: 'organization_public-keys_create', method: 'POST', path: BASE, area: 'organization', auth: 'product', ownerOnly: true,
  summary: 'Create a Realtime product API key (rtk_) for this environment; the secret is returned only here',
  params: ProductPath,
  body: Strict({
    name: Type.String({ minLength: 1, maxLength: 256, description: 'A label only' }),
    scope: Type.Optional(scopeSchema({ default: [...PUBLIC_SCOPES] })),
  }),
  response: Strict({
    id: Uuid(), name: Type.String(), scope: Scope, prefix: Type.String(), key: Type.String({ description: 'The secret (rtk_...), shown once' }),
    environment: Type.String(), createdAt: Timestamp(),
  }),
  handler: async ({ body }, ctx) => {
    const created = await createPublicKey(productOf(ctx), body, userOf(ctx))
    const { id, name, scope, prefix, key, environment, createdAt } = created
    return { id, name, scope, prefix, key, environment, createdAt: iso(createdAt) }
  },
})

export const publicKeysList = defineOperation({
  id: 'organization_public-keys_list', method: 'GET', path: BASE, area: 'organization', auth: 'product', ownerOnly: true,
  summary: "List the product's active Realtime API keys of this environment, newest first (prefixes only, never secrets; paginated)",
  params: ProductPath,
  query: Strict(pageQuery('key')),
  response: Strict({ keys: Type.Array(PublicKeySchema), has_more: HasMore() }),
  handler: ({ query }, ctx) => listed('keys', query, (page) => listPublicKeys(productOf(ctx), page), keyOut),
})

export const publicKeysRevoke = defineOperation({
  id: 'organization_public-keys_revoke', method: 'DELETE', path: `${BASE}/{keyId}`, area: 'organization', auth: 'product',
  ownerOnly: true,
  summary: 'Revoke a Realtime API key; it stops working at once on every public worker',
  params: KeyPath,
  response: Strict({ id: Uuid(), revoked: Type.Boolean() }),
  handler: async ({ params }, ctx) => {
    await revokePublicKey(productOf(ctx), params.keyId)
    return { id: params.keyId, revoked: true }
  },
})

export const publicKeysUpdateScope = defineOperation({
  id: 'organization_public-keys_update-scope', method: 'PUT', path: `${BASE}/{keyId}/scope`, area: 'organization',
  auth: 'product', ownerOnly: true,
  summary: 'Replace the scope of an active Realtime API key; takes effect at once on every public worker',
  params: KeyPath,
  body: Strict({ scope: Scope }),
  response: PublicKeySchema,
  handler: async ({ params, body }, ctx) => keyOut(await updatePublicKeyScope(productOf(ctx), params.keyId, body.scope)),
})

export const publicKeyOperations = [publicKeysCreate, publicKeysList, publicKeysRevoke, publicKeysUpdateScope]
