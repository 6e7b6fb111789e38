// Organization area: sign-up, login sessions, organizations, products, platform API keys.
import Type from 'typebox'
import { defineOperation, productOf, type Principal } from '../../../shared/catalog/operation'
import { AreaName, iso, ProductPath, Strict, Timestamp, Uuid } from '../../../shared/catalog/schemas'
import { cutPage, HasMore, listed, pageOf, pageQuery, unknownCursor } from '../../../shared/catalog/pagination'
import { forbidden, notFound } from '../../../shared/errors'
import { addMember, listMembers, removeMember, type Member } from './members'
import { createPlatformKey, listPlatformKeys, revokePlatformKey } from './platform-keys'
import { createProduct, getProduct, listOrganizationsOfUser, listProductsOfUser, userCanAccessProduct, type Product } from './products'
import { endSession, getUser, logIn, signUp, startSession, type User } from './users'

const UserSchema = Strict({ id: Uuid(), email: Type.String(), name: Type.Union([Type.String(), Type.Null()]), createdAt: Timestamp() })
const ProductSchema = Strict({ id: Uuid(), name: Type.String(), organizationId: Uuid(), createdAt: Timestamp() })
const OrganizationSchema = Strict({ id: Uuid(), name: Type.String(), role: Type.String(), createdAt: Timestamp() })
const PlatformKeySchema = Strict({
  id: Uuid(), name: Type.String(), areas: Type.Array(AreaName), prefix: Type.String({ description: 'plk_ plus six characters' }),
  createdAt: Timestamp(),
})
const Email = Type.String({ format: 'email', maxLength: 254 })
const Password = Type.String({ minLength: 8, maxLength: 256 })

const userOut = (u: User) => ({ ...u, createdAt: iso(u.createdAt) })
const productOut = (p: Product) => ({ ...p, createdAt: iso(p.createdAt) })
const sessionUser = (principal: Principal | null) => {
  if (principal?.kind !== 'session') throw forbidden('This operation needs a login session')
  return principal.userId
}

export const signup = defineOperation({
  id: 'organization_auth_signup', method: 'POST', path: '/auth/signup', area: 'organization', auth: 'none',
  summary: 'Create an account and its organization, and log in',
  body: Strict({ email: Email, password: Password, name: Type.Optional(Type.String({ minLength: 1, maxLength: 120 })) }),
  response: Strict({ user: UserSchema, organization: Strict({ id: Uuid(), name: Type.String() }), token: Type.String(), expiresAt: Timestamp() }),
  handler: async ({ body }) => {
    const { user, organization } = await signUp(body)
    const session = await startSession(user.id)
    return { user: userOut(user), organization, token: session.token, expiresAt: iso(session.expiresAt) }
  },
})

export const login = defineOperation({
  id: 'organization_auth_login', method: 'POST', path: '/auth/login', area: 'organization', auth: 'none',
  summary: 'Log in with email and password; returns a session bearer token',
  body: Strict({ email: Email, password: Type.String({ minLength: 1, maxLength: 256 }) }),
  response: Strict({ user: UserSchema, token: Type.String(), expiresAt: Timestamp() }),
  handler: async ({ body }) => {
    const { user, token, expiresAt } = await logIn(body.email, body.password)
    return { user: userOut(user), token, expiresAt: iso(expiresAt) }
  },
})

export const logout = defineOperation({
  id: 'organization_auth_logout', method: 'POST', path: '/auth/logout', area: 'organization', auth: 'principal',
  sessionOnly: true, // a platform key is revoked instead; declared, so MCP lists it only for sessions
  summary: 'End the current login session (its token stops working at once)',
  response: Strict({ loggedOut: Type.Boolean() }),
  handler: async (_input, ctx) => {
    if (ctx.principal?.kind !== 'session') throw forbidden('Only a login session can log out') // sessionOnly: narrows the type
    await endSession(ctx.principal.sessionId)
    return { loggedOut: true }
  },
})

