// Client events through the gateway against a bare peer (issue 32: "the same care for the gateway's client-event path").
// Subject: one gateway process; each of --connections WebSocket clients (a token granting `publish` on one of 16
// channels of a namespace with client events) sends a burst of 10 `publish` frames (the spec's per-connection bucket:
// 5 a second, burst 10) and waits for their replies. Peer: a bare Bun WebSocket server calling the same publish with the
// product-wide budget (client-events-peer.ts): what the gateway adds is the protocol, the token's grants, the policy,
// the bucket and usage counting. Rounds alternate subject and peer, 2.2 s apart (the bucket refills).
// Prints events/s, the serving process's CPU per event (/proc/<pid>/stat) and Redis's (INFO cpu), for each.
// Usage: bun run scripts/bench/client-events.ts [--connections 2000] [--rounds 3]
// Needs DATABASE_URL, REDIS_URL and PLATFORM_SECRET_KEY as scripts/bench/publish.ts does. About half a minute.
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { signToken } from '../../shared/realtime/tokens'
import { redis } from '../../shared/redis/client'
import { freePort, startWorker } from '../../test/helpers'
import { realtimeProduct } from '../../test/realtime/public-helpers'
import { processCpuSeconds, redisCpuSeconds } from './cpu'
import { type Children, dropProduct, positive, runBench } from './run'

const { values: args } = parseArgs({ options: { connections: { type: 'string', default: '2000' }, rounds: { type: 'string', default: '3' } } })
const CONNECTIONS = positive('connections', args.connections!)
const ROUNDS = positive('rounds', args.rounds!)
const BURST = 10
const CHANNELS = 16
const children: Children = []

interface Client {
  ws: WebSocket
  /** Replies awaited, by frame id. */
  waiting: Map<number, (ok: boolean) => void>
  next: number
}

/** Opens a client and sends `connect`; resolves once its reply is in. */
function open(url: string, token: string): Promise<Client> {
  return new Promise((resolve, reject) => {
    const client: Client = { ws: new WebSocket(url), waiting: new Map(), next: 2 }
    client.ws.onopen = () => client.ws.send(JSON.stringify({ type: 'connect', id: 1, token }))
    client.ws.onmessage = (event) => {
      const frame = JSON.parse(String(event.data)) as { type: string; id?: number }
      if (frame.id === 1) return frame.type === 'reply' ? resolve(client) : reject(new Error(`connect: ${String(event.data)}`))
      if (frame.id === undefined) return
      client.waiting.get(frame.id)?.(frame.type === 'reply')
      client.waiting.delete(frame.id)
    }
    client.ws.onerror = () => reject(new Error(`${url}: connection failed`))
  })
}

/** Every client sends BURST client events at once; resolves to how many were refused. */
async function burst(clients: Client[]): Promise<number> {
  let refused = 0
  await Promise.all(clients.flatMap((client, i) => Array.from({ length: BURST }, () => new Promise<void>((done) => {
    const id = client.next++
    client.waiting.set(id, (ok) => {
      if (!ok) refused++
      done()
    })
    client.ws.send(JSON.stringify({ type: 'publish', id, channel: `bench:room-${i % CHANNELS}`, data: { typing: true, by: `user-${i}`, seq: id } }))
  }))))
  return refused
}

interface Tally { events: number; ms: number; serverCpu: number; redisCpu: number; refused: number }

