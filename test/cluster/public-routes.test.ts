// The public routes, the platform API and the mailer on a real three-master Redis Cluster (REDIS_URL redis+cluster://...): publish,
// history and presence of channels spread over every node, the publish quota and the IP limit counted on the cluster,
// a key revocation heard at once over the cluster's pub/sub, and a gateway reading every node's shard streams, also
// while a slot migrates.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { fanKey } from '../../shared/realtime/keys'
import { shardOf } from '../../shared/realtime/shards'
import { signToken } from '../../shared/realtime/tokens'
import { keySlot } from '../../shared/redis/key-slot'
import { replied, startGateway, WsClient } from '../gateway/ws-helpers'
import { startProcess, type Worker } from '../helpers'
import { awayFromWindowEdge, createKey, pub, realtimeProduct, type RealtimeProduct, uniqueIp } from '../realtime/public-helpers'
import { RedisCluster } from './redis-cluster'

const cluster = new RedisCluster()
let publicWorker: Worker
let api: Worker
let p: RealtimeProduct

beforeAll(async () => {
  await cluster.start()
  ;[publicWorker, api, p] = await Promise.all([
    startProcess('public', { REDIS_URL: cluster.url, TRUST_PROXY: '1', REALTIME_QUOTA_BURST: '40', REALTIME_QUOTA_SUSTAINED: '1', PUBLIC_IP_RATE_LIMIT: '30' }),
    startProcess('api', { REDIS_URL: cluster.url }),
    realtimeProduct([{ name: 'chat', presence: true, history: { ttlSeconds: 300, size: 100 } }]),
  ])
}, 60_000)
afterAll(async () => {
  await Promise.all([publicWorker?.stop(), api?.stop()])
  await cluster.stop()
})

test('a process whose cluster client just became ready takes commands sent together to every master: none is refused while it connects to them', async () => {
  // A fresh process (readiness probes would have connected every master first): ready, then one publish per channel at once.
  const channels = Array.from({ length: 24 }, (_, i) => `burst:room-${i}`)
  const owners = await Promise.all(channels.map((channel) => cluster.ownerOf(keySlot(fanKey(shardOf(p.productId, channel))))))
  expect(new Set(owners).size).toBe(3)
  const script = `
    import { publish } from './shared/realtime/broker'
    import { redis } from './shared/redis/client'
    await new Promise((resolve) => redis().once('ready', resolve))
    const outcomes = await Promise.allSettled(${JSON.stringify(channels)}.map((channel) =>
      publish({ productId: '${p.productId}', channel, policy: { historyTtlSeconds: 0, historySize: 0 }, data: '{}' })))
    console.log(JSON.stringify(outcomes.map((o) => o.status === 'fulfilled' ? 'ok' : String(o.reason?.cause?.message ?? o.reason))))
    process.exit(0)`
  const child = Bun.spawn(['bun', '-e', script], { cwd: `${import.meta.dir}/../..`, env: { ...process.env, REDIS_URL: cluster.url }, stdout: 'pipe' })
  const printed = await new Response(child.stdout).text()
  expect(await child.exited).toBe(0)
  expect(JSON.parse(printed.trim().split('\n').at(-1)!)).toEqual(channels.map(() => 'ok'))
})