export const me = defineOperation({
  id: 'organization_auth_me', method: 'GET', path: '/auth/me', area: 'organization', auth: 'principal',
  summary: 'Who the bearer token is: a login session (with its user) or a platform key (with its product and areas)',
  response: Strict({
    kind: Type.Union([Type.Literal('session'), Type.Literal('platform_key')]),
    user: Type.Union([UserSchema, Type.Null()]),
    productId: Type.Union([Uuid(), Type.Null()]),
    areas: Type.Union([Type.Array(AreaName), Type.Null()]),
  }),
  handler: async (_input, { principal }) => {
    if (principal!.kind === 'platform_key') return { kind: 'platform_key' as const, user: null, productId: principal!.productId, areas: principal!.areas }
    const user = await getUser(principal!.userId)
    return { kind: 'session' as const, user: user && userOut(user), productId: null, areas: null }
  },
})

export const organizationsList = defineOperation({
  id: 'organization_organizations_list', method: 'GET', path: '/organizations', area: 'organization', auth: 'principal',
  sessionOnly: true,
  summary: "List the organizations the logged-in user belongs to, with the user's role, oldest first (paginated)",
  query: Strict(pageQuery('organization')),
  response: Strict({ organizations: Type.Array(OrganizationSchema), has_more: HasMore() }),
  handler: ({ query }, ctx) => listed('organizations', query, (page) => listOrganizationsOfUser(sessionUser(ctx.principal), page), (o) => ({ ...o, createdAt: iso(o.createdAt) })),
})

const MemberSchema = Strict({
  userId: Uuid(), email: Type.String(), name: Type.Union([Type.String(), Type.Null()]),
  role: Type.Union([Type.Literal('owner'), Type.Literal('member')]), joinedAt: Timestamp(),
})
const memberOut = (m: Member) => ({ ...m, joinedAt: iso(m.joinedAt) })
const OrganizationPath = Strict({ organizationId: Uuid('Organization id') })

export const membersList = defineOperation({
  id: 'organization_members_list', method: 'GET', path: '/organizations/{organizationId}/members', area: 'organization',
  auth: 'principal', sessionOnly: true,
  summary: 'List the members of an organization the user belongs to, by when they joined (paginated; after is a userId)',
  params: OrganizationPath,
  query: Strict(pageQuery('member', Uuid('The userId of the last member of the previous page: the page after it'))),
  response: Strict({ members: Type.Array(MemberSchema), has_more: HasMore() }),
  handler: ({ params, query }, ctx) => listed('members', query, (page) => listMembers(params.organizationId, sessionUser(ctx.principal), page), memberOut),
})

export const membersAdd = defineOperation({
  id: 'organization_members_add', method: 'POST', path: '/organizations/{organizationId}/members', area: 'organization',
  auth: 'principal', sessionOnly: true,
  summary: "Add an existing user, by email, to the organization (owners only); they reach all of its products",
  params: OrganizationPath,
  body: Strict({ email: Email, role: Type.Optional(Type.Union([Type.Literal('owner'), Type.Literal('member')])) }),
  response: MemberSchema,
  handler: async ({ params, body }, ctx) => memberOut(await addMember(params.organizationId, sessionUser(ctx.principal), body)),
})

export const membersRemove = defineOperation({
  id: 'organization_members_remove', method: 'DELETE', path: '/organizations/{organizationId}/members/{userId}',
  area: 'organization', auth: 'principal', sessionOnly: true,
  summary: 'Remove a member (owners only, or a member leaving); the last owner cannot be removed',
  params: Strict({ organizationId: Uuid('Organization id'), userId: Uuid('User id') }),
  response: Strict({ userId: Uuid(), removed: Type.Boolean() }),
  handler: async ({ params }, ctx) => {
    await removeMember(params.organizationId, sessionUser(ctx.principal), params.userId)
    return { userId: params.userId, removed: true }
  },
})

export const productsCreate = defineOperation({
  id: 'organization_products_create', method: 'POST', path: '/products', area: 'organization', auth: 'principal',
  sessionOnly: true,
  summary: "Create a product in one of the user's organizations (the first one when organizationId is omitted)",
  body: Strict({ name: Type.String({ minLength: 1, maxLength: 120 }), organizationId: Type.Optional(Uuid()) }),
  response: ProductSchema,
  handler: async ({ body }, ctx) => productOut(await createProduct(sessionUser(ctx.principal), body)),
})

