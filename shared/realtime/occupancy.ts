// Which channels have subscribers anywhere: each gateway holds a lease on a channel while it has subscribers there
// (refreshed at half its lifetime, released with its last one; a dead gateway's lease expires), and the channel is
// occupied while any lease lives. Its changes become the de-flapped `channel.occupied` / `channel.vacated` webhook
// events in the same script (./lua/occupancy.lua; docs/webhooks.md, "Realtime events").
import { redisScript } from '../redis-script'
import { FAN_ENTRY_OVERHEAD_BYTES } from './fan-budget'
import { defaultHookSettings, hookArgs, type HookSettings } from './hooks'
import { channelKeys, FAN_BUDGET_SLICES } from './keys'
import FAN_BUDGET_LUA from './lua/fan-budget.lua' with { type: 'text' }
import HOOKS_LUA from './lua/hooks.lua' with { type: 'text' }
import NOW_LUA from './lua/now.lua' with { type: 'text' }
import OCCUPANCY_LUA from './lua/occupancy.lua' with { type: 'text' }

const occupancyScript = redisScript<number>('realtime occupancy', NOW_LUA, FAN_BUDGET_LUA, HOOKS_LUA, OCCUPANCY_LUA)

type Op = 'hold' | 'release' | 'check'

function call(op: Op, where: Held, holder: string, leaseMs: number, hooks: HookSettings) {
  const keys = channelKeys(where.productId, where.channel)
  const [graceMs, retentionMs, maxBytes] = hookArgs(hooks)
  return [[keys.occ, keys.occGone, keys.hooks, keys.hooksDue, keys.hookBudget, keys.occMuted, keys.hookDropped, keys.occCount,
    keys.index.names, keys.index.expiry, keys.index.subscriptions],
  [where.productId, where.channel, graceMs!, retentionMs!, maxBytes!, FAN_BUDGET_SLICES, FAN_ENTRY_OVERHEAD_BYTES, op, holder, leaseMs,
    where.subscriptions ?? '']] as const
}

/** A channel as a gateway (`holder`, its id) holds it. */
export interface Held {
  productId: string
  channel: string
  /**
   * The holder's subscriptions on the channel, for the product's list of active channels (./active-channels.ts);
   * left out, the count it last reported stands.
   */
  subscriptions?: number
}

/**
 * The gateway `holder` has subscribers on these channels: their leases (re)start for `leaseMs`. A channel nobody held
 * becomes occupied. Sent back to back, at most 200 awaiting at a time.
 */
export async function holdChannels(holder: string, channels: Iterable<Held>, leaseMs: number, hooks = defaultHookSettings()): Promise<void> {
  await each('hold', holder, channels, leaseMs, hooks)
}

/** The gateway `holder` has no subscriber left on these channels: the last lease released starts the vacate's grace. */
export async function releaseChannels(holder: string, channels: Iterable<Held>, hooks = defaultHookSettings()): Promise<void> {
  await each('release', holder, channels, 0, hooks)
}

/** Expired leases count as released, and a vacate whose grace ended is announced (the due checks of ./hook-events.ts). */
export async function checkOccupancy(channels: Iterable<Held>, hooks = defaultHookSettings()): Promise<void> {
  await each('check', '', channels, 0, hooks)
}

/** checkOccupancy for one channel: the due checks run each channel on its own, so one failure stays its own. */
export async function checkOccupancyOne(where: Held, hooks = defaultHookSettings()): Promise<void> {
  await occupancyScript.run(...call('check', where, '', 0, hooks))
}

async function each(op: Op, holder: string, channels: Iterable<Held>, leaseMs: number, hooks: HookSettings): Promise<void> {
  const batch: ReturnType<typeof call>[] = []
  // A batch that fails does not keep the later ones from running; the first failure is thrown at the end.
  let failure: { error: unknown } | undefined
  const send = (calls: typeof batch) => occupancyScript.runEach(calls).then(() => undefined, (error: unknown) => void (failure ??= { error }))
  for (const where of channels) {
    batch.push(call(op, where, holder, leaseMs, hooks))
    if (batch.length >= 200) await send(batch.splice(0))
  }
  if (batch.length) await send(batch)
  if (failure) throw failure.error
}
