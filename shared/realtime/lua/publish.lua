-- Publishes one message: history (when kept) and the shard's fan-out entry in one atomic step (shared/realtime/broker.ts).
-- Needs now.lua, generation.lua, fan-budget.lua and history-budget.lua before it.
-- KEYS: 1 hist, 2 meta, 3 fan, 4 fan sequence, 5 product's fan-out budget (fanb), 6 product's history bytes (histb),
--       7 product's channel expiries (histx)
-- ARGV: 1 historySize (0 = ephemeral), 2 retention ms, 3 epoch candidate, 4 productId, 5 channel, 6 message id,
--       7 payload field ('d' or 'r'), 8 payload, 9 fan-out retention ms, 10 sender connection id ('' = none),
--       11 fan-out budget bytes, 12 history budget bytes, 13 budget slices, 14 fan entry overhead, 15 history entry overhead,
--       16 the channel's own history cost (historyChannelBytes)
-- Returns {offset, epoch} when stored, {} otherwise, {-1, 'fanout' | 'history', ms until it may fit} when over a budget
-- (then nothing was written but bookkeeping: expired history trimmed and accounted).
-- Budgets (docs/realtime-data-plane.md, "Budgets"): both are checked before anything is appended, so a refused publish
-- leaves the streams as they were; the fan-out stream is trimmed by age only, never by length.
if redis.replicate_commands then redis.replicate_commands() end
local now = now_ms()
local size = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
local stored = size > 0 and ttl > 0
local window = tonumber(ARGV[9])
local slices = tonumber(ARGV[13])
local fan_cost = #ARGV[4] + #ARGV[5] + #ARGV[6] + #ARGV[8] + #ARGV[10] + tonumber(ARGV[14])
local used, fan_wait = fan_used(KEYS[5], window, slices, now)
if used + fan_cost > tonumber(ARGV[11]) then return {-1, 'fanout', fan_wait} end
local result = {}
local epoch = nil
local hist_cost = 0
if stored then
  -- History budget: the channel's bytes live in its meta hash (field b, expiring with its stream): its entries, and
  -- from the start of its epoch the channel's own cost (ARGV 16); the product's total in histb.
  local other = hist_other(KEYS[6], KEYS[7], ARGV[5], now)
  local meta = redis.call('HMGET', KEYS[2], 'e', 'g')
  local gen = generation()
  epoch = meta[1]
  -- An epoch numbered by another master (a failover, a restart, a moved slot) is not continued: a new one starts.
  if epoch and not same_generation(meta[2], gen) then epoch = nil end
  local bytes = 0
  local function entry_bytes(entry)
    local n = tonumber(ARGV[15])
    -- fields: t, <time>, i, <id>, d|r, <payload>: the id and the payload are what a publish was charged for
    for j = 4, #entry[2], 2 do n = n + #entry[2][j] end
    return n
  end
  local freed = 0
  if epoch then
    bytes = tonumber(redis.call('HGET', KEYS[2], 'b') or '0')
    -- Trim by age: drop leading entries older than the window (bounded work per publish; reads filter by age anyway).
    local cutoff = now - ttl
    local head = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
    if #head > 0 and tonumber(head[1][2][2]) < cutoff then
      local batch = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 100)
      local keep = nil
      for i = 1, #batch do
        if tonumber(batch[i][2][2]) >= cutoff then keep = batch[i][1] break end
        bytes = bytes - entry_bytes(batch[i])
      end
      -- MINID drops ids below it; with none of the batch young enough, drop the whole batch ('<last offset>-1').
      if not keep then keep = string.gsub(batch[#batch][1], '-0$', '-1') end
      redis.call('XTRIM', KEYS[1], 'MINID', keep)
      bytes = math.max(0, bytes)
      redis.call('HSET', KEYS[2], 'b', bytes)
    end
    -- What the size trim of this publish's XADD will drop (MAXLEN is exact).
    local over = redis.call('XLEN', KEYS[1]) - size + 1
    if over > 0 then
      for _, entry in ipairs(redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', over)) do freed = freed + entry_bytes(entry) end
    end
  end
  hist_cost = #ARGV[6] + #ARGV[8] + tonumber(ARGV[15])
  -- A new epoch starts with the channel's own cost.
  local base = epoch and math.max(0, bytes - freed) or tonumber(ARGV[16])
  local after = base + hist_cost
  if other + after > tonumber(ARGV[12]) then
    -- Refused: keep the bookkeeping of what was trimmed by age. It may fit once the product's first channel expires.
    if epoch then
      redis.call('HSET', KEYS[6], ARGV[5], bytes, '#', other + bytes)
    else
      redis.call('HSET', KEYS[6], '#', other)
      redis.call('HDEL', KEYS[6], ARGV[5])
    end
    local first = redis.call('ZRANGE', KEYS[7], 0, 0, 'WITHSCORES')
    return {-1, 'history', first[2] and (tonumber(first[2]) - now) or ttl}
  end
  if not epoch then
    -- A new epoch: whatever history stream and meta survive belong to the old one and must not be served under the new.
    epoch = ARGV[3]
    redis.call('DEL', KEYS[1], KEYS[2])
    redis.call('HSET', KEYS[2], 'e', epoch)
  end
  local offset = redis.call('HINCRBY', KEYS[2], 'o', 1)
  redis.call('XADD', KEYS[1], 'MAXLEN', size, string.format('%d-0', offset), 't', now, 'i', ARGV[6], ARGV[7], ARGV[8])
  redis.call('HSET', KEYS[2], 'b', after, 'g', gen)
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
  hist_set(KEYS[6], KEYS[7], ARGV[5], after, other, now + ttl, ttl)
  result = {offset, epoch}
end
-- Trimmed by age only: an entry stays at least the window, whatever other products append (never MAXLEN).
local fan = {'XADD', KEYS[3], 'MINID', '~', now - window, '*', 'channel', ARGV[5], 'product', ARGV[4], 'id', ARGV[6], 't', now}
if stored then
  table.insert(fan, 'offset') table.insert(fan, result[1])
  table.insert(fan, 'epoch') table.insert(fan, result[2])
end
if ARGV[10] ~= '' then table.insert(fan, 'sender') table.insert(fan, ARGV[10]) end
table.insert(fan, ARGV[7]) table.insert(fan, ARGV[8])
-- Numbered last, next to the XADD, so that no number is ever taken without its entry.
table.insert(fan, 'n') table.insert(fan, redis.call('INCR', KEYS[4]))
redis.call(unpack(fan))
fan_charge(KEYS[5], window, slices, now, fan_cost)
return result
