-- Library that every presence script starts with (shared/realtime/presence.ts); needs now.lua, fan-budget.lua and
-- hooks.lua.
-- KEYS: 1 pres, 2 presCount, 3 presExp, 4 the shard's fan-out stream, 5 its sequence, 6 the product's fan-out budget
--       (fanb), 7 the shard's hooks stream, 8 its due index, 9 the product's hook budget (hookb), 10 presGone,
--       11 presHook, 12 the product's dropped-event counter (hookd) (keys.ts)
-- ARGV: 1 productId, 2 channel, 3 fan-out retention (ms), 4 fan-out budget (bytes), 5 budget slices, 6 fan entry
--       overhead, 7 webhook grace (ms), 8 hooks retention (ms), 9 hook budget (bytes), then each script's own from 10
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
-- Webhooks, once per identity (docs/webhooks.md): `presence.member_added` when its first entry appears, unless it is
-- back within the grace of its last one going; `presence.member_removed` once its last entry has stayed gone for the
-- grace. Between the two it waits in presGone (identity → when it went); the shard's due index says when to look again.
-- presHook keeps, per identity present or waiting there, `<a|d>:<ms>`: whether its add was announced (`a`) or dropped by
-- the budget (`d`: its removal is dropped too, never a removal without its add), and when its latest entry expires. It
-- outlives the roster by the grace and the hooks retention, so a removal survives the roster's keys expiring unseen.
local grace = tonumber(ARGV[7])
local hooks = {stream = KEYS[7], due = KEYS[8], budget = KEYS[9], dropped = KEYS[12], product = ARGV[1], channel = ARGV[2],
  retention = tonumber(ARGV[8]), max = tonumber(ARGV[9]), slices = slices, overhead = tonumber(ARGV[6]), now = now}
local function hook_state(identity)
  local state = redis.call('HGET', KEYS[11], identity)
  if not state then return nil, 0 end
  return string.sub(state, 1, 1), tonumber(string.sub(state, 3))
end
local function went(identity, at)
  redis.call('ZADD', KEYS[10], at, identity)
  hook_keep(KEYS[10], now + grace + hooks.retention)
  hook_keep(KEYS[11], now + grace + hooks.retention)
end
-- The roster's next check: its first entry's expiry, or the first removal's grace ending.
local function reschedule()
  local at
  local first = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
  if first[2] then at = tonumber(first[2]) end
  local left = redis.call('ZRANGE', KEYS[10], 0, 0, 'WITHSCORES')
  if left[2] and (not at or tonumber(left[2]) + grace < at) then at = tonumber(left[2]) + grace end
  hook_due(hooks, 'p:' .. ARGV[1] .. ':' .. ARGV[2], at)
end
local function identity_of(member)
  local colon = string.find(member, ':', 1, true)
  local len = tonumber(string.sub(member, 1, colon - 1))
  return string.sub(member, colon + 1, colon + len)
end
local function drop(member, at)
  if redis.call('ZREM', KEYS[3], member) == 0 then return end
  local identity = identity_of(member)
  if redis.call('HINCRBY', KEYS[2], identity, -1) <= 0 then
    redis.call('HDEL', KEYS[2], identity)
    redis.call('HDEL', KEYS[1], identity)
    emit('leave', identity, '')
    went(identity, at)
  end
end
-- An expired entry left when it expired (a gateway that died: its entries count as leaves).
local expired = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'WITHSCORES')
for i = 1, #expired, 2 do drop(expired[i], math.floor(tonumber(expired[i + 1]))) end
-- The roster's keys expired before any script found its entries expired (no check within PRESENCE_KEY_GRACE_MS): every
-- identity presHook still tracks, and not already waiting, went when its latest entry expired.
if redis.call('EXISTS', KEYS[2]) == 0 and redis.call('EXISTS', KEYS[11]) == 1 then
  local tracked = redis.call('HGETALL', KEYS[11])
  for i = 1, #tracked, 2 do
    if not redis.call('ZSCORE', KEYS[10], tracked[i]) then went(tracked[i], tonumber(string.sub(tracked[i + 1], 3))) end
  end
end
local due = redis.call('ZRANGEBYSCORE', KEYS[10], '-inf', now - grace, 'WITHSCORES')
for i = 1, #due, 2 do
  -- Announced unless its add was dropped (an identity tracked before presHook existed counts as announced).
  if hook_state(due[i]) == 'd' then hook_drop(hooks)
  else hook_emit(hooks, 'presence.member_removed', due[i], '', math.floor(tonumber(due[i + 1])), true) end
  redis.call('ZREM', KEYS[10], due[i])
  redis.call('HDEL', KEYS[11], due[i])
end
reschedule()
