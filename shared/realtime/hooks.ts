// Webhook events of the Realtime data plane, produced into Redis: presence and occupancy changes, de-flapped, appended
// to their shard's `rt:{sN}:hooks` stream by the very scripts that change the roster or the occupancy
// (./lua/hooks.lua). Read by ./hook-events.ts; docs/webhooks.md, "Realtime events".
import { config } from '../config'

/** How events are de-flapped and bounded; defaults from config, tests pass their own. */
export interface HookSettings {
  /** How long an identity's last presence entry, or a channel's last subscriber, must stay gone before the removal (ms). */
  graceMs: number
  /** Longest an event waits in its shard's stream for the webhooks process (ms; acknowledged ones go sooner); also the budget's window. */
  retentionMs: number
  /**
   * Event bytes one product may append to one shard's stream within `retentionMs`; past it adds are dropped (and their
   * removals with them), while a removal or vacate whose add was announced is appended regardless.
   */
  productMaxBytes: number
}

export const defaultHookSettings = (): HookSettings => ({
  graceMs: config.realtime.hookGraceMs,
  retentionMs: config.realtime.hookRetentionMs,
  productMaxBytes: config.realtime.productHookMaxBytes,
})

/** The three script arguments that carry the settings, in the order the scripts take them. */
export const hookArgs = (hooks: HookSettings): number[] => [hooks.graceMs, hooks.retentionMs, hooks.productMaxBytes]

/** The webhook event kinds the Realtime data plane produces (shared/webhooks/events.ts). */
export type RealtimeHookKind = 'channel.occupied' | 'channel.vacated' | 'presence.member_added' | 'presence.member_removed'

/** The due index member of a channel's presence (`p`) or occupancy (`o`) checks. */
export const dueMember = (what: 'p' | 'o', productId: string, channel: string) => `${what}:${productId}:${channel}`

/** A due index member back as its parts; product ids are UUIDs, so the second colon ends the product. */
export function parseDueMember(member: string): { what: 'p' | 'o'; productId: string; channel: string } | null {
  const colon = member.indexOf(':', 2)
  const what = member[0]
  if (member[1] !== ':' || colon < 0 || (what !== 'p' && what !== 'o')) return null
  return { what, productId: member.slice(2, colon), channel: member.slice(colon + 1) }
}
