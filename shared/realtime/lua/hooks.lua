-- Library, no KEYS or ARGV of its own; needs now.lua and fan-budget.lua. Webhook events of one channel, appended to its
-- shard's `rt:{sN}:hooks` stream in the same atomic step as the change that causes them (shared/realtime/hooks.ts).
-- `h` names the keys and settings: stream, due (the shard's due index), budget (the product's hookb hash), dropped (the
-- product's hookd counter), product, channel, retention (ms), max (bytes), slices, overhead (bytes per event), now.
-- - hook_emit(h, kind, identity, info, at, force): one event, unless the product's event bytes on the shard within the
--   retention would pass `max` (then it is dropped and counted: a tenant churning presence cannot grow the stream
--   without bound). `force` appends it past the budget (a removal or vacate whose add was announced: never dropped, so
--   these are at most as many as the adds the budget let through). Returns whether it was appended.
-- - hook_drop(h): counts one event not appended (in hookd, for the retention)
-- - hook_due(h, member, at): when the channel's `member` (`p:` presence, `o:` occupancy) next needs a check; nil clears it
-- - hook_keep(key, at): the key (if it exists) lives at least until `at` (ms), never shorter than it already does
-- The event's sequence is not stored: it is its stream id (`<ms>-<n>`, increasing on the shard's stream, so on each of its
-- channels) read as ms * 1000 + n (./hook-events.ts), so no per-channel counter can be reset by expiry or data loss.
local function hook_drop(h)
  redis.call('INCR', h.dropped)
  redis.call('PEXPIRE', h.dropped, h.retention)
end
local function hook_emit(h, kind, identity, info, at, force)
  local cost = #h.product + #h.channel + #kind + #identity + #info + h.overhead
  local used = fan_used(h.budget, h.retention, h.slices, h.now)
  if used + cost > h.max and not force then
    hook_drop(h)
    return false
  end
  -- Trimmed by age only (as the fan-out stream): one product's events never trim another's that are not read yet.
  local id = redis.call('XADD', h.stream, 'MINID', '~', h.now - h.retention, '*', 'product', h.product, 'channel', h.channel,
    'kind', kind, 'identity', identity, 't', at, 'info', info)
  local dash = string.find(id, '-', 1, true)
  if tonumber(string.sub(id, dash + 1)) >= 1000 then
    -- A thousandth event within one ms of the shard: moved to the next ms, so ms * 1000 + n stays increasing.
    redis.call('XDEL', h.stream, id)
    redis.call('XADD', h.stream, (tonumber(string.sub(id, 1, dash - 1)) + 1) .. '-0', 'product', h.product, 'channel', h.channel,
      'kind', kind, 'identity', identity, 't', at, 'info', info)
  end
  fan_charge(h.budget, h.retention, h.slices, h.now, cost)
  return true
end
local function hook_due(h, member, at)
  if at then redis.call('ZADD', h.due, at, member) else redis.call('ZREM', h.due, member) end
end
local function hook_keep(key, at)
  local expires = redis.call('PEXPIRETIME', key)
  if expires == -1 or (expires >= 0 and expires < at) then redis.call('PEXPIREAT', key, at) end
end
