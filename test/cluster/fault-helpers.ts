// What the cluster fault tests share: channels picked by the node serving their shard, a real WebSocket subscriber
// recording what each channel delivers, and a paced publisher through a real public worker recording every answer.
import { expect } from 'bun:test'
import { fanKey } from '../../shared/realtime/keys'
import { shardOf } from '../../shared/realtime/shards'
import { signToken } from '../../shared/realtime/tokens'
import { keySlot } from '../../shared/redis/key-slot'
import { type Publication, RealtimeClient, type SubscribedContext } from '../../shared/realtime-client/client'
import type { GatewayProcess } from '../gateway/ws-helpers'
import type { Worker } from '../helpers'
import { pub, type RealtimeProduct } from '../realtime/public-helpers'
import type { RedisCluster } from './redis-cluster'

/** `count` channels of `p` whose shard streams the node `port` of `on` serves (`served`) or does not (`!served`). */
export async function channelsServedBy(on: RedisCluster, p: RealtimeProduct, port: number, served: boolean, count: number): Promise<string[]> {
  const found: string[] = []
  for (let i = 0; found.length < count; i++) {
    const channel = `chat:fault-${i}`
    if (((await on.ownerOf(keySlot(fanKey(shardOf(p.productId, channel))))) === port) === served) found.push(channel)
  }
  return found
}

/** A client of `gw` subscribed to `channels`, recording what each delivers and each (re)subscription. */
export async function subscriber(gw: GatewayProcess, p: RealtimeProduct, channels: string[]) {
  const token = (await signToken({ productId: p.productId, apiKeyId: p.keyId, subject: 'fault', channels: channels.map((name) => ({ name, ops: ['subscribe'] as const })) })).token
  const received = new Map(channels.map((c) => [c, [] as Publication<{ n: number }>[]]))
  const subscribed = new Map(channels.map((c) => [c, [] as SubscribedContext[]]))
  const client = new RealtimeClient({ url: gw.wsUrl, getToken: async () => token, minReconnectDelayMs: 100, maxReconnectDelayMs: 500 })
  const subscriptions = channels.map((channel) => client.subscribe<{ n: number }>(channel, {
    publication: (publication) => received.get(channel)!.push(publication),
    subscribed: (context) => subscribed.get(channel)!.push(context),
  }))
  client.connect()
  for (const deadline = Date.now() + 10_000; !subscriptions.every((s) => s.active) && Date.now() < deadline; ) await Bun.sleep(20)
  expect(subscriptions.every((s) => s.active)).toBe(true)
  /** The `n`s delivered on `channel` once `count` arrived (or 5 s passed), and a moment more for extras. */
  const delivered = async (channel: string, count: number) => {
    for (const deadline = Date.now() + 5000; received.get(channel)!.length < count && Date.now() < deadline; ) await Bun.sleep(20)
    await Bun.sleep(100)
    return received.get(channel)!.map((publication) => publication.data!.n)
  }
  return { client, subscribed, received, delivered }
}

export interface Sent { n: number; channel: string; status: number; offset?: number; epoch?: string; retryAfter: string | null; ms: number; at: number }

/** Publishes {n: 1}, {n: 2}, … round-robin over `channels` through `worker` every 10 ms until stopped, recording each answer. */
export function pacedPublisher(worker: Worker, p: RealtimeProduct, channels: string[]) {
  const sent: Sent[] = []
  let running = true
  let paused: Promise<void> | undefined
  const loop = (async () => {
    for (let n = 1; running; n++) {
      await paused
      const channel = channels[n % channels.length]!
      const started = Date.now()
      const answer = await pub(worker, 'POST', `/${p.productId}/realtime/messages`, { key: p.key, body: { channel, data: { n } } })
      sent.push({ n, channel, status: answer.status, offset: answer.body.offset, epoch: answer.body.epoch, retryAfter: answer.headers.get('retry-after'), ms: Date.now() - started, at: started })
      await Bun.sleep(10)
    }
  })()
  const accepted = (channel: string) => sent.filter((s) => s.channel === channel && s.status === 200)
  return {
    sent,
    accepted,
    /**
     * Resolves once every channel has `count` publications accepted. A fixed sleep is not enough: under load a worker's
     * first publishes (key, policy, scripts) can take longer than it, and a channel never published before a fault
     * tests nothing about what the fault does to it.
     */
    async untilAccepted(count: number) {
      for (const deadline = Date.now() + 10_000; Date.now() < deadline && channels.some((c) => accepted(c).length < count); ) await Bun.sleep(20)
      expect(channels.filter((c) => accepted(c).length < count)).toEqual([])
    },
    /** Holds the loop between two requests while `during` runs (nothing in flight meanwhile). */
    async pause(during: () => Promise<void>) {
      let resume!: () => void
      paused = new Promise((resolve) => (resume = resolve))
      const count = sent.length
      for (const deadline = Date.now() + 2000; sent.length === count && Date.now() < deadline; ) await Bun.sleep(5)
      try {
        await during()
      } finally {
        paused = undefined
        resume()
      }
    },
    async stop() {
      running = false
      await loop
    },
  }
}
