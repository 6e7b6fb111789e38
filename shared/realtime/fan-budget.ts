// The product's fan-out byte budget on a shard, shared by every script that appends to a shard's fan-out stream (the
// publish script of ./broker.ts, the presence scripts of ./presence.ts), so joins and leaves count with publications:
// its Lua helpers are ./lua/fan-budget.lua, its entry overhead and its 429 are here.
// Design: docs/realtime-data-plane.md, "Budgets".
import { ApiError } from '../errors'

/** What a fan-out entry costs beyond the values it carries (field names, t, n, offset, epoch, stream id). */
export const FAN_ENTRY_OVERHEAD_BYTES = 128

/** 429 past the product's fan-out byte budget on a shard; Retry-After in whole seconds, at least 1. */
export function fanoutBudgetExceeded(waitMs: number, limitBytes: number, windowMs: number): ApiError {
  const retryAfter = Math.max(1, Math.ceil(waitMs / 1000))
  return new ApiError('fanout_budget_exceeded',
    `The product's messages in flight on this channel's shard would pass ${limitBytes} bytes per ${windowMs} ms`,
    { retryAfter, limitBytes, windowMs }, { 'retry-after': String(retryAfter) })
}
