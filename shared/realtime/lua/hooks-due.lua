-- The channels of a shard whose presence or occupancy needs a check now. Needs now.lua before it.
-- KEYS: 1 the shard's due index (hooks:due). ARGV: 1 most members answered. Returns the members due (oldest first).
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_ms(), 'LIMIT', 0, tonumber(ARGV[1]))
