-- Puts a connection on a roster, or refreshes it. Needs now.lua, fan-budget.lua, hooks.lua and presence-prelude.lua before it.
-- KEYS: those of presence-prelude.lua
-- ARGV: 1-9 those of presence-prelude.lua, 10 identity, 11 member, 12 info JSON ('' = none given), 13 ttl ms,
--       14 max members, 15 how long the roster's keys outlive its last connection (ms, PRESENCE_KEY_GRACE_MS)
-- Returns 2 when the identity joined, 1 when it was already there (another connection, or a refresh), 0 when the roster
-- is full, {-1, ms until the budget may allow it} when the join would pass the product's fan-out budget (nothing written).
local identity = ARGV[10]
local present = redis.call('HEXISTS', KEYS[2], identity) == 1
if not present then
  if redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[14]) then return 0 end
  local info = ARGV[12] ~= '' and ARGV[12] or 'null'
  if fan_used(KEYS[6], window, slices, now) + event_cost('join', identity, info) > tonumber(ARGV[4]) then
    return {-1, fan_wait(KEYS[6], window, slices, now)}
  end
end
if redis.call('ZADD', KEYS[3], now + tonumber(ARGV[13]), ARGV[11]) == 1 then redis.call('HINCRBY', KEYS[2], identity, 1) end
if ARGV[12] ~= '' then redis.call('HSET', KEYS[1], identity, ARGV[12]) else redis.call('HSETNX', KEYS[1], identity, 'null') end
-- The roster's keys outlive its longest-lived connection by a grace period, so an abandoned channel leaves nothing
-- behind, yet the gateways' sweeps still find the expired connections there and emit their leaves.
local last = math.floor(tonumber(redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')[2]))
for i = 1, 3 do redis.call('PEXPIREAT', KEYS[i], last + tonumber(ARGV[15])) end
local state, expires = hook_state(identity)
expires = math.max(expires, now + tonumber(ARGV[13]))
local joined
if not present then
  joined = redis.call('HGET', KEYS[1], identity)
  emit('join', identity, joined)
  -- Back within the grace of its last entry going: neither that removal nor this add is announced (its state stays).
  if redis.call('ZREM', KEYS[10], identity) == 0 then
    state = hook_emit(hooks, 'presence.member_added', identity, joined, now, false) and 'a' or 'd'
  end
end
redis.call('HSET', KEYS[11], identity, (state or 'a') .. ':' .. expires)
hook_keep(KEYS[11], last + grace + hooks.retention)
reschedule()
return present and 1 or 2
