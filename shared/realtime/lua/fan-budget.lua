-- Library, no KEYS or ARGV of its own: the product's fan-out byte budget on a shard, over `rt:{sN}:fanb:<productId>` (a
-- hash: time slice number → bytes appended in it), for every script that appends to a shard's fan-out stream.
-- - fan_used(key, window, slices, now) → bytes counted, ms until the oldest counted slice leaves the window
-- - fan_charge(key, window, slices, now, bytes) counts bytes appended now
-- The slices of the last window plus the current one are summed, so every entry still younger than the window (the only
-- ones trimming must keep) is counted. Old slices are dropped here and the hash expires: nothing is ever decremented,
-- so nothing drifts.
local function fan_slice(window, slices) return math.max(1, math.ceil(window / slices)) end
local function fan_used(key, window, slices, now)
  local slice = fan_slice(window, slices)
  local bucket = math.floor(now / slice)
  local used = 0
  local oldest = bucket
  local counted = redis.call('HGETALL', key)
  for i = 1, #counted, 2 do
    local b = tonumber(counted[i])
    if b < bucket - slices then redis.call('HDEL', key, counted[i])
    else
      used = used + tonumber(counted[i + 1])
      if b < oldest then oldest = b end
    end
  end
  return used, (oldest + slices + 1) * slice - now
end
local function fan_charge(key, window, slices, now, bytes)
  local slice = fan_slice(window, slices)
  redis.call('HINCRBY', key, math.floor(now / slice), bytes)
  redis.call('PEXPIRE', key, window + 2 * slice)
end