test('messages to channels of several shards are stored with their offsets and read back, their keys spread over the nodes', async () => {
  const before = await cluster.sizes()
  // Channels whose shards differ, so their keys land in several slots (and so on several nodes).
  const channels = [...new Set(Array.from({ length: 40 }, (_, i) => `chat:room-${i}`).filter((c, i, all) =>
    all.findIndex((other) => shardOf(p.productId, other) === shardOf(p.productId, c)) === i))].slice(0, 8)
  expect(channels.length).toBeGreaterThanOrEqual(4)
  for (const channel of channels) {
    for (const n of [1, 2]) {
      const sent = await pub(publicWorker, 'POST', `/${p.productId}/realtime/messages`, { key: p.key, body: { channel, data: { n } } })
      expect([sent.status, sent.body.offset]).toEqual([200, n])
    }
    const history = await pub(publicWorker, 'GET', `/${p.productId}/realtime/channels/${channel}/history?last_n=10`, { key: p.key })
    expect(history.status).toBe(200)
    expect(history.body.entries.map((m: { data: { n: number } }) => m.data.n)).toEqual([1, 2])
    const presence = await pub(publicWorker, 'GET', `/${p.productId}/realtime/channels/${channel}/presence`, { key: p.key })
    expect([presence.status, presence.body.members]).toEqual([200, []])
  }
  const after = await cluster.sizes()
  expect(after.filter((size, i) => size > before[i]!).length).toBeGreaterThanOrEqual(2)
})

test('the publish quota and the per-IP limit are counted on the cluster: past them, 429 with Retry-After', async () => {
  const other = await realtimeProduct([{ name: 'chat' }])
  let status = 200
  let sent = 0
  // The hard limit: burst 40 + 2 x 1 a second x 10-second window = 60 a window, all sent within one window.
  await awayFromWindowEdge(10, 3000)
  for (; sent < 80 && status === 200; sent++) {
    status = (await pub(publicWorker, 'POST', `/${other.productId}/realtime/messages`, { key: other.key, body: { channel: 'chat:q', data: sent } })).status
  }
  expect(status).toBe(429)
  expect(sent).toBe(61)
  // Counted in the cluster, not by the worker alone (which it falls back to when Redis cannot count).
  const window = Math.floor(Date.now() / 10_000)
  const counted = await Promise.all(cluster.ports.map((port) => cluster.cli(port, 'GET', `pub:quota:${other.productId}:${window}`)))
  expect(counted.map((reply) => reply.trim()).filter((reply) => /^\d+$/.test(reply)).map(Number)).toEqual([61])
  const ip = uniqueIp()
  const answers: number[] = []
  await awayFromWindowEdge(60, 5000) // the IP limit counts per minute
  for (let i = 0; i < 30; i++) answers.push((await pub(publicWorker, 'GET', `/${p.productId}/realtime/channels/chat:ip`, { key: p.key, ip })).status)
  expect(answers.slice(0, 30).every((s) => s === 200)).toBe(true)
  const limited = await pub(publicWorker, 'GET', `/${p.productId}/realtime/channels/chat:ip`, { key: p.key, ip })
  expect(limited.status).toBe(429)
  expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0)
})

test('on the cluster too the IP limit comes first: a publish it refuses counts no quota and stores nothing; one the quota refuses stores nothing', async () => {
  const q = await realtimeProduct([{ name: 'chat', history: { ttlSeconds: 300, size: 100 } }])
  const channel = 'chat:order'
  const ip = uniqueIp()
  await awayFromWindowEdge(60, 5000)
  await awayFromWindowEdge(10, 3000)
  const quotaWindow = Math.floor(Date.now() / 10_000)
  const quotaReplies = async () => (await Promise.all(cluster.ports.map((port) => cluster.cli(port, 'GET', `pub:quota:${q.productId}:${quotaWindow}`))))
    .map((reply) => reply.trim()).filter((reply) => /^\d+$/.test(reply)).map(Number)
  for (let i = 0; i < 30; i++) expect((await pub(publicWorker, 'GET', `/${q.productId}/realtime/channels/${channel}`, { key: q.key, ip })).status).toBe(200)
  const limited = await pub(publicWorker, 'POST', `/${q.productId}/realtime/messages`, { key: q.key, ip, body: { channel, data: 1 } })
  expect([limited.status, limited.body.error]).toEqual([429, 'rate_limited'])
  expect(await quotaReplies()).toEqual([])
  const top = async () => (await pub(publicWorker, 'GET', `/${q.productId}/realtime/channels/${channel}/history?last_n=10`, { key: q.key })).body
  expect(await top()).toMatchObject({ entries: [], offset: 0 })
  // Past the quota (60 a window here): refused, nothing stored, the offset stays.
  for (const port of cluster.ports) await cluster.cli(port, 'SET', `pub:quota:${q.productId}:${quotaWindow}`, '60', 'EX', '20') // only its node takes it
  const refused = await pub(publicWorker, 'POST', `/${q.productId}/realtime/messages`, { key: q.key, body: { channel, data: 2 } })
  expect([refused.status, refused.body.error]).toEqual([429, 'quota_exceeded'])
  expect(await quotaReplies()).toEqual([61])
  expect(await top()).toMatchObject({ entries: [], offset: 0 })
})

