// The gateway's metrics (docs/metrics.md): connections and subscriptions now (read at scrape time), WebSocket upgrades
// accepted, frames received by type and refused by code, recoveries, history and presence reads, fan-out entries,
// deliveries and gaps, subscriptions ended by the server, closes by code, and the fan-out read lag per shard.
// Every label is from a fixed list: a frame type of the protocol or `invalid`, an error frame code of the protocol, a
// close code of shared/realtime/close-codes.ts or `other`, a shard number (below REALTIME_SHARDS).
import type { FanoutLag } from './fanout'
import { closeCodeOf } from '../shared/realtime/close-codes'
import { counter, gauge, histogram } from '../shared/metrics/registry'
import { type FrameErrorCode, REQUEST_TYPES } from './protocol'

// `_open` and `_accepted_total`: a gauge `x` and a counter `x_total` would be one OpenMetrics family.
const connectionsAccepted = counter('gateway_connections_accepted_total', 'WebSocket connections accepted (upgrades that opened a socket)')
const framesReceived = counter('gateway_frames_received_total', 'Client frames received, by type (`invalid`: not a frame of the protocol)', ['type'])
const closes = counter('gateway_closes_total', 'Connections the gateway closed, by close code (4200: slow consumer)', ['code'])

const dispatched = counter('gateway_fanout_entries_total',
  'Fan-out entries handed to subscribers here, by kind (publication: a publication or client event; presence: a join or leave)', ['kind'])
const deliveries = counter('gateway_deliveries_total',
  'Frames handed to subscriptions here (a publication to three subscribers: three), by kind; a client event\'s sender not counted', ['kind'])

const refusals = counter('gateway_frames_refused_total',
  'Client frames answered with an error frame, by frame type (`invalid`: not a frame of the protocol) and error code (`rate_limited`: a rate limit refused it)', ['type', 'code'])
const recoveries = counter('gateway_recoveries_total',
  'Subscriptions with a cursor, by result: `recovered` (every publication after the cursor replayed) or `not_recovered`', ['result'])
const reads = histogram('gateway_read_duration_seconds',
  'History and presence reads served to clients (past their rate limit and permission), by kind (history, presence) and outcome (ok, error)', ['kind', 'outcome'])
const gaps = counter('gateway_fanout_gaps_total',
  'Continuity lost on a shard this gateway reads (entries trimmed or lost before it read them): the shard\'s subscriptions told to recover')
const ended = counter('gateway_subscriptions_ended_total',
  'Subscriptions the gateway ended, by reason: gap (told to subscribe again with their cursor), token (the new token does not allow it)', ['reason'])

const FRAME_TYPES = new Set<string>(REQUEST_TYPES)
const typeLabel = (type: string | undefined) => (type && FRAME_TYPES.has(type) ? type : 'invalid')

export const gatewayMetrics = {
  connectionOpened: () => connectionsAccepted.inc(),
  /** `type`: the frame's type when it parsed as one of the protocol's; anything else counts as `invalid`. */
  frameReceived: (type: string | undefined) => framesReceived.inc({ type: typeLabel(type) }),
  /** A request answered with an error frame (`type` as for frameReceived). */
  refused: (type: string | undefined, code: FrameErrorCode) => refusals.inc({ type: typeLabel(type), code }),
  /** A subscription with a cursor was answered: `recovered` as its reply says. */
  recovery: (recovered: boolean) => recoveries.inc({ result: recovered ? 'recovered' : 'not_recovered' }),
  /** Times one history or presence read; its outcome is `error` when it throws (a backend that did not answer). */
  read: async <T>(kind: 'history' | 'presence', read: () => Promise<T>): Promise<T> => {
    const end = reads.startTimer({ kind })
    try {
      const value = await read()
      end({ outcome: 'ok' })
      return value
    } catch (error) {
      end({ outcome: 'error' })
      throw error
    }
  },
  gap: () => gaps.inc(),
  subscriptionEnded: (reason: 'gap' | 'token') => ended.inc({ reason }),
  /** One fan-out entry reached `subscribers` subscriptions of this gateway. */
  dispatched: (kind: 'publication' | 'presence', subscribers: number) => {
    dispatched.inc({ kind })
    deliveries.inc({ kind }, subscribers)
  },
  closed: (code: number) => closes.inc({ code: closeCodeOf(code) ? String(code) : 'other' }),
}

/** What the gauges read when scraped: the gateway node of this process (nothing until one is watched). */
interface WatchedNode {
  connections: () => number
  subscriptions: () => number
  fanoutLag: () => Promise<Map<number, FanoutLag>>
}
let node: WatchedNode = { connections: () => 0, subscriptions: () => 0, fanoutLag: async () => new Map() }

gauge('gateway_connections_open', 'WebSocket connections open on this gateway', [], function () {
  this.set(node.connections())
})
gauge('gateway_subscriptions', 'Channel subscriptions on this gateway (one per connection and channel, recovering ones included)', [], function () {
  this.set(node.subscriptions())
})
// Both from one read per shard at scrape time (gateway/fanout.ts lag()): only the shards this gateway reads now.
let lags: Promise<Map<number, FanoutLag>> | undefined
const readLags = () => (lags ??= node.fanoutLag().finally(() => setTimeout(() => (lags = undefined), 0)))
gauge('gateway_fanout_lag_entries', 'Fan-out entries written to a shard\'s stream past the last this gateway read, by shard', ['shard'], async function () {
  this.reset()
  for (const [shard, lag] of await readLags()) this.set({ shard: String(shard) }, lag.entries)
})
gauge('gateway_fanout_lag_seconds', 'Age of the oldest fan-out entry of a shard this gateway has not read yet (0: none unread), by shard', ['shard'], async function () {
  this.reset()
  for (const [shard, lag] of await readLags()) this.set({ shard: String(shard) }, lag.seconds)
})

/** The gauges read this gateway node from now on (the metrics are declared once: a second call only swaps the node). */
export function watchGateway(watched: WatchedNode): void {
  node = watched
}
