-- Library that every presence script starts with (shared/realtime/presence.ts); needs now.lua and fan-budget.lua.
-- KEYS: 1 pres, 2 presCount, 3 presExp, 4 the shard's fan-out stream, 5 its sequence, 6 the product's fan-out budget
--       (fanb; keys.ts)
-- ARGV: 1 productId, 2 channel, 3 fan-out retention (ms), 4 fan-out budget (bytes), 5 budget slices, 6 fan entry
--       overhead, then each script's own from 7
-- Removes expired connections. Join and leave are emitted here, into the shard's fan-out stream, in the same atomic step
-- that changes the roster: one `join` when an identity's first connection enters, one `leave` when its last one leaves
-- or expires, however many tabs and gateways it uses. Gateways deliver them to the channel's subscribers.
-- Every event is charged to the product's fan-out byte budget on the shard, like a publication: a join past it is
-- refused (the enter with it, nothing written), a leave never is (refusing it would leave a member on the roster for ever).
local now = now_ms()
local window = tonumber(ARGV[3])
local slices = tonumber(ARGV[5])
local function event_cost(kind, identity, info)
  return #ARGV[1] + #ARGV[2] + #kind + #identity + #info + tonumber(ARGV[6])
end
local function emit(kind, identity, info)
  -- Trimmed by age only, as every writer of the stream does (publish.lua): never by length.
  redis.call('XADD', KEYS[4], 'MINID', '~', now - window, '*', 'n', redis.call('INCR', KEYS[5]), 'channel', ARGV[2], 'product', ARGV[1], 'id', '', 't', now,
    'kind', kind, 'identity', identity, 'info', info)
  fan_charge(KEYS[6], window, slices, now, event_cost(kind, identity, info))
end
local function identity_of(member)
  local colon = string.find(member, ':', 1, true)
  local len = tonumber(string.sub(member, 1, colon - 1))
  return string.sub(member, colon + 1, colon + len)
end
local function drop(member)
  if redis.call('ZREM', KEYS[3], member) == 0 then return end
  local identity = identity_of(member)
  if redis.call('HINCRBY', KEYS[2], identity, -1) <= 0 then
    redis.call('HDEL', KEYS[2], identity)
    redis.call('HDEL', KEYS[1], identity)
    emit('leave', identity, '')
  end
end
for _, member in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)) do drop(member) end