export const productsList = defineOperation({
  id: 'organization_products_list', method: 'GET', path: '/products', area: 'organization', auth: 'principal',
  summary: "List products, newest first (paginated): a session's products across its organizations, or a platform key's own product",
  query: Strict(pageQuery('product')),
  response: Strict({ products: Type.Array(ProductSchema), has_more: HasMore() }),
  handler: async ({ query }, { principal }) => {
    const page = pageOf(query)
    if (principal!.kind === 'platform_key') {
      // One product: nothing comes after it, and no other product is a cursor this key can name.
      if (page.after !== undefined && page.after !== principal!.productId) throw unknownCursor('product')
      const product = page.after === undefined ? await getProduct(principal!.productId) : null
      return { products: product ? [productOut(product)] : [], has_more: false }
    }
    const { items, has_more } = cutPage(await listProductsOfUser(principal!.userId, page), page)
    return { products: items.map(productOut), has_more }
  },
})

export const productsGet = defineOperation({
  id: 'organization_products_get', method: 'GET', path: '/products/{productId}', area: 'organization', auth: 'principal',
  summary: 'Get one product the bearer token can reach',
  params: ProductPath,
  response: ProductSchema,
  handler: async ({ params }, { principal }) => {
    const reachable = principal!.kind === 'platform_key'
      ? principal!.productId === params.productId
      : await userCanAccessProduct(principal!.userId, params.productId)
    const product = reachable ? await getProduct(params.productId) : null
    if (!product) throw notFound('Product')
    return productOut(product)
  },
})

export const platformKeysCreate = defineOperation({
  id: 'organization_platform-keys_create', method: 'POST', path: '/products/{productId}/platform-keys', area: 'organization',
  auth: 'product', ownerOnly: true,
  summary: 'Create a platform API key for the product, bound to a set of areas; the secret is returned only here',
  params: ProductPath,
  body: Strict({ name: Type.String({ minLength: 1, maxLength: 256 }), areas: Type.Array(AreaName, { minItems: 1, maxItems: 13 }) }),
  response: Strict({ ...PlatformKeySchema.properties, key: Type.String({ description: 'The secret (plk_...), shown once' }) }),
  handler: async ({ body }, ctx) => {
    const created = await createPlatformKey(productOf(ctx), body, sessionUser(ctx.principal))
    return { ...created, createdAt: iso(created.createdAt) }
  },
})

export const platformKeysList = defineOperation({
  id: 'organization_platform-keys_list', method: 'GET', path: '/products/{productId}/platform-keys', area: 'organization',
  auth: 'product', ownerOnly: true,
  summary: 'List the active platform API keys of the product, newest first (prefixes only, never secrets; paginated)',
  params: ProductPath,
  query: Strict(pageQuery('platform key')),
  response: Strict({ keys: Type.Array(PlatformKeySchema), has_more: HasMore() }),
  handler: ({ query }, ctx) => listed('keys', query, (page) => listPlatformKeys(productOf(ctx), page), (k) => ({ ...k, createdAt: iso(k.createdAt) })),
})

export const platformKeysRevoke = defineOperation({
  id: 'organization_platform-keys_revoke', method: 'DELETE', path: '/products/{productId}/platform-keys/{keyId}',
  area: 'organization', auth: 'product', ownerOnly: true,
  summary: 'Revoke a platform API key; it stops working at once on every worker',
  params: Strict({ productId: Uuid(), keyId: Uuid() }),
  response: Strict({ id: Uuid(), revoked: Type.Boolean() }),
  handler: async ({ params }, ctx) => {
    await revokePlatformKey(productOf(ctx), params.keyId)
    return { id: params.keyId, revoked: true }
  },
})

export const accountOperations = [
  signup, login, logout, me, organizationsList, membersList, membersAdd, membersRemove, productsCreate, productsList, productsGet,
  platformKeysCreate, platformKeysList, platformKeysRevoke,
]
