import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Type from 'typebox'
import { catalogVersion } from '../../services/api/openapi'
import { CATALOG_VERSION, operations } from '../../services/api/catalog'
import { ERROR_CODES } from '../../shared/error-catalog'
import { call, newPlatformKey, newProduct, ok } from '../helpers'
import { type McpServer, serveMcp } from './mcp-client'

let mcp: McpServer
let base: string

beforeAll(() => {
  mcp = serveMcp('catalog-test')
  base = mcp.base
})
afterAll(() => mcp.stop())

const mcpClient = (token: string, productId?: string) => mcp.client(token, productId)

describe('OpenAPI document', () => {
  test('is OpenAPI 3.1.0 with the areas as tags, bearerAuth, the Error schema and the catalog version', async () => {
    const { status, body } = await call('GET', '/openapi.json')
    expect(status).toBe(200)
    expect(body.openapi).toBe('3.1.0')
    expect(body.info.version).toBe(CATALOG_VERSION)
    expect(body.info.version).toMatch(/^[0-9a-f]{16}$/)
    expect(body.tags.map((t: any) => t.name)).toEqual(expect.arrayContaining(['Analytics', 'Mail', 'Organization', 'Realtime']))
    expect(body.components.securitySchemes.bearerAuth).toEqual(expect.objectContaining({ type: 'http', scheme: 'bearer' }))
    expect(body.components.schemas.Error.required).toEqual(['error', 'message'])
    expect(body.components.schemas.Error.properties.error.enum).toEqual(ERROR_CODES) // every code of the one catalog
    for (const [path, methods] of Object.entries<any>(body.paths)) {
      for (const op of Object.values<any>(methods)) {
        expect(op.responses.default.content['application/json'].schema.$ref).toBe('#/components/schemas/Error')
        const bearer = op.security.length > 0
        expect(bearer || ['organization_auth_signup', 'organization_auth_login'].includes(op.operationId)).toBe(true)
        expect(path.startsWith('/')).toBe(true)
        // every parameter the template names is declared as a path parameter of that name, and no other one
        const templated = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort()
        expect([op.operationId, op.parameters.filter((p: any) => p.in === 'path').map((p: any) => p.name).sort()]).toEqual([op.operationId, templated])
      }
    }
    // OpenAPI 3.1 forbids templated paths that differ only in their parameter names (they are the same path)
    const shapes = Object.keys(body.paths).map((path) => path.replace(/\{\w+\}/g, '{}'))
    expect(shapes.filter((shape, i) => shapes.indexOf(shape) !== i)).toEqual([])
    const dashboard = body.paths['/analytics/dashboards/{idOrSlug}']
    expect(Object.keys(dashboard).sort()).toEqual(['delete', 'get', 'patch'])
    expect(dashboard.patch.parameters.find((p: any) => p.in === 'path').schema.format).toBe('uuid')
  })

  test('the version is a hash of the catalog: it changes whenever an operation changes', () => {
    const [first, ...rest] = operations
    expect(catalogVersion(operations)).toBe(CATALOG_VERSION)
    expect(catalogVersion([{ ...first!, summary: first!.summary + '!' }, ...rest])).not.toBe(CATALOG_VERSION)
    expect(catalogVersion([{ ...first!, body: Type.Object({ x: Type.String() }) }, ...rest])).not.toBe(CATALOG_VERSION)
    expect(catalogVersion(rest)).not.toBe(CATALOG_VERSION)
    expect(catalogVersion([...rest, first!])).toBe(CATALOG_VERSION) // order does not matter
  })
})

