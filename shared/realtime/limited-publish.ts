// A publish behind fixed-window limits in ONE script, so one Redis round trip: each limit is counted in order and the
// first one past its limit stops the script before the next is counted and before anything is published.
// One Redis only: the counters and the channel's shard keys are in different slots, which a cluster cannot put in one
// script (publishMessage then counts with hitWindow, one step each: docs/realtime-data-plane.md, "Redis Cluster").
import { redisScript } from '../redis-script'
import type { Window } from '../fixed-window'
import { defaultBudgets, publishCall, publishResult, PUBLISH_SCRIPT_PARTS, type PublishBudgets, type PublishInput, type PublishReply, type PublishResult } from './broker'
import WINDOW_LIMITS_LUA from './lua/window-limits.lua' with { type: 'text' }

/** One limit checked before the publish: its window (as shared/fixed-window.ts computes it) and the most hits it allows. */
export interface WindowLimit {
  window: Window
  limit: number
}

/** The limits passed, and the publish happened; or the limit at `refused` (index into the limits) was past its limit. */
export type LimitedPublish = { published: PublishResult } | { refused: number; count: number }

type Reply = PublishReply | [-2, number, number]

// The limits go between the libraries and publish.lua's body, so a refusal returns before the body runs.
const [nowLua, generationLua, fanBudgetLua, historyBudgetLua, publishLua] = PUBLISH_SCRIPT_PARTS
const limitedPublishScript = redisScript<Reply>('realtime publish', nowLua, generationLua, fanBudgetLua, historyBudgetLua, WINDOW_LIMITS_LUA, publishLua)

/**
 * Counts `limits` in order, then publishes, in one script. A refused limit counts nothing after it and publishes nothing.
 * Throws what publish() throws (429 over a byte budget, 503 when Redis cannot run it: the limits' counts are then
 * unknown, and the caller decides how to count them, as hitWindow does).
 * @example const outcome = await publishWithinLimits([{ window: windowOf(`pub:rl:ip:${ip}`, 60), limit: 600 }], input)
 */
export async function publishWithinLimits(limits: readonly WindowLimit[], input: PublishInput, budgets: PublishBudgets = defaultBudgets()): Promise<LimitedPublish> {
  const call = publishCall(input, budgets)
  const reply = await limitedPublishScript.run(
    [...call.keys, ...limits.map((l) => l.window.key)],
    [...call.args, ...limits.flatMap((l) => [l.limit, l.window.expireSeconds]), call.keys.length],
  )
  if (reply.length === 3 && Number(reply[0]) === -2) return { refused: Number(reply[1]) - 1, count: Number(reply[2]) }
  return { published: publishResult(reply as PublishReply, call.id, budgets) }
}
