-- Library, no KEYS or ARGV of its own; needs now.lua and fan-budget.lua. Webhook events of one channel, appended to its
-- shard's `rt:{sN}:hooks` stream in the same atomic step as the change that causes them (shared/realtime/hooks.ts).
-- `h` names the keys and settings: stream, due (the shard's due index), budget (the product's hookb hash), seq (the
-- channel's sequence), product, channel, retention (ms), max (bytes), slices, overhead (bytes per event), now.
-- - hook_emit(h, kind, identity, info, at): one event, unless the product's event bytes on the shard within the
--   retention would pass `max` (then it is dropped: a tenant churning presence cannot grow the stream without bound)
-- - hook_due(h, member, at): when the channel's `member` (`p:` presence, `o:` occupancy) next needs a check; nil clears it
local function hook_emit(h, kind, identity, info, at)
  local cost = #h.product + #h.channel + #kind + #identity + #info + h.overhead
  local used = fan_used(h.budget, h.retention, h.slices, h.now)
  if used + cost > h.max then return false end
  local seq = redis.call('INCR', h.seq)
  -- The sequence outlives every event and pending removal of the channel; after a day without any it starts again.
  redis.call('PEXPIRE', h.seq, math.max(86400000, 2 * h.retention))
  -- Trimmed by age only (as the fan-out stream): one product's events never trim another's that are not read yet.
  redis.call('XADD', h.stream, 'MINID', '~', h.now - h.retention, '*', 'product', h.product, 'channel', h.channel,
    'kind', kind, 'identity', identity, 't', at, 'seq', seq, 'info', info)
  fan_charge(h.budget, h.retention, h.slices, h.now, cost)
  return true
end
local function hook_due(h, member, at)
  if at then redis.call('ZADD', h.due, at, member) else redis.call('ZREM', h.due, member) end
end
