// Benchmark peer: one Socket.IO 4.8 node with the Redis streams adapter (two of these form the cluster the fan-out
// benchmark compares the gateway with). Clients join room "bench"; POST /publish emits the body to the room, on every node.
// Started by scripts/bench/fanout.ts; env BENCH_PORT, REDIS_URL.
import { createAdapter } from '@socket.io/redis-streams-adapter'
import Redis from 'ioredis'
import { createServer } from 'node:http'
import { Server } from 'socket.io'

const port = Number(process.env.BENCH_PORT)
const redisClient = new Redis(process.env.REDIS_URL!)
const http = createServer((request, response) => {
  if (request.url === '/readyz') return void response.end('ok')
  if (request.method !== 'POST' || request.url !== '/publish') return void response.writeHead(404).end()
  let body = ''
  request.on('data', (chunk) => (body += chunk))
  request.on('end', () => {
    io.to('bench').emit('m', body)
    response.end('ok')
  })
})
const io = new Server(http, { adapter: createAdapter(redisClient, { streamName: `bench:socket.io:${process.env.BENCH_STREAM ?? 'x'}` }), transports: ['websocket'] })
io.on('connection', (socket) => void socket.join('bench'))
http.listen(port, '127.0.0.1')
process.on('SIGTERM', () => process.exit(0))
