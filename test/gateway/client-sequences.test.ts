// The reference client against frame sequences a gateway can send but a test cannot time on a real one: a real
// WebSocket server plays the gateway's side of docs/realtime-protocol.md frame by frame, using the gateway's own encoder.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { Server, ServerWebSocket } from 'bun'
import { encode } from '../../gateway/protocol'
import { RealtimeClient } from '../../shared/realtime-client/client'

type Script = (ws: ServerWebSocket<unknown>, frame: Record<string, any>) => void

let server: Server<unknown>
let script: Script = () => {}
const received: Record<string, any>[] = []

beforeAll(() => {
  server = Bun.serve({
    port: 0,
    fetch: (request, s) => (s.upgrade(request, { data: undefined }) ? undefined : new Response('websocket only', { status: 400 })),
    websocket: {
      message(ws, message) {
        const frame = JSON.parse(String(message))
        received.push(frame)
        if (frame.type === 'connect') ws.send(encode.reply(frame.id, 'connect', { client: 'c1', subject: 'ext:s', expiresAt: new Date(Date.now() + 3_600_000).toISOString(), ttl: 3600 }))
        else script(ws, frame)
      },
    },
  })
})

afterAll(() => server?.stop(true))

const until = async (what: () => boolean, ms = 5000) => {
  for (const deadline = Date.now() + ms; !what() && Date.now() < deadline; ) await Bun.sleep(10)
  return what()
}

test('a `resubscribe` push racing the `unavailable` answer to the same subscribe: one subscription results, never a third request that ends it', async () => {
  received.length = 0
  const subscribes: number[] = []
  const subscribed = new Set<string>()
  script = (ws, frame) => {
    if (frame.type !== 'subscribe') return
    subscribes.push(frame.id)
    if (subscribes.length === 1) {
      // The sequence an older gateway sent when a shard gap ended a subscription still being set up.
      ws.send(encode.unsubscribed(frame.channel, 'continuity lost: subscribe again with your cursor to recover', true))
      ws.send(encode.error(frame.id, 'unavailable', 'the subscription ended while it was being set up; subscribe again'))
    } else if (subscribed.has(frame.channel)) {
      ws.send(encode.error(frame.id, 'invalid', `already subscribed to ${frame.channel}`)) // as the gateway answers
    } else {
      subscribed.add(frame.channel)
      const id = frame.id
      setTimeout(() => ws.send(encode.reply(id, 'subscribe', { channel: frame.channel, offset: 0, epoch: 'e1' })), 300)
    }
  }
  // Retries due at once: a retry planned on the stale `unavailable` would go out while the second subscribe is unanswered.
  const client = new RealtimeClient({ url: `ws://127.0.0.1:${server.port}`, getToken: async () => 't', minReconnectDelayMs: 1, maxReconnectDelayMs: 1 })
  const ended: string[] = []
  let subscribedCount = 0
  try {
    client.connect()
    const subscription = client.subscribe('chat:race', { subscribed: () => void subscribedCount++, unsubscribed: (reason) => void ended.push(reason) })
    expect(await until(() => subscribedCount === 1)).toBe(true)
    await Bun.sleep(300) // room for a stray retry and its answer
    expect(ended).toEqual([])
    expect(subscribes.length).toBe(2)
    expect(subscription.active).toBe(true)
  } finally {
    client.disconnect()
  }
})