test('a key revoked through the API on the cluster is refused by the public worker at once (invalidation over the cluster)', async () => {
  const created = await createKey(p)
  const path = `/${p.productId}/realtime/channels/chat:revoked`
  expect((await pub(publicWorker, 'GET', path, { key: created.key })).status).toBe(200) // now cached by the worker
  const revoked = await fetch(`${api.url}/governance/api/v1/products/${p.productId}/public-keys/${created.id}`, {
    method: 'DELETE', headers: { authorization: `Bearer ${p.token}` },
  })
  expect(revoked.status).toBe(200)
  let status = 200
  for (const deadline = Date.now() + 2000; status === 200 && Date.now() < deadline; await Bun.sleep(20)) {
    status = (await pub(publicWorker, 'GET', path, { key: created.key })).status
  }
  expect(status).toBe(401)
})

test('a mailer on the cluster is ready: its readiness pings the cluster', async () => {
  const mailer = await startProcess('mailer', { REDIS_URL: cluster.url }) // waits for /readyz 200
  const ready = await (await fetch(`${mailer.url}/readyz`)).json()
  expect(ready).toMatchObject({ status: 'ready', redis: 'ok' })
  await mailer.stop()
}, 20_000)

test('a gateway on the cluster reads every node\'s shard streams: each publication of channels on several nodes arrives once, in order', async () => {
  const gateway = await startGateway({ REDIS_URL: cluster.url })
  const channels = spreadChannels(p.productId, 6)
  const token = (await signToken({ productId: p.productId, apiKeyId: p.keyId, subject: 'cluster-reader', channels: channels.map((name) => ({ name, ops: ['subscribe'] as const })) })).token
  const client = await WsClient.open(gateway.wsUrl)
  try {
    replied(await client.request({ type: 'connect', id: 1, token }), 'connect')
    for (const [i, channel] of channels.entries()) replied(await client.request({ type: 'subscribe', id: 10 + i, channel }), 'subscribe')
    for (let n = 1; n <= 5; n++) {
      for (const channel of channels) {
        expect((await pub(publicWorker, 'POST', `/${p.productId}/realtime/messages`, { key: p.key, body: { channel, data: { n } } })).status).toBe(200)
      }
    }
    const received = new Map(channels.map((channel) => [channel, [] as number[]]))
    for (const deadline = Date.now() + 5000; [...received.values()].some((got) => got.length < 5) && Date.now() < deadline; await Bun.sleep(20)) {
      for (const channel of channels) received.get(channel)!.push(...client.publications(channel).map((f) => (f.data as { n: number }).n))
    }
    await Bun.sleep(200) // nothing more may come: each exactly once
    for (const channel of channels) received.get(channel)!.push(...client.publications(channel).map((f) => (f.data as { n: number }).n))
    expect(Object.fromEntries(received)).toEqual(Object.fromEntries(channels.map((channel) => [channel, [1, 2, 3, 4, 5]])))
    // The shard streams read are on several nodes, in the slots Redis computes (keySlot agrees with CLUSTER KEYSLOT).
    const owners = new Set<number>()
    for (const channel of channels) {
      const key = fanKey(shardOf(p.productId, channel))
      const slot = Number((await cluster.cli(cluster.ports[0]!, 'CLUSTER', 'KEYSLOT', key)).trim())
      expect(keySlot(key)).toBe(slot)
      for (const port of cluster.ports) if (Number((await cluster.cli(port, 'CLUSTER', 'COUNTKEYSINSLOT', String(slot))).trim()) > 0) owners.add(port)
    }
    expect(owners.size).toBeGreaterThanOrEqual(2)
  } finally {
    client.close()
    await gateway.stop()
  }
}, 30_000)

