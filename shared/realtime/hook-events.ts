// Reads the Realtime webhook events (./hooks.ts) from every shard's `rt:{sN}:hooks` stream with the consumer group
// `webhooks`, at least once: a batch is acknowledged only after the caller's handler resolves, and the entries a dead
// consumer left pending are claimed (XAUTOCLAIM) once idle. It also runs the due checks that turn expired presence
// entries and leases, and removals whose grace ended, into events: any number of processes may run them at once (each
// check is one script that changes only what is still due). docs/webhooks.md, "Realtime events".
import type Redis from 'ioredis'
import { config } from '../config'
import { logUnlessOutage } from '../errors'
import { describeError, log } from '../log'
import { redisScript } from '../redis-script'
import { dedicatedReader, nodeOfKey, redis, refreshClusterSlots } from '../redis'
import { defaultHookSettings, type HookSettings, parseDueMember, type RealtimeHookKind } from './hooks'
import { hooksDueKey, hooksKey } from './keys'
import DUE_LUA from './lua/hooks-due.lua' with { type: 'text' }
import NOW_LUA from './lua/now.lua' with { type: 'text' }
import { namespaceOf } from './names'
import { checkOccupancy } from './occupancy'
import { sweepPresence } from './presence'

/** The consumer group every webhooks process reads the hooks streams with. */
export const HOOKS_GROUP = 'webhooks'

/** One Realtime webhook event, as the delivery slice records it (`recordEvent`). */
export interface HookEvent {
  /** Stable across re-deliveries of the entry (a claim, a restart): `rt_<shard>_<stream id>`; dedupe on it. */
  id: string
  productId: string
  kind: RealtimeHookKind
  channel: string
  /** The presence identity (the token's subject), for the presence kinds. */
  identity?: string
  /** When it happened (ISO 8601, Redis clock): a removal's is when the last entry went, not when its grace ended. */
  occurredAt: string
  /** The channel's event sequence (presence and occupancy together): orders a channel's events at the receiver. */
  sequence: number
  /** The webhook payload's `data` (docs/webhooks.md). */
  data: Record<string, unknown>
}

export interface ConsumeOptions {
  /** This consumer's name in the group: stable for a process (its own pending entries are read again after a restart). */
  consumer: string
  /**
   * Takes a batch of one shard's events, in stream order; resolves once they are recorded. A rejection leaves them
   * pending (handed again a second later). Called for several shards at once, never twice at once for one shard.
   */
  handle: (events: HookEvent[]) => Promise<void>
  signal: AbortSignal
  /** Entries per read (default 100). */
  count?: number
  /** How long an entry stays pending with a consumer before another claims it (ms, default 60 000). */
  claimIdleMs?: number
  /** How often the due checks run (ms, default 1000); 0: this consumer runs none. */
  checkDueMs?: number
  hooks?: HookSettings
  /** Shards (default REALTIME_SHARDS). */
  shards?: number
}

const BLOCK_MS = 2000
/** How often a shard's reader drops the entries the group has acknowledged (so the stream holds the backlog only). */
const TRIM_EVERY_MS = 5000

/** A stream entry back as its event; undefined for an entry trimmed while it was pending. */
export function toHookEvent(shard: number, streamId: string, fields: string[] | null): HookEvent | undefined {
  if (!fields) return undefined
  const f: Record<string, string> = {}
  for (let i = 0; i + 1 < fields.length; i += 2) f[fields[i]!] = fields[i + 1]!
  const kind = f.kind as RealtimeHookKind
  const occurredAt = new Date(Number(f.t)).toISOString()
  const sequence = Number(f.seq)
  const data: Record<string, unknown> = { channel: f.channel, namespace: namespaceOf(f.channel!) }
  if (kind === 'presence.member_added' || kind === 'presence.member_removed') data.identity = f.identity
  if (kind === 'presence.member_added') data.info = parseInfo(f.info)
  data.occurredAt = occurredAt
  data.sequence = sequence
  return {
    id: `rt_${shard}_${streamId}`, productId: f.product!, kind, channel: f.channel!,
    ...(f.identity ? { identity: f.identity } : {}), occurredAt, sequence, data,
  }
}

