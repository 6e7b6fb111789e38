// A TCP proxy in front of PostgreSQL that counts the statements a process executes through it: it reads the client's
// side of the wire protocol (simple Query, and Parse/Bind/Execute of the extended protocol postgres.js uses) and records
// the SQL text of each execution. Tests use it to prove a path costs no query, by measuring, not by assuming. It can
// also play a server that refuses every new connection as one starting up does (FATAL 57P03), counting the attempts.
import { connect, createServer, type Server, type Socket } from 'node:net'

export interface QueryCounter {
  port: number
  /** A database URL with its host and port replaced by the proxy's. */
  url(databaseUrl: string): string
  /** The SQL text of every statement executed through the proxy so far, in order. */
  readonly executed: string[]
  /**
   * While true, each new connection is answered as by a server still starting up (`FATAL 57P03 the database system is
   * starting up`) and closed, never reaching PostgreSQL: every statement fails, and the connection failure is not the
   * kind that opens the pool's breaker. Connections open before stay as they are.
   */
  startingUp: boolean
  /** How many connections were refused so far while `startingUp`: one per attempt to reach the server. */
  readonly refused: number
  close(): Promise<void>
}

const SSL_REQUEST = 80877103
const GSS_REQUEST = 80877104

const cstring = (buffer: Buffer, at: number): [string, number] => {
  const end = buffer.indexOf(0, at)
  return [buffer.toString('utf8', at, end), end + 1]
}

/** Follows one client connection's messages: statements by name, the statement bound last, and each Execute. */
function tap(record: (sql: string) => void): (chunk: Buffer) => void {
  let buffer = Buffer.alloc(0)
  let startup = true
  const statements = new Map<string, string>()
  let bound = ''
  return (chunk) => {
    buffer = Buffer.concat([buffer, chunk])
    for (;;) {
      if (startup) {
        if (buffer.length < 8) return
        const length = buffer.readInt32BE(0)
        if (buffer.length < length) return
        const code = buffer.readInt32BE(4)
        buffer = buffer.subarray(length)
        if (code !== SSL_REQUEST && code !== GSS_REQUEST) startup = false
        continue
      }
      if (buffer.length < 5) return
      const type = String.fromCharCode(buffer[0]!)
      const length = buffer.readInt32BE(1)
      if (buffer.length < 1 + length) return
      const body = buffer.subarray(5, 1 + length)
      buffer = buffer.subarray(1 + length)
      if (type === 'Q') record(cstring(body, 0)[0])
      else if (type === 'P') {
        const [name, at] = cstring(body, 0)
        statements.set(name, cstring(body, at)[0])
      } else if (type === 'B') {
        const [, at] = cstring(body, 0) // portal
        bound = statements.get(cstring(body, at)[0]) ?? '?'
      } else if (type === 'E') record(bound)
    }
  }
}

/** A FATAL ErrorResponse message: severity, SQLSTATE and text. */
function fatal(code: string, message: string): Buffer {
  const fields = Buffer.concat([
    ...[['S', 'FATAL'], ['V', 'FATAL'], ['C', code], ['M', message]].map(([k, v]) => Buffer.from(`${k}${v}\0`)), Buffer.from([0]),
  ])
  const head = Buffer.alloc(5)
  head.write('E', 0)
  head.writeInt32BE(4 + fields.length, 1)
  return Buffer.concat([head, fields])
}

/** Reads the client's startup (answering an SSL or GSS request with `N`), then refuses the connection. */
function refuseAsStartingUp(client: Socket): void {
  let buffer = Buffer.alloc(0)
  client.on('error', () => {})
  client.on('data', (chunk: Buffer) => {
    buffer = Buffer.concat([buffer, chunk])
    while (buffer.length >= 8 && buffer.length >= buffer.readInt32BE(0)) {
      const code = buffer.readInt32BE(4)
      buffer = buffer.subarray(buffer.readInt32BE(0))
      if (code === SSL_REQUEST || code === GSS_REQUEST) {
        client.write('N')
        continue
      }
      client.end(fatal('57P03', 'the database system is starting up'))
      return
    }
  })
}

export async function startQueryCounter(target: { host: string; port: number }): Promise<QueryCounter> {
  const executed: string[] = []
  const sockets = new Set<Socket>()
  const state = { startingUp: false, refused: 0 }
  const server: Server = createServer((client) => {
    if (state.startingUp) {
      state.refused++
      sockets.add(client)
      client.on('close', () => sockets.delete(client))
      return refuseAsStartingUp(client)
    }
    const upstream = connect(target.port, target.host)
    sockets.add(client).add(upstream)
    const read = tap((sql) => executed.push(sql))
    client.on('data', (chunk: Buffer) => {
      read(chunk)
      upstream.write(chunk)
    })
    upstream.pipe(client)
    const end = () => {
      client.destroy()
      upstream.destroy()
      sockets.delete(client)
      sockets.delete(upstream)
    }
    client.on('close', end).on('error', end)
    upstream.on('close', end).on('error', end)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as { port: number }).port
  return {
    port,
    executed,
    get startingUp() {
      return state.startingUp
    },
    set startingUp(on: boolean) {
      state.startingUp = on
    },
    get refused() {
      return state.refused
    },
    url: (databaseUrl) => {
      const url = new URL(databaseUrl)
      url.host = `127.0.0.1:${port}`
      return url.toString()
    },
    async close() {
      for (const socket of sockets) socket.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
