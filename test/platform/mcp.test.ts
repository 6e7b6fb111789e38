// The MCP endpoint as an agent meets it: tools/list lists what its credential may call, compactly; tool arguments may be
// flat; an unknown tool is a JSON-RPC error as the specification says.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js'
import { operations } from '../../services/api/catalog'
import { call, newPlatformKey, newProduct, newUser, ok } from '../helpers'
import { type McpServer, serveMcp } from './mcp-client'

let mcp: McpServer

beforeAll(() => {
  mcp = serveMcp('mcp-test')
})
afterAll(() => mcp.stop())

const mcpClient = (token: string, productId?: string) => mcp.client(token, productId)

/** The bytes of a tools/list answer as it crosses the wire: what an agent reads into its context. */
async function listBytes(token: string, productId?: string) {
  const response = await call('POST', '/mcp', {
    token, productId, headers: { accept: 'application/json, text/event-stream' }, body: { jsonrpc: '2.0', id: 1, method: 'tools/list' },
  })
  expect(response.status).toBe(200)
  return { bytes: JSON.stringify(response.body).length, names: (response.body.result.tools as { name: string }[]).map((t) => t.name) }
}

const result = (called: unknown) => JSON.parse(((called as { content: { text: string }[] }).content[0]!.text))

test('a platform key lists only what it may call: its areas, no sign-up, login or key management; the rest answer 403', async () => {
  const owner = await newProduct()
  const key = await newPlatformKey(owner, ['mail'])
  const client = await mcpClient(key.key)
  const names = (await client.listTools()).tools.map((t) => t.name).sort()
  const mailIds = operations.filter((op) => op.area === 'mail').map((op) => op.id)
  // the key's own product and identity, and every Mail operation; nothing of another area, nothing session-only
  expect(names).toEqual([...mailIds, 'organization_auth_me', 'organization_products_get', 'organization_products_list'].sort())
  for (const hidden of ['organization_auth_signup', 'organization_auth_login', 'organization_auth_logout', 'organization_platform-keys_create', 'realtime_messages_publish']) {
    expect(names).not.toContain(hidden)
  }
  // every tool left out, bar the two that take no token, is one REST refuses this key whatever the input
  for (const op of operations.filter((o) => !names.includes(o.id) && o.auth !== 'none')) {
    const refused = await client.callTool({ name: op.id, arguments: {} })
    expect([op.id, result(refused).status]).toEqual([op.id, 403])
  }
  await client.close()
})

test('a login session lists every operation that takes a bearer token', async () => {
  const owner = await newProduct()
  const { names } = await listBytes(owner.token, owner.productId)
  expect(names.sort()).toEqual(operations.filter((op) => op.auth !== 'none').map((op) => op.id).sort())
})

test('a member (not an owner) naming its product lists no owner-only tool, and calling one anyway is 403; naming no product lists them', async () => {
  const owner = await newProduct()
  const teammate = await newUser()
  ok(await call('POST', `/organizations/${owner.organizationId}/members`, { token: owner.token, body: { email: teammate.email } }), 'add member')
  const ownerOnly = operations.filter((op) => op.ownerOnly).map((op) => op.id)
  expect(ownerOnly.length).toBeGreaterThan(0)
  const { names } = await listBytes(teammate.token, owner.productId)
  expect(names.filter((name) => ownerOnly.includes(name))).toEqual([])
  expect(names).toContain('realtime_namespaces_list')
  const client = await mcpClient(teammate.token, owner.productId)
  const refused = await client.callTool({ name: 'organization_public-keys_list', arguments: { productId: owner.productId } })
  expect(result(refused).status).toBe(403)
  await client.close()
  // The role is per product: without one named, the list cannot know it (an owner-only tool's path may name a product
  // the user owns), and the owner's own session lists them all.
  expect((await listBytes(teammate.token)).names).toEqual(expect.arrayContaining(ownerOnly))
  expect((await listBytes(owner.token, owner.productId)).names).toEqual(expect.arrayContaining(ownerOnly))
})