/** The info as presence stored it (JSON text from a gateway); null when none, or not JSON (never thrown: it would stall the shard). */
function parseInfo(text: string | undefined): unknown {
  if (!text) return null
  try {
    return JSON.parse(text)
  } catch {
    return null
  }
}

type StreamReply = [key: string, entries: [id: string, fields: string[] | null][]][] | null

/** Creates the group on a shard's stream from its start (so nothing appended before the first reader is lost). */
async function ensureGroup(key: string): Promise<void> {
  try {
    await redis().xgroup('CREATE', key, HOOKS_GROUP, '0', 'MKSTREAM')
  } catch (error) {
    if (!(error instanceof Error) || !error.message.startsWith('BUSYGROUP')) throw error
  }
}

/**
 * Reads every shard's hooks stream in the group until `signal` aborts, handing each batch to `handle` and acknowledging
 * it once `handle` resolves; runs the due checks too unless `checkDueMs` is 0. Resolves once stopped.
 * @example consumeHookEvents({ consumer: hostname(), handle: (events) => recordAll(events), signal })
 */
export async function consumeHookEvents(options: ConsumeOptions): Promise<void> {
  const shards = options.shards ?? config.realtime.shards
  const loops = Array.from({ length: shards }, (_, shard) => readShard(shard, options))
  const checkDueMs = options.checkDueMs ?? 1000
  if (checkDueMs > 0) loops.push(checkDueLoop(shards, checkDueMs, options.hooks ?? defaultHookSettings(), options.signal))
  await Promise.all(loops)
}

/** One shard: its own reading connection (on a cluster, to the node holding the shard's slot; one XREADGROUP cannot span slots). */
async function readShard(shard: number, options: ConsumeOptions): Promise<void> {
  const key = hooksKey(shard)
  const { signal, consumer } = options
  const count = options.count ?? 100
  const claimIdleMs = options.claimIdleMs ?? 60_000
  let connection: Redis | undefined
  const close = () => connection?.disconnect()
  signal.addEventListener('abort', close)
  // After a start or a failed handler, this consumer's own pending entries come first (from id 0), then new ones.
  let ownPending = true
  let claimedAt = 0
  let trimmedAt = 0
  try {
    while (!signal.aborted) {
      try {
        if (!connection) {
          // Again with every new connection: the stream and its group are gone if Redis restarted empty (NOGROUP). First,
          // so that on a cluster the command connection has learned which node holds the shard's slot.
          await ensureGroup(key)
          connection = dedicatedReader(`hooks@${shard}`, nodeOfKey(key), { autoResendUnfulfilledCommands: false })
        }
        let entries: [string, string[] | null][] = []
        if (Date.now() - claimedAt >= claimIdleMs / 2) {
          claimedAt = Date.now()
          const [, claimed, deleted] = (await connection.xautoclaim(key, HOOKS_GROUP, consumer, claimIdleMs, '0-0', 'COUNT', count)) as [string, [string, string[]][], string[]]
          if (deleted?.length) await connection.xack(key, HOOKS_GROUP, ...deleted)
          entries = claimed
        }
        if (!entries.length) {
          const reply = (ownPending
            ? await connection.xreadgroup('GROUP', HOOKS_GROUP, consumer, 'COUNT', count, 'STREAMS', key, '0')
            : await connection.xreadgroup('GROUP', HOOKS_GROUP, consumer, 'COUNT', count, 'BLOCK', BLOCK_MS, 'STREAMS', key, '>')) as StreamReply
          entries = reply?.[0]?.[1] ?? []
          if (ownPending && !entries.length) ownPending = false
        }
        if (!entries.length) continue
        const events = entries.flatMap(([id, fields]) => toHookEvent(shard, id, fields) ?? [])
        try {
          if (events.length) await options.handle(events)
        } catch (error) {
          log('warn', 'webhook events not recorded; they stay pending', { shard, ...describeError(error) })
          ownPending = true
          await sleep(1000, signal)
          continue
        }
        await connection.xack(key, HOOKS_GROUP, ...entries.map(([id]) => id))
        if (Date.now() - trimmedAt >= TRIM_EVERY_MS) {
          trimmedAt = Date.now()
          await trimAcknowledged(key)
        }
      } catch (error) {
        if (signal.aborted) break
        logUnlessOutage('webhook events read failed', error, { shard })
        connection?.disconnect()
        connection = undefined
        ownPending = true
        if (/^(MOVED|ASK) /.test((error as Error).message ?? '')) await refreshClusterSlots().catch(() => {})
        await sleep(500, signal)
      }
    }
  } finally {
    signal.removeEventListener('abort', close)
    close()
  }
}

