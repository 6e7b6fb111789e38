// The MCP endpoint (streamable HTTP, stateless): every catalog operation the bearer token may call is a tool of the same
// name (mcp-tools.ts makes it); a tool call runs invoke(), exactly as the REST route does, with the same bearer token.
import { randomUUID } from 'node:crypto'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js'
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError, type Tool } from '@modelcontextprotocol/sdk/types.js'
import type { AnyOperation, Principal } from '../../shared/catalog/operation'
import { isTemporary } from '../../shared/error-catalog'
import { ApiError, internalError, toErrorResponse } from '../../shared/errors'
import { parseJson, readBytes } from '../../shared/http/body'
import { clientIp } from '../../shared/http/serve'
import { isUuid } from '../../shared/ids'
import { describeError, log } from '../../shared/log'
import { authenticate } from './accounts/authenticate'
import { productAccess } from './accounts/products'
import { refusal } from './authorize'
import { invoke } from './invoke'
import { inputOf, toolOf } from './mcp-tools'

/**
 * tools/call registered with a schema that checks only the method: the SDK's Server then validates the params itself
 * and answers a malformed call with JSON-RPC -32602 (invalid params). Registered with the full schema, the protocol
 * layer's own parse fails first and answers -32603 (internal error), which blames the server for the client's mistake.
 */
const LENIENT_CALL_TOOL = CallToolRequestSchema.pick({ method: true }).passthrough() as unknown as typeof CallToolRequestSchema

export function mcpEndpoint(operations: readonly AnyOperation[], version: string, bodyLimit: number) {
  const tools = operations.map((op) => ({ op, tool: toolOf(op) }))
  const byName = new Map(operations.map((op) => [op.id, op]))

  return async (request: Request): Promise<Response> => {
    const authorization = request.headers.get('authorization')
    let principal: Principal
    try {
      principal = await authenticate(authorization) // the endpoint itself needs a valid bearer token, like every REST operation
    } catch (error) {
      const response = toErrorResponse(error)
      response.headers.set('www-authenticate', 'Bearer')
      return response
    }
    let parsedBody: unknown
    if (request.method === 'POST') {
      try {
        parsedBody = parseJson(await readBytes(request, bodyLimit))
      } catch (error) {
        return toErrorResponse(error)
      }
    }
    const caller = { authorization, productId: request.headers.get('x-product-id'), clientIp: clientIp(request) }

    const server = new Server(
      { name: 'platform', version },
      {
        capabilities: { tools: { listChanged: false } },
        instructions: `Platform operations as tools (catalog version ${version}). Arguments are the tool's fields, or {path, query, body} as in the REST API; a login session names its product with the X-Product-Id header of the MCP request.`,
      },
    )
    server.setRequestHandler(ListToolsRequestSchema, async () => ({
      tools: toolsFor(tools, principal, await ownerOnlyRefused(principal, caller.productId)), _meta: { catalogVersion: version },
    }))
    server.setRequestHandler(LENIENT_CALL_TOOL, async (call) => {
      const op = byName.get(call.params.name)
      // The specification's answer to a tool name the server does not have: a JSON-RPC error, -32602 invalid params.
      // A tool that exists but is not listed for this credential is called and refused as REST refuses it (403).
      if (!op) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${call.params.name}`)
      const args = (call.params.arguments ?? {}) as Record<string, unknown>
      const requestId = randomUUID()
      try {
        const result = await invoke(op, inputOf(op, args), { ...caller, requestId })
        return { content: [{ type: 'text', text: JSON.stringify(result) }], structuredContent: result as Record<string, unknown> }
      } catch (error) {
        const body = error instanceof ApiError ? toolError(error) : unexpected(error, call.params.name, requestId)
        return { isError: true, content: [{ type: 'text', text: JSON.stringify(body) }] }
      }
    })
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true })
    await server.connect(transport)
    const response = await transport.handleRequest(request, { parsedBody })
    void server.close()
    return response
  }
}

/**
 * The tools this credential may call: what authorize.ts lets through, less the operations that take no bearer token
 * (sign-up, login): a caller here already holds one, and less the owner-only ones when the session names (X-Product-Id)
 * a product of an organization it is only a member of, which invoke() refuses 403 for it.
 */
const toolsFor = (tools: { op: AnyOperation; tool: Tool }[], principal: Principal, withoutOwnerOnly: boolean): Tool[] =>
  tools.filter(({ op }) => op.auth !== 'none' && !refusal(op, principal) && !(withoutOwnerOnly && op.ownerOnly)).map(({ tool }) => tool)

/**
 * Whether a session's owner-only tools are refused on the product it names: its role there (services/api/invoke.ts
 * decides the same per call). A session naming no product, or one it cannot see, lists them: the role is per product,
 * and a product path may name one the user owns.
 */
async function ownerOnlyRefused(principal: Principal, productId: string | null): Promise<boolean> {
  if (principal.kind !== 'session' || !productId || !isUuid(productId)) return false
  const access = await productAccess(principal.userId, productId.toLowerCase())
  return access?.role === 'member'
}

/** A tool error: the REST error body, plus its HTTP status and whether retrying may help, both from the error catalog. */
const toolError = (error: ApiError) => ({ ...error.body(), status: error.status, temporary: isTemporary(error.code) })

function unexpected(error: unknown, tool: string, requestId: string) {
  log('error', 'tool failed', { tool, requestId, ...describeError(error) })
  return toolError(internalError())
}
