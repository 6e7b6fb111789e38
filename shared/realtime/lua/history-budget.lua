-- Library, no KEYS or ARGV of its own: the product's history bytes on a shard (docs/realtime-data-plane.md, "Budgets"):
-- the per-channel copies and their sum (field #) in histb; histx says when each channel's keys expire, so channels that
-- expired are taken off the sum (100 per call) and the sum cannot drift past the channels that still exist.
-- - hist_other(histb, histx, channel, now) → the product's bytes on the shard without this channel's, expired ones dropped
-- - hist_set(histb, histx, channel, bytes, other, expires_at, ttl) stores the channel's bytes and when its keys expire
local function hist_other(histb, histx, channel, now)
  local gone = redis.call('ZRANGEBYSCORE', histx, '-inf', '(' .. now, 'LIMIT', 0, 100)
  local total = tonumber(redis.call('HGET', histb, '#') or '0')
  for _, ch in ipairs(gone) do
    total = total - tonumber(redis.call('HGET', histb, ch) or '0')
    redis.call('HDEL', histb, ch)
  end
  if #gone > 0 then
    redis.call('ZREM', histx, unpack(gone))
    redis.call('HSET', histb, '#', math.max(0, total))
  end
  return math.max(0, total - tonumber(redis.call('HGET', histb, channel) or '0'))
end
local function hist_set(histb, histx, channel, bytes, other, expires_at, ttl)
  redis.call('HSET', histb, channel, bytes, '#', other + bytes)
  redis.call('ZADD', histx, expires_at, channel)
  -- The product's index lives as long as its longest-lived channel on this shard.
  for _, k in ipairs({histb, histx}) do
    if redis.call('PTTL', k) < ttl then redis.call('PEXPIRE', k, ttl) end
  end
end
