-- Library, no KEYS or ARGV of its own: the product's fan-out byte budget on a shard, over `rt:{sN}:fanb2:<productId>` (a
-- hash: time slice number → bytes appended in it; `#` = the sum counted, `c` = the slice it was summed in, `o` = the
-- oldest slice in it), for every script that appends to a shard's fan-out stream.
-- - fan_open(key, window, slices, now) → state `s` (valid until the next fan_open): s.used = bytes counted
-- - fan_wait(s) → ms until the oldest counted slice leaves the window (for a refusal's Retry-After)
-- - fan_add(s, bytes) counts bytes appended now (one HSET)
-- - fan_used(key, window, slices, now) → used; fan_charge(key, window, slices, now, bytes): the same, one call each
-- The slices of the last window plus the current one are summed, so every entry still younger than the window (the only
-- ones trimming must keep) is counted. The sum is kept in `#` and read with one HMGET of two fields, the sum and the
-- current slice's: each field a script reads costs Redis about 2 300 instructions, so `c` and `o` are read only when
-- needed. The current slice's field exists only once a write of this slice summed the window again (fan_add writes it
-- with `c` after such an open), so its presence says the sum is this slice's. It is summed again from the slices (old
-- ones dropped) only when a new slice starts, once per slice, since only then can a slice leave the window. Nothing is
-- ever decremented and the hash expires: nothing drifts. A hash of before (slices only, no `c`) is summed again at
-- once, as at a new slice.
local function fan_slice(window, slices)
  local slice = window / slices
  if slice % 1 ~= 0 then slice = slice - slice % 1 + 1 end
  return slice < 1 and 1 or slice
end
-- One state, every field set by each fan_open, not a table per call: a table of ten fields costs Redis about 5 000
-- instructions to make and collect, and a function library (shared/redis-script.ts redisFunction) keeps this one from
-- call to call. A caller holds one state at a time (publish.lua opens, checks, appends, adds; the others open and use).
local fan_state = {key = false, window = 0, slices = 0, now = 0, slice = 0, bucket = 0, field = false, mine = 0, used = 0,
  oldest = false, fresh = false}
-- The last slice's field name: made by string.format once per slice, not per call (a function library keeps it).
local fan_last_bucket, fan_last_field = nil, nil
local function fan_open(key, window, slices, now)
  local slice = fan_slice(window, slices)
  local bucket = (now - now % slice) / slice
  if bucket ~= fan_last_bucket then fan_last_bucket, fan_last_field = bucket, int(bucket) end
  local field = fan_last_field
  local got = redis.call('HMGET', key, '#', field)
  local s = fan_state
  s.key, s.window, s.slices, s.now, s.slice, s.bucket, s.field = key, window, slices, now, slice, bucket, field
  if got[2] then
    s.used, s.mine, s.oldest, s.fresh = got[1] + 0, got[2] + 0, false, false
  else
    local used, oldest, stale = 0, bucket, {}
    local counted = redis.call('HGETALL', key)
    for i = 1, #counted, 2 do
      local b = tonumber(counted[i]) -- nil for '#', 'c' and 'o'
      if b then
        if b < bucket - slices then stale[#stale + 1] = counted[i]
        else
          used = used + tonumber(counted[i + 1])
          if b < oldest then oldest = b end
        end
      end
    end
    if #stale > 0 then redis.call('HDEL', key, unpack(stale)) end
    s.used, s.mine, s.oldest, s.fresh = used, 0, oldest, true
  end
  return s
end
local function fan_wait(s)
  local oldest = s.oldest or (redis.call('HGET', s.key, 'o') or s.bucket) + 0
  return (oldest + s.slices + 1) * s.slice - s.now
end
local function fan_add(s, bytes)
  s.used, s.mine = s.used + bytes, s.mine + bytes
  if s.fresh then
    redis.call('HSET', s.key, s.field, int(s.mine), '#', int(s.used), 'c', s.field, 'o', int(s.oldest))
    -- Once per slice: the key outlives the window plus a slice after this slice's last write.
    redis.call('PEXPIRE', s.key, s.window + 2 * s.slice)
    s.fresh = false
  else
    redis.call('HSET', s.key, s.field, int(s.mine), '#', int(s.used))
  end
end
local function fan_used(key, window, slices, now) return fan_open(key, window, slices, now).used end
local function fan_charge(key, window, slices, now, bytes) fan_add(fan_open(key, window, slices, now), bytes) end
