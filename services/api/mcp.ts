// The MCP endpoint (streamable HTTP, stateless): every catalog operation is a tool of the same name whose input is
// {path, query, body}; a tool call runs invoke(), exactly as the REST route does, with the same bearer token.
import { randomUUID } from 'node:crypto'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js'
import { CallToolRequestSchema, ListToolsRequestSchema, type Tool } from '@modelcontextprotocol/sdk/types.js'
import { type AnyOperation, bodyRequired } from '../../shared/catalog/operation'
import { isTemporary } from '../../shared/error-catalog'
import { ApiError, badRequest, internalError, toErrorResponse } from '../../shared/errors'
import { parseJson, readBytes } from '../../shared/http/body'
import { clientIp } from '../../shared/http/serve'
import { describeError, log } from '../../shared/log'
import { authenticate } from './accounts/authenticate'
import { invoke } from './invoke'

const json = (schema: unknown) => JSON.parse(JSON.stringify(schema))

export function toolOf(op: AnyOperation): Tool {
  const properties: Record<string, unknown> = {}
  const required: string[] = []
  if (op.params) (properties.path = json(op.params)), required.push('path')
  if (op.query) {
    properties.query = json(op.query)
    if ((op.query as { required?: string[] }).required?.length) required.push('query')
  }
  if (op.body) {
    properties.body = json(op.body)
    if (bodyRequired(op.body)) required.push('body')
  }
  const response = json(op.response)
  return {
    name: op.id,
    title: op.summary,
    description: `${op.summary}. REST: ${op.method} ${op.path}.${op.description ? ' ' + op.description : ''}`,
    inputSchema: { type: 'object', properties, required, additionalProperties: false } as Tool['inputSchema'],
    ...(response.type === 'object' ? { outputSchema: response } : {}),
    annotations: {
      readOnlyHint: op.method === 'GET',
      destructiveHint: op.method === 'DELETE',
      idempotentHint: op.method === 'GET' || op.method === 'PUT' || op.method === 'DELETE',
      openWorldHint: false,
    },
  }
}

const ARGUMENT_PARTS = new Set(['path', 'query', 'body'])

/**
 * tools/call registered with a schema that checks only the method: the SDK's Server then validates the params itself
 * and answers a malformed call with JSON-RPC -32602 (invalid params). Registered with the full schema, the protocol
 * layer's own parse fails first and answers -32603 (internal error), which blames the server for the client's mistake.
 */
const LENIENT_CALL_TOOL = CallToolRequestSchema.pick({ method: true }).passthrough() as unknown as typeof CallToolRequestSchema

export function mcpEndpoint(operations: readonly AnyOperation[], version: string, bodyLimit: number) {
  const tools = operations.map(toolOf)
  const byName = new Map(operations.map((op) => [op.id, op]))

  return async (request: Request): Promise<Response> => {
    const authorization = request.headers.get('authorization')
    try {
      await authenticate(authorization) // the endpoint itself needs a valid bearer token, like every REST operation
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
        instructions: `Platform operations as tools (catalog version ${version}). Each tool takes {path, query, body} as in the REST API; a login session names its product with the X-Product-Id header of the MCP request.`,
      },
    )
    server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools, _meta: { catalogVersion: version } }))
    server.setRequestHandler(LENIENT_CALL_TOOL, async (call) => {
      const op = byName.get(call.params.name)
      const args = (call.params.arguments ?? {}) as Record<string, unknown>
      const requestId = randomUUID()
      try {
        if (!op) throw new ApiError('not_found', `No tool named ${call.params.name}`)
        const unknown = Object.keys(args).filter((k) => !ARGUMENT_PARTS.has(k))
        if (unknown.length) throw badRequest('Tool arguments take only path, query and body', unknown.map((k) => ({ path: `/${k}`, message: 'is not an allowed field' })))
        const result = await invoke(op, { params: args.path as never, query: args.query as never, body: args.body }, { ...caller, requestId })
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

/** A tool error: the REST error body, plus its HTTP status and whether retrying may help, both from the error catalog. */
const toolError = (error: ApiError) => ({ ...error.body(), status: error.status, temporary: isTemporary(error.code) })

function unexpected(error: unknown, tool: string, requestId: string) {
  log('error', 'tool failed', { tool, requestId, ...describeError(error) })
  return toolError(internalError())
}
