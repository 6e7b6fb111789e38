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
import { dedicatedReader, redis } from '../redis/client'
import { nodeOfKey, refreshClusterSlots } from '../redis/cluster'
import { defaultHookSettings, type HookSettings, parseDueMember, type RealtimeHookKind } from './hooks'
import { hooksDueKey, hooksKey } from './keys'
import DROP_CONSUMER_LUA from './lua/hooks-drop-consumer.lua' with { type: 'text' }
import DUE_LUA from './lua/hooks-due.lua' with { type: 'text' }
import NOW_LUA from './lua/now.lua' with { type: 'text' }
import { namespaceOf } from './names'
import { checkOccupancyOne } from './occupancy'
import { sweepPresenceOne } from './presence'

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
  /**
   * Orders a channel's events (presence and occupancy together) at the receiver: increasing per channel, not
   * contiguous. The stream entry's id `<ms>-<n>` read as ms * 1000 + n (./lua/hooks.lua keeps n below 1000).
   */
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
  /**
   * Told of entries acknowledged without an event: trimmed from the stream while pending, or not one the scripts write
   * (webhook metrics). Once per batch, after it is acknowledged.
   */
  dropped?: (entries: number) => void
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

const KINDS: readonly string[] = ['channel.occupied', 'channel.vacated', 'presence.member_added', 'presence.member_removed'] satisfies RealtimeHookKind[]
/** Latest time an event may carry (ms): year 9999, the last ISO 8601 can write in four digits. */
const MAX_TIME_MS = 253_402_300_799_999

/** An entry's sequence: its stream id's ms * 1000 + n; an entry written before that (with a `seq` field) keeps its own. */
function sequenceOf(streamId: string, seq: string | undefined): number | undefined {
  if (seq !== undefined) return /^\d{1,15}$/.test(seq) ? Number(seq) : undefined
  const match = /^(\d{1,13})-(\d{1,3})$/.exec(streamId)
  return match ? Number(match[1]) * 1000 + Number(match[2]) : undefined
}

/**
 * A stream entry back as its event; undefined for an entry trimmed while it was pending, or one no script of ours
 * writes (a bad time, kind or id): the reader acknowledges those, since throwing would stall the shard.
 */
export function toHookEvent(shard: number, streamId: string, fields: string[] | null): HookEvent | undefined {
  if (!fields) return undefined
  const f: Record<string, string> = {}
  for (let i = 0; i + 1 < fields.length; i += 2) f[fields[i]!] = fields[i + 1]!
  const kind = f.kind as RealtimeHookKind
  const t = Number(f.t)
  const sequence = sequenceOf(streamId, f.seq)
  if (!KINDS.includes(kind) || !f.channel || !f.product || f.t === '' || !Number.isInteger(t) || t < 0 || t > MAX_TIME_MS || sequence === undefined) return undefined
  const occurredAt = new Date(t).toISOString()
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
  // Where the next XAUTOCLAIM resumes: past what the last one scanned, back to the start once it answers 0-0.
  let claimFrom = '0-0'
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
        if (claimFrom !== '0-0' || Date.now() - claimedAt >= claimIdleMs / 2) {
          claimedAt = Date.now()
          const [next, claimed, deleted] = (await connection.xautoclaim(key, HOOKS_GROUP, consumer, claimIdleMs, claimFrom, 'COUNT', count)) as [string, [string, string[]][], string[]]
          claimFrom = next
          if (deleted?.length) {
            await connection.xack(key, HOOKS_GROUP, ...deleted)
            options.dropped?.(deleted.length)
          }
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
        const events = entries.flatMap(([id, fields]) => {
          const event = toHookEvent(shard, id, fields)
          if (!event && fields) log('warn', 'realtime webhook event skipped: not one the scripts write', { shard, id })
          return event ?? []
        })
        try {
          if (events.length) await options.handle(events)
        } catch (error) {
          log('warn', 'webhook events not recorded; they stay pending', { shard, ...describeError(error) })
          ownPending = true
          await sleep(1000, signal)
          continue
        }
        await connection.xack(key, HOOKS_GROUP, ...entries.map(([id]) => id))
        if (events.length < entries.length) options.dropped?.(entries.length - events.length)
        if (Date.now() - trimmedAt >= TRIM_EVERY_MS) {
          trimmedAt = Date.now()
          await trimAcknowledged(key)
          await dropIdleConsumers(key, consumer)
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

/** A consumer of the group idle this long with nothing pending is gone (a process renamed or replaced); 1 h. */
export const CONSUMER_IDLE_MS = 3_600_000

/**
 * Deletes the group's consumers that have nothing pending and have not read for `idleMs` (never `keep`, the caller):
 * names of processes that are gone would otherwise accumulate in the group for ever. A live consumer deleted by mistake
 * loses nothing (it had nothing pending) and is created again by its next read.
 */
export async function dropIdleConsumers(key: string, keep: string, idleMs = CONSUMER_IDLE_MS): Promise<number> {
  const consumers = ((await redis().xinfo('CONSUMERS', key, HOOKS_GROUP)) as (string | number | null)[][]).map(pairs)
  let dropped = 0
  for (const c of consumers) {
    if (c.name === keep || Number(c.pending) > 0 || Number(c.idle) < idleMs) continue
    dropped += await dropConsumerScript.run([key], [HOOKS_GROUP, String(c.name)])
  }
  return dropped
}

function pairs(list: (string | number | null)[]): Record<string, string | number | null> {
  const out: Record<string, string | number | null> = {}
  for (let i = 0; i + 1 < list.length; i += 2) out[String(list[i])] = list[i + 1]!
  return out
}

const dropConsumerScript = redisScript<number>('realtime webhook consumers', DROP_CONSUMER_LUA)
const dueScript = redisScript<string[]>('realtime webhook checks', NOW_LUA, DUE_LUA)

/** How long a channel whose check failed waits before it is checked again (ms): it never holds up the others. */
export const DUE_RETRY_MS = 60_000

/**
 * One round of a shard's due checks: expired presence entries and occupancy leases leave, and removals and vacates
 * whose grace ended are announced. Safe to run anywhere at once: each channel's check is one script that acts only on
 * what is still due. Each channel's check stands alone: one that fails (its keys broken) is looked at again
 * DUE_RETRY_MS later, and the others of the round go on. Returns how many channels were checked.
 */
export async function checkDueHooks(shard: number, hooks = defaultHookSettings(), limit = 500): Promise<number> {
  const key = hooksDueKey(shard)
  const due = await dueScript.run([key], [limit])
  const checks = due.map((member) => {
    const parsed = parseDueMember(member)
    if (!parsed) return redis().zrem(key, member)
    return parsed.what === 'p' ? sweepPresenceOne(parsed, hooks) : checkOccupancyOne(parsed, hooks)
  })
  const failed = (await Promise.allSettled(checks)).flatMap((result, i) => (result.status === 'rejected' ? [due[i]!] : []))
  // XX: a member a concurrent check has just cleared stays cleared.
  if (failed.length) await redis().zadd(key, 'XX', ...failed.flatMap((member) => [Date.now() + DUE_RETRY_MS, member]))
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
