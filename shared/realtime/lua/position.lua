-- Where a new subscription starts (shared/realtime/broker.ts subscriptionPosition). Needs now.lua, generation.lua and
-- history-budget.lua, with the fixed constants written in (broker.ts FIXED_CONSTANTS).
-- KEYS: 1 hist, 2 meta, 3 histb, 4 histx
-- ARGV: 1 epoch candidate, 2 retention ms, 3 channel, 4 history budget bytes
-- Returns {epoch, top offset}, starting an epoch at offset 0 when the channel has none (as a publish would, leftover
-- history stream included, and an epoch of another generation: generation.lua), charged to the product's history budget like a publish's new epoch; when the channel's
-- cost does not fit, {'', 0} and nothing is created (the subscriber's cursor then names no epoch: after the first
-- publish it does not recover, a visible resync, never a silent gap).
local meta = redis.call('HMGET', KEYS[2], 'e', 'o', 'g')
local gen = generation()
if meta[1] and same_generation(meta[3], gen) then return {meta[1], tonumber(meta[2]) or 0} end
local now = now_ms()
local ttl = tonumber(ARGV[2])
local budget = hist_open(KEYS[3], KEYS[4], ARGV[3], now)
local cost = channel_cost(ARGV[3])
if budget.other + cost > tonumber(ARGV[4]) and hist_exact(budget) + cost > tonumber(ARGV[4]) then
  hist_commit(budget, nil)
  return {'', 0}
end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('HSET', KEYS[2], 'e', ARGV[1], 'o', 0, 'b', cost, 'g', gen, 'h', now)
redis.call('PEXPIRE', KEYS[2], ttl)
hist_commit(budget, cost, now + ttl, ttl)
return {ARGV[1], 0}
