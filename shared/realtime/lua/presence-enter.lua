-- Puts a connection on a roster, or refreshes it. Needs now.lua, fan-budget.lua and presence-prelude.lua before it.
-- KEYS: those of presence-prelude.lua
-- ARGV: 1-6 those of presence-prelude.lua, 7 identity, 8 member, 9 info JSON ('' = none given), 10 ttl ms,
--       11 max members, 12 how long the roster's keys outlive its last connection (ms, PRESENCE_KEY_GRACE_MS)
-- Returns 2 when the identity joined, 1 when it was already there (another connection, or a refresh), 0 when the roster
-- is full, {-1, ms until the budget may allow it} when the join would pass the product's fan-out budget (nothing written).
local identity = ARGV[7]
local present = redis.call('HEXISTS', KEYS[2], identity) == 1
if not present then
  if redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[11]) then return 0 end
  local info = ARGV[9] ~= '' and ARGV[9] or 'null'
  local used, wait = fan_used(KEYS[6], window, slices, now)
  if used + event_cost('join', identity, info) > tonumber(ARGV[4]) then return {-1, wait} end
end
if redis.call('ZADD', KEYS[3], now + tonumber(ARGV[10]), ARGV[8]) == 1 then redis.call('HINCRBY', KEYS[2], identity, 1) end
if ARGV[9] ~= '' then redis.call('HSET', KEYS[1], identity, ARGV[9]) else redis.call('HSETNX', KEYS[1], identity, 'null') end
-- The roster's keys outlive its longest-lived connection by a grace period, so an abandoned channel leaves nothing
-- behind, yet the gateways' sweeps still find the expired connections there and emit their leaves.
local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
local at = math.floor(tonumber(last[2])) + tonumber(ARGV[12])
for i = 1, 3 do redis.call('PEXPIREAT', KEYS[i], at) end
if present then return 1 end
emit('join', identity, redis.call('HGET', KEYS[1], identity))
return 2
