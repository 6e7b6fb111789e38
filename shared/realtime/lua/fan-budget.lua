-- Library, no KEYS or ARGV of its own: the product's fan-out byte budget on a shard, over `rt:{sN}:fanb3:<productId>` (a
-- hash: time slice number → the window's bytes as counted in that slice: its base, then every byte appended in it;
-- `b<slice>` → that base, the bytes of the window's earlier slices when the slice's first write came; no base field
-- when it was 0), for every script that appends to a shard's fan-out stream (and hooks.lua's event budget, the same way).
-- - fan_take(key, window, slices, now, bytes, max) → 0 when `bytes` appended now keep the window within `max` (they are
--   counted), else ms until the oldest counted slice leaves the window (nothing counted)
-- - fan_give_back() takes the last fan_take's bytes off again (a publish refused after it: nothing appended)
-- - fan_used(key, window, slices, now) → bytes counted; fan_wait(key, window, slices, now) → ms until the oldest counted
--   slice leaves the window (for a refusal's Retry-After); fan_charge(key, window, slices, now, bytes) counts, unchecked
-- The slices of the last window plus the current one are counted, so every entry still younger than the window (the only
-- ones trimming must keep) is. Why this shape: a publish's count is one HINCRBY, whose answer is the window's total
-- (each value crossing between Redis and Lua costs about 2 300 instructions: a read of the sum and the slice's field
-- then a write of both cost three times as much; docs/performance.md, "What a publish costs Redis"). The earlier
-- slices are summed once per slice, by the slice's first write (HINCRBY answering exactly its own bytes: the field was
-- new), which adds their sum to the field and records it as the base; a past slice never changes, so its own bytes are
-- its field less its base. Nothing is decremented but a refused publish's own bytes, within its atomic step, and the
-- hash expires: nothing drifts.
local function fan_slice(window, slices)
  local slice = window / slices
  if slice % 1 ~= 0 then slice = slice - slice % 1 + 1 end
  return slice < 1 and 1 or slice
end
-- The current slice's field names, made by string.format once per slice, not per call (a function library keeps them).
local fan_last_bucket, fan_last_field, fan_last_base = nil, nil, nil
local function fan_bucket(window, slices, now)
  local slice = fan_slice(window, slices)
  local bucket = (now - now % slice) / slice
  if bucket ~= fan_last_bucket then fan_last_bucket, fan_last_field = bucket, int(bucket) fan_last_base = 'b' .. fan_last_field end
  return slice, bucket
end
-- The bytes of the window's slices before `bucket` and the oldest slice holding any (nil: none); slices older than the
-- window are deleted, their bases with them.
local function fan_before(key, bucket, slices)
  local got = redis.call('HGETALL', key)
  local totals, bases, stale = {}, {}, {}
  for i = 1, #got, 2 do
    local name = got[i]
    local b = tonumber(name)
    if b then totals[b] = got[i + 1] + 0
    elseif string.byte(name) == 98 then bases[tonumber(string.sub(name, 2))] = got[i + 1] + 0 end -- 'b<slice>'
  end
  local sum, oldest = 0, nil
  for b, total in pairs(totals) do
    if b < bucket - slices then
      stale[#stale + 1] = int(b)
      if bases[b] then stale[#stale + 1] = 'b' .. int(b) end
    elseif b < bucket then
      local own = total - (bases[b] or 0)
      sum = sum + own
      if own > 0 and (not oldest or b < oldest) then oldest = b end
    end
  end
  if #stale > 0 then redis.call('HDEL', key, unpack(stale)) end
  return sum, oldest
end
local function fan_wait(key, window, slices, now)
  local slice, bucket = fan_bucket(window, slices, now)
  local _, oldest = fan_before(key, bucket, slices)
  return ((oldest or bucket) + slices + 1) * slice - now
end
local fan_taken_key, fan_taken_field, fan_taken_bytes = false, false, 0
local function fan_take(key, window, slices, now, bytes, max)
  local slice, bucket = fan_bucket(window, slices, now)
  local field = fan_last_field
  local used = redis.call('HINCRBY', key, field, int(bytes))
  if used == bytes then
    -- The slice's first write (or one after every byte of it was given back): the window before it is counted in.
    local before = fan_before(key, bucket, slices)
    if before > 0 then
      local before_text = int(before)
      used = redis.call('HINCRBY', key, field, before_text)
      redis.call('HSET', key, fan_last_base, before_text)
    end
    -- Once per slice: the key outlives the window plus a slice after this slice's last write.
    redis.call('PEXPIRE', key, window + 2 * slice)
  end
  if used > max then
    redis.call('HINCRBY', key, field, '-' .. int(bytes))
    return fan_wait(key, window, slices, now)
  end
  fan_taken_key, fan_taken_field, fan_taken_bytes = key, field, bytes
  return 0
end
local function fan_give_back()
  redis.call('HINCRBY', fan_taken_key, fan_taken_field, '-' .. int(fan_taken_bytes))
end
local function fan_used(key, window, slices, now)
  local _, bucket = fan_bucket(window, slices, now)
  local used = redis.call('HGET', key, fan_last_field)
  if used then return used + 0 end
  return (fan_before(key, bucket, slices))
end
local function fan_charge(key, window, slices, now, bytes) fan_take(key, window, slices, now, bytes, math.huge) end