describe('MCP endpoint', () => {
  test('needs a valid bearer token', async () => {
    const response = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    })
    expect(response.status).toBe(401)
    expect(((await response.json()) as any).error).toBe('unauthorized')
  })

  test('the tool names are the OpenAPI operation ids that take a bearer token, and the catalog version is visible', async () => {
    const owner = await newProduct()
    const client = await mcpClient(owner.token)
    expect(client.getServerVersion()?.version).toBe(CATALOG_VERSION)
    const listed = await client.listTools()
    expect((listed._meta as any)?.catalogVersion).toBe(CATALOG_VERSION)
    const toolNames = listed.tools.map((t) => t.name).sort()
    const openapi = ok(await call('GET', '/openapi.json'), 'GET /openapi.json').body
    // sign-up and login take no token: a caller of /mcp already holds one (test/platform/mcp.test.ts)
    const operationIds = Object.values<any>(openapi.paths).flatMap((methods) => Object.values<any>(methods))
      .filter((op) => op.security.length > 0).map((op) => op.operationId).sort()
    expect(toolNames).toEqual(operationIds)
    expect(new Set(toolNames).size).toBe(toolNames.length)
    const create = listed.tools.find((t) => t.name === 'organization_platform-keys_create')!
    expect(create.inputSchema.required).toEqual(['productId', 'name', 'areas']) // flat: each field has one place
    expect((create.inputSchema.properties as any).areas.type).toBe('array')
    await client.close()
  })

  test('a tool call returns the same result as the REST call', async () => {
    const owner = await newProduct()
    const key = await newPlatformKey(owner, ['organization'])
    const rest = ok(await call('GET', `/products/${owner.productId}`, { token: owner.token }), 'get product over REST')
    const client = await mcpClient(owner.token)
    const viaTool = await client.callTool({ name: 'organization_products_get', arguments: { path: { productId: owner.productId } } })
    expect(viaTool.isError).toBeFalsy()
    expect(viaTool.structuredContent).toEqual(rest.body)
    expect(JSON.parse((viaTool.content as any)[0].text)).toEqual(rest.body)

    const listRest = ok(await call('GET', `/products/${owner.productId}/platform-keys`, { token: owner.token }), 'list platform keys over REST')
    const listTool = await client.callTool({ name: 'organization_platform-keys_list', arguments: { path: { productId: owner.productId } } })
    expect(listTool.structuredContent).toEqual(listRest.body)
    expect((listTool.structuredContent as any).keys[0].id).toBe(key.id)
    await client.close()
  })

  test('tool errors carry the same error body and status as REST', async () => {
    const owner = await newProduct()
    const stranger = await newProduct()
    const client = await mcpClient(owner.token)
    const notFound = await client.callTool({ name: 'organization_products_get', arguments: { path: { productId: stranger.productId } } })
    expect(notFound.isError).toBe(true)
    expect(JSON.parse((notFound.content as any)[0].text)).toMatchObject({ error: 'not_found', status: 404 })
    expect(JSON.parse((notFound.content as any)[0].text).temporary).toBe(false) // from the error catalog, as the status
    const invalid = await client.callTool({ name: 'organization_products_create', arguments: { body: { name: '' } } })
    const body = JSON.parse((invalid.content as any)[0].text)
    expect(body).toMatchObject({ error: 'validation_failed', status: 400 })
    expect(body.fields).toEqual([{ path: '/body/name', message: expect.any(String) }])
    await client.close()
  })

  test('a login session names its product with X-Product-Id on the MCP request', async () => {
    const owner = await newProduct()
    const client = await mcpClient(owner.token, owner.productId)
    const created = await client.callTool({
      name: 'organization_platform-keys_create',
      arguments: { path: { productId: owner.productId }, body: { name: 'via mcp', areas: ['mail'] } },
    })
    expect(created.isError).toBeFalsy()
    expect((created.structuredContent as any).key).toMatch(/^plk_/)
    await client.close()
  })
})

test('the platform API answers browsers from any origin without sharing credentials (bearer tokens only)', async () => {
  const preflight = await call('OPTIONS', '/products', {
    headers: { origin: 'https://dashboard.example', 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization' },
  })
  expect(preflight.status).toBeLessThan(300)
  expect(preflight.headers.get('access-control-allow-origin')).toBeTruthy()
  expect(preflight.headers.get('access-control-allow-credentials')).not.toBe('true')
})
