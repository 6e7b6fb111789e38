// The product's fan-out byte budget on a shard, shared by every script that appends to a shard's fan-out stream (the
// publish script in ./broker.ts, the presence scripts in ./presence.ts), so joins and leaves count with publications.
// Design: docs/realtime-data-plane.md, "Budgets".
import { ApiError } from '../errors'

/** What a fan-out entry costs beyond the values it carries (field names, t, n, offset, epoch, stream id). */
export const FAN_ENTRY_OVERHEAD_BYTES = 128

/**
 * Lua helpers over `rt:{sN}:fanb:<productId>` (a hash: time slice number → bytes appended in it). The slices of the last
 * window plus the current one are summed, so every entry still younger than the window (the only ones trimming must
 * keep) is counted. Old slices are dropped here and the hash expires: nothing is ever decremented, so nothing drifts.
 * - fan_used(key, window, slices, now) → bytes counted, ms until the oldest counted slice leaves the window
 * - fan_charge(key, window, slices, now, bytes) counts bytes appended now
 */
export const FAN_BUDGET_LUA = `
local function fan_slice(window, slices) return math.max(1, math.ceil(window / slices)) end
local function fan_used(key, window, slices, now)
  local slice = fan_slice(window, slices)
  local bucket = math.floor(now / slice)
  local used = 0
  local oldest = bucket
  local counted = redis.call('HGETALL', key)
  for i = 1, #counted, 2 do
    local b = tonumber(counted[i])
    if b < bucket - slices then redis.call('HDEL', key, counted[i])
    else
      used = used + tonumber(counted[i + 1])
      if b < oldest then oldest = b end
    end
  end
  return used, (oldest + slices + 1) * slice - now
end
local function fan_charge(key, window, slices, now, bytes)
  local slice = fan_slice(window, slices)
  redis.call('HINCRBY', key, math.floor(now / slice), bytes)
  redis.call('PEXPIRE', key, window + 2 * slice)
end
`

/** 429 past the product's fan-out byte budget on a shard; Retry-After in whole seconds, at least 1. */
export function fanoutBudgetExceeded(waitMs: number, limitBytes: number, windowMs: number): ApiError {
  const retryAfter = Math.max(1, Math.ceil(waitMs / 1000))
  return new ApiError(429, 'fanout_budget_exceeded',
    `The product's messages in flight on this channel's shard would pass ${limitBytes} bytes per ${windowMs} ms`,
    { retryAfter, limitBytes, windowMs }, { 'retry-after': String(retryAfter) })
}