async function main() {
  const product = await realtimeProduct([{ name: 'bench', clientEvents: true }])
  const [gatewayPort, peerPort] = await Promise.all([freePort(), freePort()])
  const gateway = await startWorker('gateway/main.ts', {
    GATEWAY_PORT: String(gatewayPort), GATEWAY_URL: `ws://127.0.0.1:${gatewayPort}/connection/websocket`,
    GATEWAY_IP_UPGRADES_PER_MINUTE: '1000000000', GATEWAY_IP_CONNECTS_PER_MINUTE: '1000000000', GATEWAY_MAX_CONNECTIONS_PER_SUBJECT: '1000000000',
    REALTIME_PRODUCT_CLIENT_EVENTS_PER_SECOND: '1000000', REALTIME_PRODUCT_FANOUT_MAX_BYTES: String(1024 ** 3),
  }, gatewayPort)
  children.push(gateway.proc)
  const peer = Bun.spawn(['bun', 'run', join(import.meta.dir, 'client-events-peer.ts')], {
    env: { ...process.env, BENCH_PEER_PORT: String(peerPort), BENCH_PRODUCT_ID: product.productId, REALTIME_PRODUCT_CLIENT_EVENTS_PER_SECOND: '1000000', REALTIME_PRODUCT_FANOUT_MAX_BYTES: String(1024 ** 3) },
    stdout: 'ignore', stderr: 'inherit',
  })
  children.push(peer)
  const tokens = await Promise.all(Array.from({ length: CHANNELS }, async (_, k) =>
    (await signToken({ productId: product.productId, apiKeyId: product.keyId, subject: 'bench', channels: [{ name: `bench:room-${k}`, ops: ['publish'] }] })).token))
  const systems = [
    { name: 'gateway: `publish` frames (token grants, policy, bucket, usage)', url: `ws://127.0.0.1:${gatewayPort}/connection/websocket`, pid: gateway.proc.pid },
    { name: 'peer: bare Bun WebSocket server → the same publish', url: `ws://127.0.0.1:${peerPort}/`, pid: peer.pid },
  ]
  for (const deadline = Date.now() + 10_000; ;) {
    if (await open(systems[1]!.url, '').then((c) => (c.ws.close(), true), () => false)) break
    if (Date.now() > deadline) throw new Error('the client-events peer did not start')
    await Bun.sleep(100)
  }
  console.log(`${CONNECTIONS} connections per system, bursts of ${BURST} client events each, ${ROUNDS} alternating rounds, ${CHANNELS} channels`)
  const clients: Client[][] = []
  for (const system of systems) {
    const opened: Client[] = []
    // In batches: thousands of upgrades at once only measure the accept queue.
    for (let i = 0; i < CONNECTIONS; i += 200) {
      opened.push(...await Promise.all(Array.from({ length: Math.min(200, CONNECTIONS - i) }, (_, j) => open(system.url, tokens[(i + j) % CHANNELS]!))))
    }
    clients.push(opened)
  }
  const tallies: Tally[] = systems.map(() => ({ events: 0, ms: 0, serverCpu: 0, redisCpu: 0, refused: 0 }))
  // One round each not measured: JIT, pools and caches warm, as in a running system.
  for (let s = 0; s < systems.length; s++) await burst(clients[s]!)
  for (let round = 0; round < ROUNDS; round++) {
    for (const s of round % 2 ? [1, 0] : [0, 1]) {
      await Bun.sleep(2200)
      const [cpu0, redis0, t0] = [await processCpuSeconds(systems[s]!.pid), await redisCpuSeconds(redis()), performance.now()]
      const refused = await burst(clients[s]!)
      const [t1, cpu1, redis1] = [performance.now(), await processCpuSeconds(systems[s]!.pid), await redisCpuSeconds(redis())]
      const tally = tallies[s]!
      tally.events += CONNECTIONS * BURST
      tally.ms += t1 - t0
      tally.serverCpu += cpu1 - cpu0
      tally.redisCpu += redis1 - redis0
      tally.refused += refused
    }
  }
  console.log(`${'what'.padEnd(66)} ${'events/s'.padStart(9)} ${'server µs/event'.padStart(16)} ${'Redis µs/event'.padStart(15)} ${'refused'.padStart(8)}`)
  tallies.forEach((t, s) => {
    console.log(`${systems[s]!.name.padEnd(66)} ${Math.round(t.events / (t.ms / 1000)).toString().padStart(9)} ${(t.serverCpu / t.events * 1e6).toFixed(1).padStart(16)} ${(t.redisCpu / t.events * 1e6).toFixed(1).padStart(15)} ${String(t.refused).padStart(8)}`)
  })
  const [subject, bare] = tallies as [Tally, Tally]
  console.log(`the gateway: ${Math.round(100 * (subject.events / subject.ms) / (bare.events / bare.ms))} % of the peer's events/s, ` +
    `${(subject.serverCpu / bare.serverCpu).toFixed(2)}× its server CPU and ${(subject.redisCpu / bare.redisCpu).toFixed(2)}× its Redis CPU per event`)
  if (subject.refused + bare.refused > 0) throw new Error(`${subject.refused + bare.refused} client events were refused: the figures are not comparable`)
  for (const list of clients) for (const client of list) client.ws.close()
  await dropProduct(product.productId)
}

await runBench(main, children)