/**
 * Drops the entries of a hooks stream that the group has delivered and acknowledged: everything before its oldest
 * pending entry, or before the last one delivered when none is pending. Entries not yet delivered, or delivered and not
 * acknowledged, stay; so while the webhooks process keeps up the stream holds its backlog only, and the age trim
 * (REALTIME_HOOK_RETENTION_MS) bounds it while none runs. The group's position only moves forward, so a stale reading
 * of it trims less, never more. One group reads these streams; another would need its position counted here.
 */
export async function trimAcknowledged(key: string): Promise<void> {
  const groups = (await redis().xinfo('GROUPS', key)) as (string | number | null)[][]
  const group = groups.map(pairs).find((g) => g.name === HOOKS_GROUP)
  const delivered = group?.['last-delivered-id']
  if (typeof delivered !== 'string' || delivered === '0-0') return
  const [count, oldest] = (await redis().xpending(key, HOOKS_GROUP)) as [number, string | null]
  await redis().xtrim(key, 'MINID', Number(count) > 0 && oldest ? oldest : delivered)
}

function pairs(list: (string | number | null)[]): Record<string, string | number | null> {
  const out: Record<string, string | number | null> = {}
  for (let i = 0; i + 1 < list.length; i += 2) out[String(list[i])] = list[i + 1]!
  return out
}

const dueScript = redisScript<string[]>('realtime webhook checks', NOW_LUA, DUE_LUA)

/**
 * One round of a shard's due checks: expired presence entries and occupancy leases leave, and removals and vacates
 * whose grace ended are announced. Safe to run anywhere at once: each channel's check is one script that acts only on
 * what is still due. Returns how many channels were checked.
 */
export async function checkDueHooks(shard: number, hooks = defaultHookSettings(), limit = 500): Promise<number> {
  const due = await dueScript.run([hooksDueKey(shard)], [limit])
  const presence: { productId: string; channel: string }[] = []
  const occupancy: { productId: string; channel: string }[] = []
  for (const member of due) {
    const parsed = parseDueMember(member)
    if (parsed) (parsed.what === 'p' ? presence : occupancy).push(parsed)
    else await redis().zrem(hooksDueKey(shard), member)
  }
  await Promise.all([presence.length && sweepPresence(presence, hooks), occupancy.length && checkOccupancy(occupancy, hooks)])
  return due.length
}

async function checkDueLoop(shards: number, everyMs: number, hooks: HookSettings, signal: AbortSignal): Promise<void> {
  while (!signal.aborted) {
    for (let shard = 0; shard < shards && !signal.aborted; shard++) {
      await checkDueHooks(shard, hooks).catch((error) => logUnlessOutage('webhook due checks failed', error, { shard }))
    }
    await sleep(everyMs, signal)
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms)
    function done() {
      clearTimeout(timer)
      signal.removeEventListener('abort', done)
      resolve()
    }
    signal.addEventListener('abort', done)
  })
}