test('a slot migrated to another node while a gateway reads it: the reader follows it, and every publication arrives once, in order', async () => {
  const gateway = await startGateway({ REDIS_URL: cluster.url })
  const channel = 'chat:moving'
  const slot = keySlot(fanKey(shardOf(p.productId, channel)))
  const token = (await signToken({ productId: p.productId, apiKeyId: p.keyId, subject: 'mover', channels: [{ name: channel, ops: ['subscribe'] }] })).token
  const client = await WsClient.open(gateway.wsUrl)
  const publish = async (n: number) =>
    expect((await pub(publicWorker, 'POST', `/${p.productId}/realtime/messages`, { key: p.key, body: { channel, data: { n } } })).status).toBe(200)
  const received: number[] = []
  const collect = async (count: number) => {
    for (const deadline = Date.now() + 8000; received.length < count && Date.now() < deadline; await Bun.sleep(20)) {
      received.push(...client.publications(channel).map((f) => (f.data as { n: number }).n))
    }
  }
  try {
    replied(await client.request({ type: 'connect', id: 1, token }), 'connect')
    replied(await client.request({ type: 'subscribe', id: 2, channel }), 'subscribe')
    for (const n of [1, 2, 3]) await publish(n)
    await collect(3)
    const from = await cluster.ownerOf(slot)
    const to = cluster.ports.find((port) => port !== from)!
    await cluster.migrateSlot(slot, to)
    expect(await cluster.ownerOf(slot)).toBe(to)
    for (const n of [4, 5, 6]) await publish(n)
    await collect(6)
    await Bun.sleep(200)
    received.push(...client.publications(channel).map((f) => (f.data as { n: number }).n))
    expect(received).toEqual([1, 2, 3, 4, 5, 6])
    // One reading connection for the one wanted shard, now on its new node: the old one closed.
    const readers = async () => (await Promise.all(cluster.ports.map(async (port) =>
      (await cluster.cli(port, 'CLIENT', 'LIST')).split('\n').filter((line) => line.includes('name=fanout')).map(() => port)))).flat()
    let open = await readers()
    for (const deadline = Date.now() + 3000; open.length !== 1 && Date.now() < deadline; await Bun.sleep(50)) open = await readers()
    expect(open).toEqual([to])
  } finally {
    client.close()
    await gateway.stop()
  }
}, 30_000)

test("keySlot agrees with the cluster's CLUSTER KEYSLOT, hash-tag rules included", async () => {
  const keys = ['foo', '{user1000}.following', 'foo{}{bar}', 'foo{{bar}}zap', 'foo{bar}{zap}', 'rt:{s7}:fan', 'kanal:č{ž}', '{}']
  for (const key of keys) expect([key, keySlot(key)]).toEqual([key, Number((await cluster.cli(cluster.ports[0]!, 'CLUSTER', 'KEYSLOT', key)).trim())])
})

/** `count` channels of the product whose shards all differ (so their streams spread over the cluster's slots). */
function spreadChannels(productId: string, count: number): string[] {
  const byShard = new Map<number, string>()
  for (let i = 0; byShard.size < count; i++) {
    const channel = `chat:spread-${i}`
    if (!byShard.has(shardOf(productId, channel))) byShard.set(shardOf(productId, channel), channel)
  }
  return [...byShard.values()]
}
