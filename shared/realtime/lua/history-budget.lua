-- Library, no KEYS or ARGV of its own: the product's history bytes on a shard (docs/realtime-data-plane.md, "Budgets"):
-- the per-channel copies and their sum (field `#`) in histb; histx says when each channel's keys expire, so channels that
-- expired are taken off the sum and the sum cannot drift past the channels that still exist.
-- - hist_open(histb, histx, channel, now) → state `s` (valid until the next hist_open): s.other = the product's bytes on
--   the shard without this channel's copy. The copy is read here, not taken from the channel's meta hash (`b`, the same
--   value while both keys live): histb lost (evicted) while meta hashes stay, a channel has no copy, and taking its `b`
--   off the sum would leave the sum short by that much for as long as histb lives. `x` is read only when needed (each
--   field a script reads costs Redis about 2 300 instructions).
-- - hist_exact(s) takes channels that expired off s.other (at most 100 per call); the sum may hold expired channels
--   for a second, so a caller calls it before it refuses anything
-- - hist_commit(s, bytes, expires_at, ttl[, bytes_text]) stores the channel's bytes (nil: the channel has none) and when
--   its keys expire (nil: unchanged)
-- - channel_cost(channel) → what a channel costs beyond its entries from the start of its epoch (broker.ts
--   HISTORY_CHANNEL_OVERHEAD_BYTES: its name is in four keys and members; `#` is the UTF-8 bytes)
-- Per call: one HMGET (the sum and the channel's copy), one HSET, one ZADD. Expired channels are looked for at most once
-- a second (field `@`: when next; 0 while more are waiting), and the index's own expiry (field `x`) is moved only when
-- it would come too soon. A function library keeps each product's `@` between calls (hist_sweeps), so a publish reads
-- two fields, not three (each costs Redis about 2 300 instructions); `@` is read with them only when it is not kept (a
-- script run with EVAL keeps nothing; a library loaded anew, or past the bound, reads it once per product and shard).
-- A library serves one database (shared/redis-script.ts names it by the database too): key names repeat across them.
local function channel_cost(channel) return 4 * #channel + HIST_CHANNEL_OVERHEAD end
-- When each product's next sweep is due (its `@`), by histb key. Kept only as a hint: the hash's `@` is the record. One
-- kept wrong (the hash lost or swept by another script meanwhile) delays a sweep by at most the second it was set for,
-- which the sum already allows (hist_exact sweeps before any refusal). At most hist_sweeps_max keys (products x shards
-- on this Redis; about 1.5 MB of the library's Lua memory, which maxmemory does not count): past it the table starts
-- empty again.
local hist_sweeps_max = 10000
local hist_sweeps, hist_sweeps_kept = {}, 0
local function hist_keep_sweep(histb, at)
  if not hist_sweeps[histb] then
    if hist_sweeps_kept >= hist_sweeps_max then hist_sweeps, hist_sweeps_kept = {}, 0 end
    hist_sweeps_kept = hist_sweeps_kept + 1
  end
  hist_sweeps[histb] = at
end
local function hist_sweep(s)
  local gone = redis.call('ZRANGEBYSCORE', s.histx, '-inf', '(' .. s.now, 'LIMIT', 0, 100)
  s.swept = true
  s.next_sweep = #gone == 100 and 0 or s.now + 1000
  hist_keep_sweep(s.histb, s.next_sweep)
  if #gone == 0 then return end
  local bytes = redis.call('HMGET', s.histb, unpack(gone))
  for i, ch in ipairs(gone) do
    local b = (bytes[i] or 0) + 0
    s.total = s.total - b
    if ch == s.channel then s.mine = 0 end
  end
  if s.total < 0 then s.total = 0 end
  redis.call('HDEL', s.histb, unpack(gone))
  redis.call('ZREM', s.histx, unpack(gone))
  s.dirty = true
end
-- One state, every field set by each hist_open, not a table per call: a table of ten fields costs Redis about 5 000
-- instructions to make and collect, and a function library (shared/redis-script.ts redisFunction) keeps this one from
-- call to call. A caller holds one state at a time.
local hist_state = {histb = false, histx = false, channel = false, now = 0, total = 0, mine = 0, next_sweep = 0,
  expires = false, swept = false, dirty = false, other = 0}
local function hist_open(histb, histx, channel, now)
  local next_sweep = hist_sweeps[histb]
  local got
  if next_sweep and next_sweep <= now + 1000 then
    got = redis.call('HMGET', histb, '#', channel)
  else
    -- Not kept, or further ahead than a sweep's second (the clock went back): the hash's, read with the rest. One
    -- that far ahead too is due now, so that no clock step holds the sweeps back.
    got = redis.call('HMGET', histb, '#', channel, '@')
    next_sweep = (got[3] or 0) + 0
    if next_sweep > now + 1000 then next_sweep = 0 end
    hist_keep_sweep(histb, next_sweep)
  end
  local s = hist_state
  s.histb, s.histx, s.channel, s.now, s.total, s.mine, s.next_sweep, s.expires, s.swept, s.dirty =
    histb, histx, channel, now, (got[1] or 0) + 0, (got[2] or 0) + 0, next_sweep, false, false, false
  if s.next_sweep <= now then hist_sweep(s) end
  s.other = s.total > s.mine and s.total - s.mine or 0
  return s
end
-- When the product's index expires (field x; 0: no index), read once per open when asked.
local function hist_index_expires(s)
  if not s.expires then s.expires = (redis.call('HGET', s.histb, 'x') or 0) + 0 end
  return s.expires
end
local function hist_exact(s)
  if not s.swept then
    hist_sweep(s)
    s.other = s.total > s.mine and s.total - s.mine or 0
  end
  return s.other
end
-- `bytes_text`: int(bytes) when the caller has it already. `@` is written only when a sweep moved it.
local function hist_commit(s, bytes, expires_at, ttl, bytes_text)
  -- Nothing to record where the product keeps no history on the shard yet (no index: no expiry known, nothing swept):
  -- writing one here would leave a key without an expiry.
  if not bytes and not s.dirty and hist_index_expires(s) == 0 then return end
  local total = int(s.other + (bytes or 0))
  -- The product's index lives as long as its longest-lived channel on this shard: twice that, moved only when short.
  local extend = expires_at and bytes and hist_index_expires(s) < expires_at
  if bytes then
    bytes_text = bytes_text or int(bytes)
    if extend then
      redis.call('HSET', s.histb, '#', total, '@', int(s.next_sweep), s.channel, bytes_text, 'x', int(s.now + 2 * ttl))
    elseif s.swept then
      redis.call('HSET', s.histb, '#', total, '@', int(s.next_sweep), s.channel, bytes_text)
    else
      redis.call('HSET', s.histb, '#', total, s.channel, bytes_text)
    end
  else
    redis.call('HSET', s.histb, '#', total, '@', int(s.next_sweep))
    redis.call('HDEL', s.histb, s.channel)
    redis.call('ZREM', s.histx, s.channel)
  end
  if bytes and expires_at then
    -- A new member may recreate an index a sweep emptied (Redis deletes an empty set), without its expiry: give it one.
    if redis.call('ZADD', s.histx, expires_at, s.channel) == 1 and redis.call('PTTL', s.histx) == -1 then
      redis.call('PEXPIRE', s.histx, 2 * ttl)
    end
  end
  if extend then
    redis.call('PEXPIRE', s.histb, 2 * ttl)
    redis.call('PEXPIRE', s.histx, 2 * ttl)
  end
end
