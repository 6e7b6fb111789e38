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
  local size = A[1] + 0
  local ttl = A[2] + 0
  local stored = size > 0 and ttl > 0
  local window = A[9] + 0
  local fan_cost = #A[4] + #A[5] + #A[6] + #A[8] + #A[10] + A[14]
  local fan_budget = fan_open(K[5], window, A[13] + 0, now)
  if fan_budget.used + fan_cost > A[11] + 0 then return {-1, 'fanout', fan_budget.wait} end
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
      local n = A[15] + 0
      -- fields: t, <time>, i, <id>, d|r, <payload>: the id and the payload are what a publish was charged for
      for j = 4, #entry[2], 2 do n = n + #entry[2][j] end
      return n
    end
    local offset, bytes, head, freed, below = 0, 0, now, 0, nil
    if epoch then
      offset = (meta[3] or 0) + 0
      bytes = (meta[4] or 0) + 0
      head = (meta[5] or 0) + 0 -- none (a hash of before): read the head
      -- Trim by age: drop leading entries older than the window (bounded work per publish; reads filter by age anyway).
      local cutoff = now - ttl
      if head < cutoff then
        local batch = redis.call('XRANGE', K[1], '-', '+', 'COUNT', 100)
        local keep = nil
        head = now
        for i = 1, #batch do
          local t = batch[i][2][2] + 0
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
        if bytes < 0 then bytes = 0 end
        redis.call('HSET', K[2], 'b', bytes, 'h', head)
      end
    end
    -- Trim by size, in batches: every size/8 + 1 offsets, the entries this publish takes out of the newest `size`.
    -- Also whenever the publish would not fit without it: a channel at a full budget must never wait for a batch its
    -- refused publishes cannot reach (the offset only moves when one is accepted).
    local function size_trim()
      below = offset + 1 - size
      for _, entry in ipairs(redis.call('XRANGE', K[1], '-', below .. '-0')) do freed = freed + entry_bytes(entry) end
    end
    if epoch and offset + 1 > size and (offset + 1) % ((size - size % 8) / 8 + 1) == 0 then size_trim() end
    local hist_cost = #A[6] + #A[8] + A[15]
    local max = A[12] + 0
    -- A new epoch starts with the channel's own cost.
    local function after()
      local kept = bytes > freed and bytes - freed or 0
      return (epoch and kept or A[16] + 0) + hist_cost
    end
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
      return {-1, 'history', first[2] and (first[2] - now) or ttl}
    end
    if not epoch then
      -- A new epoch: whatever history stream and meta survive belong to the old one and must not be served under the new.
      epoch, offset, head = A[3], 0, now
      redis.call('DEL', K[1], K[2])
    elseif below then
      redis.call('XTRIM', K[1], 'MINID', below .. '-1')
    end
    offset = offset + 1
    redis.call('XADD', K[1], offset .. '-0', 't', now, 'i', A[6], A[7], A[8])
    redis.call('HSET', K[2], 'e', epoch, 'o', offset, 'b', charged, 'g', gen, 'h', head)
    redis.call('PEXPIRE', K[1], ttl)
    redis.call('PEXPIRE', K[2], ttl)
    hist_commit(budget, charged, now + ttl, ttl)
    result = {offset, epoch}
  end
  -- Trimmed by age only: an entry stays at least the window, whatever other products append (never MAXLEN).
  -- Numbered next to the XADD, so that no number is ever taken without its entry. One call per shape of entry, the
  -- fields written out: building a table for it costs more than the XADD.
  local n = redis.call('INCR', K[4])
  local minid = now - window
  if stored then
    redis.call('XADD', K[3], 'MINID', '~', minid, '*', 'channel', A[5], 'product', A[4], 'id', A[6], 't', now,
      'offset', result[1], 'epoch', result[2], A[7], A[8], 'n', n)
  elseif A[10] ~= '' then
    redis.call('XADD', K[3], 'MINID', '~', minid, '*', 'channel', A[5], 'product', A[4], 'id', A[6], 't', now,
      'sender', A[10], A[7], A[8], 'n', n)
  else
    redis.call('XADD', K[3], 'MINID', '~', minid, '*', 'channel', A[5], 'product', A[4], 'id', A[6], 't', now, A[7], A[8], 'n', n)
  end
  fan_add(fan_budget, fan_cost)
  return result
end
