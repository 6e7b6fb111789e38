-- A channel's occupancy across gateways, and its de-flapped `channel.occupied` / `channel.vacated` webhook events.
-- Needs now.lua, fan-budget.lua and hooks.lua before it.
-- KEYS: 1 occ (gateway id → when its lease expires), 2 occGone, 3 the shard's hooks stream, 4 its due index, 5 the
--       product's hook budget (hookb), 6 occMuted, 7 the product's dropped-event counter (hookd), 8 occCount (gateway
--       id → its subscriptions), and the product's channel index on the shard: 9 names, 10 expiry, 11 subscriptions (keys.ts)
-- ARGV: 1 productId, 2 channel, 3 webhook grace (ms), 4 hooks retention (ms), 5 hook budget (bytes), 6 budget slices,
--       7 bytes counted per event besides its fields, 8 'hold' | 'release' | 'check', 9 gateway id, 10 lease (ms),
--       11 the gateway's subscriptions on the channel ('hold'; '' keeps the last one reported)
-- A gateway holds a lease while it has subscribers on the channel (refreshing it), and releases it with its last one;
-- a dead gateway's lease expires, and counts as a release when it expired. The channel is occupied while any lease
-- lives. `occupied` when the first lease appears, unless the channel is back within the grace of going empty;
-- `vacated` once it has stayed empty for the grace. occMuted exists while the channel's `occupied` was dropped by the
-- budget: its `vacated` is dropped too; any other `vacated` is never dropped. Returns 1.
local now = now_ms()
local grace = tonumber(ARGV[3])
local hooks = {stream = KEYS[3], due = KEYS[4], budget = KEYS[5], dropped = KEYS[7], product = ARGV[1], channel = ARGV[2],
  retention = tonumber(ARGV[4]), max = tonumber(ARGV[5]), slices = tonumber(ARGV[6]), overhead = tonumber(ARGV[7]), now = now}
local function went(at)
  redis.call('SET', KEYS[2], at, 'PX', grace + hooks.retention)
  hook_keep(KEYS[6], now + grace + hooks.retention)
end
local before = redis.call('ZCARD', KEYS[1])
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES')
local last
for i = 1, #expired, 2 do
  redis.call('ZREM', KEYS[1], expired[i])
  redis.call('HDEL', KEYS[8], expired[i])
  last = math.floor(tonumber(expired[i + 1]))
end
local empty = redis.call('ZCARD', KEYS[1]) == 0
if before > 0 and empty then went(last) end
if ARGV[8] == 'hold' then
  -- Back within the grace of going empty: neither that vacated nor this occupied is announced.
  if empty and redis.call('DEL', KEYS[2]) == 0 then
    if hook_emit(hooks, 'channel.occupied', '', '', now, false) then redis.call('DEL', KEYS[6])
    else redis.call('SET', KEYS[6], 1) end
  end
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[10]), ARGV[9])
  if ARGV[11] ~= '' then redis.call('HSET', KEYS[8], ARGV[9], ARGV[11]) end
  -- Kept past the last lease's expiry long enough for a check to find that it expired.
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[10]) + hooks.retention)
  redis.call('PEXPIRE', KEYS[8], tonumber(ARGV[10]) + hooks.retention)
  hook_keep(KEYS[6], now + tonumber(ARGV[10]) + hooks.retention)
elseif ARGV[8] == 'release' then
  redis.call('HDEL', KEYS[8], ARGV[9])
  if redis.call('ZREM', KEYS[1], ARGV[9]) == 1 and redis.call('ZCARD', KEYS[1]) == 0 then went(now) end
end
-- The product's channel index on the shard (active-channels.ts): the channel while some lease lives, with its latest
-- lease's expiry and its subscriptions summed over the live leases (a handful of gateways: the sum is recomputed).
local holders = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
if #holders == 0 then
  redis.call('ZREM', KEYS[9], ARGV[2])
  redis.call('ZREM', KEYS[10], ARGV[2])
  redis.call('HDEL', KEYS[11], ARGV[2])
else
  local subscriptions = 0
  for i = 1, #holders, 2 do subscriptions = subscriptions + (tonumber(redis.call('HGET', KEYS[8], holders[i])) or 0) end
  redis.call('ZADD', KEYS[9], 0, ARGV[2])
  redis.call('ZADD', KEYS[10], holders[#holders], ARGV[2])
  redis.call('HSET', KEYS[11], ARGV[2], subscriptions)
  -- The index outlives every entry in it: an entry's expiry is at most a lease from its last hold, and each hold
  -- pushes the index's own expiry out to twice that. Never shortened (another gateway may hold longer leases).
  if ARGV[8] == 'hold' then
    local keep = 2 * tonumber(ARGV[10])
    for k = 9, 11 do
      if redis.call('PTTL', KEYS[k]) < keep then redis.call('PEXPIRE', KEYS[k], keep) end
    end
  end
end
local left = redis.call('GET', KEYS[2])
if left and tonumber(left) + grace <= now then
  if redis.call('DEL', KEYS[6]) == 1 then hook_drop(hooks)
  else hook_emit(hooks, 'channel.vacated', '', '', tonumber(left), true) end
  redis.call('DEL', KEYS[2])
  left = nil
end
-- The channel's next check: its first lease's expiry, or the vacate's grace ending.
local at
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if first[2] then at = tonumber(first[2]) end
if left and (not at or tonumber(left) + grace < at) then at = tonumber(left) + grace end
hook_due(hooks, 'o:' .. ARGV[1] .. ':' .. ARGV[2], at)
return 1