test('tools/list is a fraction of the catalog: under 64 KiB for a session, under 20 KB for a one-area key', async () => {
  // Measured when the list was made lean (docs/api.md#mcp): 183,926 bytes for any credential before; 61,738 for a
  // session and 15,030 for a Mail key after. With five more operations the session's list reached 66,655; leaner
  // descriptions and schemas (no top-level additionalProperties) took it back under the ceiling.
  const owner = await newProduct()
  const key = await newPlatformKey(owner, ['mail'])
  expect((await listBytes(owner.token, owner.productId)).bytes).toBeLessThan(64 * 1024)
  expect((await listBytes(key.key)).bytes).toBeLessThan(20_000)
  const client = await mcpClient(key.key)
  const send = (await client.listTools()).tools.find((t) => t.name === 'mail_emails_list')!
  // what an agent needs to call it right stays: the fields, their bounds and meaning, and that it only reads
  expect((send.inputSchema.properties as any).limit).toMatchObject({ type: 'integer', minimum: 1, maximum: 100, description: expect.any(String) })
  expect(send.annotations).toEqual({ readOnlyHint: true })
  expect(send.outputSchema).toBeUndefined()
  await client.close()
})

test('flat arguments work where every field has one place; the nested form still works; a mix is refused naming the field', async () => {
  const owner = await newProduct()
  const client = await mcpClient(owner.token, owner.productId)
  const tools = (await client.listTools()).tools
  const create = tools.find((t) => t.name === 'realtime_namespaces_create')!
  expect(create.inputSchema.required).toEqual(['name'])
  const made = await client.callTool({ name: 'realtime_namespaces_create', arguments: { name: 'flat', history: { ttlSeconds: 300, size: 10 } } })
  expect(made.isError).toBeFalsy()
  expect(made.structuredContent).toMatchObject({ name: 'flat' })

  const flat = await client.callTool({ name: 'realtime_messages_publish', arguments: { channel: 'flat:a', data: { via: 'flat' } } })
  expect(flat.isError).toBeFalsy()
  const nested = await client.callTool({ name: 'realtime_messages_publish', arguments: { body: { channel: 'flat:a', data: { via: 'nested' } } } })
  expect(nested.isError).toBeFalsy()
  // a path parameter and a query field, flat
  const read = await client.callTool({ name: 'realtime_history_read', arguments: { channel: 'flat:a', last_n: 2 } })
  expect((read.structuredContent as any).entries.map((e: any) => e.data)).toEqual([{ via: 'flat' }, { via: 'nested' }])

  const mixed = await client.callTool({ name: 'realtime_messages_publish', arguments: { body: { channel: 'flat:a', data: 1 }, data: 2 } })
  expect(mixed.isError).toBe(true)
  expect(result(mixed)).toMatchObject({ error: 'validation_failed', status: 400, fields: [{ path: '/body' }] })
  const stray = await client.callTool({ name: 'realtime_messages_publish', arguments: { channel: 'flat:a', data: 3, colour: 'red' } })
  expect(result(stray)).toMatchObject({ error: 'validation_failed', fields: [{ path: '/colour', message: 'is not an allowed field' }] })
  const missing = await client.callTool({ name: 'realtime_messages_publish', arguments: { channel: 'flat:a' } })
  expect(result(missing)).toMatchObject({ error: 'validation_failed', fields: [{ path: '/body/data' }] })
  await client.close()
})

test('a tool with a field named like a part (an insight has a query) takes only the nested form, and says so', async () => {
  const owner = await newProduct()
  const client = await mcpClient(owner.token, owner.productId)
  const insight = (await client.listTools()).tools.find((t) => t.name === 'analytics_insight_create')!
  expect(Object.keys(insight.inputSchema.properties!)).toEqual(['body'])
  const refused = await client.callTool({ name: 'analytics_insight_create', arguments: { name: 'x', kind: 'metric', query: {} } })
  expect(result(refused)).toMatchObject({ error: 'validation_failed', message: 'analytics_insight_create takes only path, query and body' })
  await client.close()
})

test('an unknown tool is a JSON-RPC error -32602 (invalid params), not a tool result', async () => {
  const owner = await newProduct()
  const client = await mcpClient(owner.token)
  const error = await client.callTool({ name: 'no_such_tool', arguments: {} }).catch((e: unknown) => e)
  expect(error).toBeInstanceOf(McpError)
  expect((error as McpError).code).toBe(ErrorCode.InvalidParams)
  expect((error as McpError).message).toContain('Unknown tool: no_such_tool')
  await client.close()
})
