-- Library, no KEYS or ARGV of its own: the product's fan-out byte budget on a shard, over `rt:{sN}:fanb3:<productId>` (a
-- hash: time slice number → the window's bytes as counted in that slice: its base, then every byte appended in it;
-- `b<slice>` → that base, the bytes of the window's other slices when the slice's first write came (no field when 0);
-- `o` → the oldest slice holding bytes then, for a refusal's Retry-After), for every script that appends to a shard's
-- fan-out stream (and hooks.lua's event budget, the same way).
-- - fan_take(key, window, slices, now, bytes, max) → 0, field when `bytes` appended now keep the window within `max`
--   (they are counted in `field`), else ms until the oldest counted slice leaves the window (nothing counted)
-- - fan_give_back(key, field, bytes) takes a fan_take's bytes off again (a publish refused after it: nothing appended)
-- - fan_used(key, window, slices, now) → bytes counted; fan_wait(key, window, slices, now) → ms until the oldest counted
--   slice leaves the window (for a refusal's Retry-After); fan_charge(key, window, slices, now, bytes) counts, unchecked
-- The slices of the last window plus the current one are counted, so every entry still younger than the window (the only
-- ones trimming must keep) is. Why this shape: a publish's count is one HINCRBY, whose answer is the window's total
-- (each value crossing between Redis and Lua costs about 2 300 instructions: a read of the sum and the slice's field
-- then a write of both cost three times as much; docs/performance.md, "What a publish costs Redis"). The other slices
-- are summed once per slice, by the slice's first write (HINCRBY answering exactly its own bytes: the field was new),
-- which adds their sum to the field and records it as the base; a slice written no more keeps its own bytes (its field
-- less its base). Nothing is decremented but a refused publish's own bytes, within its atomic step, and the hash
-- expires: nothing drifts while the clock goes forward.
-- The clock going back (by up to a window; a slice further ahead is ignored, so a clock that was far ahead cannot hold
-- counts for longer than a window): slices are numbered from the newest one this library has used for that slice
-- length (fan_newest: a function library keeps it between calls), never lower, so a step back keeps counting in that
-- slice; and a first write that finds a newer slice in the hash (a library loaded anew, a failover to a host whose
-- clock is behind) counts in the newest one instead. What is left: a library loaded anew whose clock is behind, writing
-- to an older slice that exists already, counts there without the newer slices' bytes until its clock reaches them
-- (docs/realtime-data-plane.md, "Budgets").
local function fan_slice(window, slices)
  local slice = window / slices
  if slice % 1 ~= 0 then slice = slice - slice % 1 + 1 end
  return slice < 1 and 1 or slice
end
-- Slice length (ms) → the newest slice number used; a handful of lengths (one per budget window).
local fan_newest = {}
-- The current slice's field name, made by string.format once per slice, not per call (a function library keeps it).
local fan_last_bucket, fan_last_field = nil, nil
local function fan_at(bucket) fan_last_bucket, fan_last_field = bucket, int(bucket) end
local function fan_bucket(window, slices, now)
  local slice = fan_slice(window, slices)
  local bucket = (now - now % slice) / slice
  local newest = fan_newest[slice]
  if newest ~= bucket then
    -- Within a window only: a clock that was far ahead must not hold every count in one slice until it is reached.
    if newest and newest > bucket and newest <= bucket + slices then bucket = newest else fan_newest[slice] = bucket end
  end
  if bucket ~= fan_last_bucket then fan_at(bucket) end
  return slice, bucket
end
-- The bytes of the window's slices other than `bucket` (those after it too, while within a window of it: the clock
-- was behind them), the oldest slice holding any (nil: none) and the newest slice (nil: none); slices older than the
-- window are deleted, their bases with them.
local function fan_others(key, bucket, slices)
  local got = redis.call('HGETALL', key)
  local totals, bases, stale = {}, {}, {}
  for i = 1, #got, 2 do
    local name = got[i]
    local b = tonumber(name)
    if b then totals[b] = got[i + 1] + 0
    elseif string.byte(name) == 98 then bases[tonumber(string.sub(name, 2))] = got[i + 1] + 0 end -- 'b<slice>'
  end
  local sum, oldest, newest = 0, nil, nil
  for b, total in pairs(totals) do
    if b < bucket - slices then
      stale[#stale + 1] = int(b)
      if bases[b] then stale[#stale + 1] = 'b' .. int(b) end
    elseif b ~= bucket and b <= bucket + slices then
      local own = total - (bases[b] or 0)
      sum = sum + own
      if own > 0 and (not oldest or b < oldest) then oldest = b end
      if not newest or b > newest then newest = b end
    end
  end
  if #stale > 0 then redis.call('HDEL', key, unpack(stale)) end
  return sum, oldest, newest
end
-- At least 1 ms: a caller reads a positive answer as a refusal.
local function fan_wait_from(oldest, bucket, slice, slices, now)
  local wait = ((oldest or bucket) + slices + 1) * slice - now
  return wait < 1 and 1 or wait
end
local function fan_wait(key, window, slices, now)
  local slice, bucket = fan_bucket(window, slices, now)
  local _, oldest = fan_others(key, bucket, slices)
  return fan_wait_from(oldest, bucket, slice, slices, now)
end
local function fan_take(key, window, slices, now, bytes, max)
  local slice, bucket = fan_bucket(window, slices, now)
  local field = fan_last_field
  local bytes_text = int(bytes)
  local used = redis.call('HINCRBY', key, field, bytes_text)
  if used == bytes then
    -- The slice's first write (or one after every byte of it was given back): the window's other slices are counted in.
    local others, oldest, newest = fan_others(key, bucket, slices)
    if newest and newest > bucket then
      -- The clock is behind a slice written already: count there, and number slices from it on.
      redis.call('HDEL', key, field)
      fan_newest[slice] = newest
      bucket = newest
      fan_at(bucket)
      field = fan_last_field
      used = redis.call('HINCRBY', key, field, bytes_text)
    else
      if others > 0 then
        local others_text = int(others)
        used = redis.call('HINCRBY', key, field, others_text)
        redis.call('HSET', key, 'b' .. field, others_text, 'o', int(oldest or bucket))
      else
        redis.call('HSET', key, 'o', field)
      end
      -- Once per slice: the key outlives the window plus a slice after this slice's last write.
      redis.call('PEXPIRE', key, window + 2 * slice)
    end
  end
  if used > max then
    redis.call('HINCRBY', key, field, '-' .. bytes_text)
    return fan_wait_from((redis.call('HGET', key, 'o') or bucket) + 0, bucket, slice, slices, now), nil
  end
  return 0, field
end
local function fan_give_back(key, field, bytes)
  redis.call('HINCRBY', key, field, '-' .. int(bytes))
end
local function fan_used(key, window, slices, now)
  local _, bucket = fan_bucket(window, slices, now)
  local used = redis.call('HGET', key, fan_last_field)
  if used then return used + 0 end
  return (fan_others(key, bucket, slices))
end
local function fan_charge(key, window, slices, now, bytes) fan_take(key, window, slices, now, bytes, math.huge) end
