// The platform API's MCP endpoint as an agent reaches it: the in-process app served on a port of its own (the SDK's
// transport speaks HTTP), and a client of the official SDK with a bearer token. Shared by the MCP and catalog tests.
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { api } from '../helpers'

export interface McpServer {
  /** `http://127.0.0.1:<port>`: the MCP endpoint is `${base}/mcp`. */
  base: string
  /** A connected client sending `token` (and the product as X-Product-Id). */
  client(token: string, productId?: string): Promise<Client>
  stop(): void
}

export function serveMcp(name: string): McpServer {
  const server = Bun.serve({ port: 0, fetch: (request) => api.handle(request) })
  const base = `http://127.0.0.1:${server.port}`
  return {
    base,
    async client(token, productId) {
      const headers: Record<string, string> = { authorization: `Bearer ${token}` }
      if (productId) headers['x-product-id'] = productId
      const client = new Client({ name, version: '1.0.0' })
      await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers } }))
      return client
    },
    stop: () => server.stop(true),
  }
}
