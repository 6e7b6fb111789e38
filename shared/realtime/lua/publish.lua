-- Library: publish_one(K, A) publishes one message: history (when kept) and the shard's fan-out entry in one atomic step
-- (shared/realtime/broker.ts). Needs now.lua, generation.lua, fan-budget.lua and history-budget.lua before it. Scripts
-- call it with their KEYS and ARGV (publish-one.lua) or slices of them (publish-request.lua):
-- K: 1 hist, 2 meta, 3 fan, 4 fan sequence, 5 product's fan-out budget (fanb), 6 product's history bytes (histb),
--       7 product's channel expiries (histx)
-- A: 1 historySize (0 = ephemeral), 2 retention ms, 3 epoch candidate, 4 productId, 5 channel, 6 message id,
--       7 payload field ('d' or 'r'), 8 payload, 9 fan-out retention ms, 10 sender connection id ('' = none),
--       11 fan-out budget bytes, 12 history budget bytes, 13 budget slices, 14 fan entry overhead, 15 history entry overhead,
--       16 the channel's own history cost (historyChannelBytes)
-- Returns {offset, epoch} when stored, {} otherwise, {-1, 'fanout' | 'history', ms until it may fit} when over a budget
-- (then nothing was written but bookkeeping: expired history trimmed and accounted).
-- Budgets (docs/realtime-data-plane.md, "Budgets"): both are checked before anything is appended, so a refused publish
-- leaves the streams as they were; the fan-out stream is trimmed by age only, never by length.
-- Work per publish (docs/performance.md, "Publish"): the commands a stored publish runs are fourteen (one HMGET and
-- one HSET per hash, two XADDs, two PEXPIREs, a ZADD, INCR, TIME, INFO); trims read entries once per batch, not once
-- per publish: the history stream keeps up to historySize + historySize/8 entries and reads serve the newest historySize
-- (history.lua), so entries are trimmed (and their bytes counted off) every historySize/8 + 1 offsets, in one batch.
-- Meta fields: e epoch, o top offset, b bytes charged, g generation, h a time no older than the oldest entry's (the
-- publish time of the head when last read), so the head is read for the age trim only when it may be due.
local function publish_one(K, A)
  local now = now_ms()
  local size = tonumber(A[1])
  local ttl = tonumber(A[2])
  local stored = size > 0 and ttl > 0
  local window = tonumber(A[9])
  local fan_cost = #A[4] + #A[5] + #A[6] + #A[8] + #A[10] + tonumber(A[14])
  local fan_budget = fan_open(K[5], window, tonumber(A[13]), now)
  if fan_budget.used + fan_cost > tonumber(A[11]) then return {-1, 'fanout', fan_budget.wait} end
  local result = {}
  if stored then
    -- History budget: the channel's bytes live in its meta hash (field b, expiring with its stream): its entries, and
    -- from the start of its epoch the channel's own cost (ARGV 16); the product's total in histb.
    local budget = hist_open(K[6], K[7], A[5], now)
    local meta = redis.call('HMGET', K[2], 'e', 'g', 'o', 'b', 'h')
    local gen = generation()
    local epoch = meta[1]
    -- An epoch numbered by another master (a failover, a restart, a moved slot) is not continued: a new one starts.
    if epoch and not same_generation(meta[2], gen) then epoch = nil end
    local function entry_bytes(entry)
      local n = tonumber(A[15])
      -- fields: t, <time>, i, <id>, d|r, <payload>: the id and the payload are what a publish was charged for
      for j = 4, #entry[2], 2 do n = n + #entry[2][j] end
      return n
    end
    local offset, bytes, head, freed, below = 0, 0, now, 0, nil
    if epoch then
      offset = tonumber(meta[3] or '0')
      bytes = tonumber(meta[4] or '0')
      head = tonumber(meta[5] or '0') -- none (a hash of before): read the head
      -- Trim by age: drop leading entries older than the window (bounded work per publish; reads filter by age anyway).
      local cutoff = now - ttl
      if head < cutoff then
        local batch = redis.call('XRANGE', K[1], '-', '+', 'COUNT', 100)
        local keep = nil
        head = now
        for i = 1, #batch do
          local t = tonumber(batch[i][2][2])
          if t >= cutoff then keep, head = batch[i][1], t break end
          bytes = bytes - entry_bytes(batch[i])
          -- A full batch of old entries: more may follow, no older than this one (ids grow with time).
          if i == 100 then head = t end
        end
        if #batch > 0 then
          -- MINID drops ids below it; with none of the batch young enough, drop the whole batch ('<last offset>-1').
          if not keep then keep = string.gsub(batch[#batch][1], '-0$', '-1') end
          redis.call('XTRIM', K[1], 'MINID', keep)
        end
        bytes = math.max(0, bytes)
        redis.call('HSET', K[2], 'b', bytes, 'h', head)
      end
    end
    -- Trim by size, in batches: every size/8 + 1 offsets, the entries this publish takes out of the newest `size`.
    -- Also whenever the publish would not fit without it: a channel at a full budget must never wait for a batch its
    -- refused publishes cannot reach (the offset only moves when one is accepted).
    local function size_trim()
      below = offset + 1 - size
      for _, entry in ipairs(redis.call('XRANGE', K[1], '-', string.format('%d-0', below))) do freed = freed + entry_bytes(entry) end
    end
    if epoch and offset + 1 > size and (offset + 1) % (math.floor(size / 8) + 1) == 0 then size_trim() end
    local hist_cost = #A[6] + #A[8] + tonumber(A[15])
    local max = tonumber(A[12])
    -- A new epoch starts with the channel's own cost.
    local function after() return (epoch and math.max(0, bytes - freed) or tonumber(A[16])) + hist_cost end
    local fits = budget.other + after() <= max or hist_exact(budget) + after() <= max
    if not fits and epoch and not below and offset + 1 > size then
      size_trim()
      fits = budget.other + after() <= max
    end
    -- What the channel costs after this publish (read before a new epoch replaces `epoch` below).
    local charged = after()
    if not fits then
      -- Refused: keep the bookkeeping of what was trimmed by age. It may fit once the product's first channel expires.
      hist_commit(budget, epoch and bytes or nil)
      local first = redis.call('ZRANGE', K[7], 0, 0, 'WITHSCORES')
      return {-1, 'history', first[2] and (tonumber(first[2]) - now) or ttl}
    end
    if not epoch then
      -- A new epoch: whatever history stream and meta survive belong to the old one and must not be served under the new.
      epoch, offset, head = A[3], 0, now
      redis.call('DEL', K[1], K[2])
    elseif below then
      redis.call('XTRIM', K[1], 'MINID', string.format('%d-1', below))
    end
    offset = offset + 1
    redis.call('XADD', K[1], string.format('%d-0', offset), 't', now, 'i', A[6], A[7], A[8])
    redis.call('HSET', K[2], 'e', epoch, 'o', offset, 'b', charged, 'g', gen, 'h', head)
    redis.call('PEXPIRE', K[1], ttl)
    redis.call('PEXPIRE', K[2], ttl)
    hist_commit(budget, charged, now + ttl, ttl)
    result = {offset, epoch}
  end
  -- Trimmed by age only: an entry stays at least the window, whatever other products append (never MAXLEN).
  local fan = {'XADD', K[3], 'MINID', '~', now - window, '*', 'channel', A[5], 'product', A[4], 'id', A[6], 't', now}
  if stored then
    table.insert(fan, 'offset') table.insert(fan, result[1])
    table.insert(fan, 'epoch') table.insert(fan, result[2])
  end
  if A[10] ~= '' then table.insert(fan, 'sender') table.insert(fan, A[10]) end
  table.insert(fan, A[7]) table.insert(fan, A[8])
  -- Numbered last, next to the XADD, so that no number is ever taken without its entry.
  table.insert(fan, 'n') table.insert(fan, redis.call('INCR', K[4]))
  redis.call(unpack(fan))
  fan_add(fan_budget, fan_cost)
  return result
end
