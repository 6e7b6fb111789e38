-- Library: publish_one(hist_key, meta_key, fan_key, seq_key, fanb_key, histb_key, histx_key, size, ttl, epoch_candidate,
-- product, channel, id, field, payload, sender) publishes one message: history (when kept) and the shard's fan-out
-- entry in one atomic step (shared/realtime/broker.ts). Needs the constants written in (broker.ts publishConstants:
-- FAN_WINDOW, FAN_MAX, HIST_MAX, FAN_SLICES, FAN_ENTRY_OVERHEAD, HIST_ENTRY_OVERHEAD, HIST_CHANNEL_OVERHEAD,
-- IDEMPOTENCY_WINDOW), now.lua, generation.lua, fan-budget.lua and history-budget.lua before it. Scripts call it with
-- the values where they have them (publish-one.lua and publish-request.lua from their KEYS and ARGV, publish-batch.lua
-- from its pools), never copies: a table per call costs more than the call. The budgets and overheads are written into
-- the script's source, one script per set of budgets, not sent with every publish: each argument costs Redis about
-- 1 250 instructions.
-- Keys: the channel's hist and meta, the shard's fan and fan sequence, the product's fan-out budget (fanb), history
-- bytes (histb) and channel expiries (histx) on the shard.
-- Values: size = historySize (a number; 0 = ephemeral), ttl = retention ms (a number), the epoch a new epoch takes,
-- productId, channel, message id, payload field ('d' or 'r'), payload, sender connection id ('' = none).
-- Returns offset, epoch when stored; nil, nil when published without history; -1, 'fanout' | 'history', ms until it may
-- fit when over a budget (then nothing was written but bookkeeping: expired history trimmed and accounted).
-- Budgets (docs/realtime-data-plane.md, "Budgets"): both are checked before anything is appended, so a refused publish
-- leaves the streams as they were; the fan-out stream is trimmed by age only, never by length.
-- Work per publish (docs/performance.md, "Publish"): a stored publish runs nine commands most of the time (the fan-out
-- budget's HINCRBY, one HMGET and one HSET per history hash, two XADDs, INCR, TIME; INFO once a second:
-- generation.lua; the meta hash's HMGET once per channel and run: meta_of), writes only the fields that changed (o and
-- b of the meta hash, the channel's bytes and the sum in histb), and three commands more when the keys' expiry is moved
-- (two PEXPIREATs, a ZADD: once per eighth of the retention window); trims read entries once per batch, not once per
-- publish: the history stream keeps up to historySize + historySize/8 entries and reads serve the newest historySize
-- (history.lua), so entries are trimmed (and their bytes counted off) every historySize/8 + 1 offsets, in one batch.
-- Meta fields: e epoch, o top offset, b bytes charged, g generation, h a time no older than the oldest entry's (the
-- publish time of the head when last read), so the head is read for the age trim only when it may be due; x when the
-- keys expire.
-- One entry's bytes as a publish was charged for them: `overhead` plus the id and the payload (fields: t, <time>, i,
-- <id>, d|r, <payload>).
local function entry_bytes(entry, overhead)
  local fields = entry[2]
  return overhead + #fields[4] + #fields[6]
end

-- The bytes of the entries at or below offset `below` (the size trim's batch, read once before it is removed).
local function bytes_through(hist, below, overhead)
  local freed = 0
  for _, entry in ipairs(redis.call('XRANGE', hist, '-', below .. '-0')) do freed = freed + entry_bytes(entry, overhead) end
  return freed
end

-- The meta hashes this run has read, as they stand after its writes, by key: a channel published again in the same run
-- (a batch's hot channel) takes its six fields from here, not from another HMGET (each field read costs Redis about
-- 2 300 instructions). Each write to a meta hash below changes its copy too; the whole is dropped (nil) at each run's
-- start (run-begins.lua): between runs other clients write.
local metas_read = nil
local function meta_of(meta_key)
  if not metas_read then metas_read = {} end
  local meta = metas_read[meta_key]
  if not meta then
    meta = redis.call('HMGET', meta_key, 'e', 'g', 'o', 'b', 'h', 'x')
    metas_read[meta_key] = meta
  end
  return meta
end

local function publish_one(hist_key, meta_key, fan_key, seq_key, fanb_key, histb_key, histx_key, size, ttl,
    epoch_candidate, product, channel, id, field, payload, sender)
  local now = now_ms()
  local stored = size > 0 and ttl > 0
  local fan_cost = #product + #channel + #id + #payload + #sender + FAN_ENTRY_OVERHEAD
  -- Counted first (one HINCRBY whose answer is the window's total) and given back if the history budget refuses.
  local fan_refused, fan_field = fan_take(fanb_key, FAN_WINDOW, FAN_SLICES, now, fan_cost, FAN_MAX)
  if fan_refused > 0 then return -1, 'fanout', fan_refused end
  local offset, epoch, offset_text = nil, nil, nil
  if stored then
    -- History budget: the channel's bytes live in its meta hash (field b, expiring with its stream): its entries, and
    -- from the start of its epoch the channel's own cost; the product's total in histb.
    local budget = hist_open(histb_key, histx_key, channel, now)
    local meta = meta_of(meta_key)
    local gen = generation()
    epoch = meta[1]
    -- An epoch numbered by another master (a failover, a restart, a moved slot) is not continued: a new one starts.
    if epoch and not same_generation(meta[2], gen) then epoch = nil end
    -- Fields written only when they change (a new epoch, a hash of before without g): e and g, with h and x.
    local stamped = epoch and meta[2]
    local bytes, head, freed, below, expires = 0, now, 0, nil, 0
    offset = 0
    if epoch then
      offset = (meta[3] or 0) + 0
      bytes = (meta[4] or 0) + 0
      head = (meta[5] or 0) + 0 -- none (a hash of before): read the head
      expires = (meta[6] or 0) + 0 -- none (a hash of before, or made by a subscription): expiry moved now
      -- Trim by age: drop leading entries older than the window (bounded work per publish; reads filter by age anyway).
      local cutoff = now - ttl
      if head < cutoff then
        local batch = redis.call('XRANGE', hist_key, '-', '+', 'COUNT', 100)
        local keep = nil
        head = now
        for i = 1, #batch do
          local t = batch[i][2][2] + 0
          if t >= cutoff then keep, head = batch[i][1], t break end
          bytes = bytes - entry_bytes(batch[i], HIST_ENTRY_OVERHEAD)
          -- A full batch of old entries: more may follow, no older than this one (ids grow with time).
          if i == 100 then head = t end
        end
        if #batch > 0 then
          -- MINID drops ids below it; with none of the batch young enough, drop the whole batch ('<last offset>-1').
          if not keep then keep = string.gsub(batch[#batch][1], '-0$', '-1') end
          redis.call('XTRIM', hist_key, 'MINID', keep)
        end
        if bytes < 0 then bytes = 0 end
        local bytes_text, head_text = int(bytes), int(head)
        redis.call('HSET', meta_key, 'b', bytes_text, 'h', head_text)
        meta[4], meta[5] = bytes_text, head_text
      end
      -- Trim by size, in batches: every size/8 + 1 offsets, the entries this publish takes out of the newest `size`.
      if offset + 1 > size and (offset + 1) % ((size - size % 8) / 8 + 1) == 0 then
        below = offset + 1 - size
        freed = bytes_through(hist_key, below, HIST_ENTRY_OVERHEAD)
      end
    end
    local hist_cost = #id + #payload + HIST_ENTRY_OVERHEAD
    -- What the channel costs after this publish: a new epoch starts with the channel's own cost.
    local charged = (epoch and (bytes > freed and bytes - freed or 0) or channel_cost(channel)) + hist_cost
    local fits = budget.other + charged <= HIST_MAX or hist_exact(budget) + charged <= HIST_MAX
    -- Also trim by size whenever the publish would not fit without it: a channel at a full budget must never wait for
    -- a batch its refused publishes cannot reach (the offset only moves when one is accepted).
    if not fits and epoch and not below and offset + 1 > size then
      below = offset + 1 - size
      freed = bytes_through(hist_key, below, HIST_ENTRY_OVERHEAD)
      charged = (bytes > freed and bytes - freed or 0) + hist_cost
      fits = budget.other + charged <= HIST_MAX
    end
    if not fits then
      -- Refused: keep the bookkeeping of what was trimmed by age. It may fit once the product's first channel expires.
      hist_commit(budget, epoch and bytes or nil)
      fan_give_back(fanb_key, fan_field, fan_cost)
      local first = redis.call('ZRANGE', histx_key, 0, 0, 'WITHSCORES')
      return -1, 'history', first[2] and (first[2] - now) or ttl
    end
    if not epoch then
      -- A new epoch: whatever history stream and meta survive belong to the old one and must not be served under the new.
      epoch, offset, head = epoch_candidate, 0, now
      redis.call('DEL', hist_key, meta_key)
      metas_read[meta_key] = nil
    elseif below then
      redis.call('XTRIM', hist_key, 'MINID', below .. '-1')
    end
    offset = offset + 1
    offset_text = int(offset)
    local charged_text = int(charged)
    -- A stream gone while its meta survives (evicted under maxmemory) comes back without an expiry: NOMKSTREAM finds
    -- that out for free, and the expiry is moved below as for a new epoch.
    if not (expires > 0 and redis.call('XADD', hist_key, 'NOMKSTREAM', offset_text .. '-0', 't', now_str(), 'i', id, field, payload)) then
      expires = 0
      redis.call('XADD', hist_key, offset_text .. '-0', 't', now_str(), 'i', id, field, payload)
    end
    -- The keys live at least the retention window after this publish, and not much longer. Their expiry is moved only
    -- when it is outside [now + window, now + window + window/8] (sooner: it would cut the window short; later: the
    -- namespace's retention was shortened), to the far end, so most publishes skip the two PEXPIREATs and the index's
    -- ZADD (field x: when they expire; histx scores the same time).
    local slack = (ttl - ttl % 8) / 8
    if not stamped or expires < now + ttl or expires > now + ttl + slack then
      expires = now + ttl + slack
      local expires_text = int(expires)
      local head_text = int(head)
      redis.call('HSET', meta_key, 'e', epoch, 'o', offset_text, 'b', charged_text, 'g', gen, 'h', head_text, 'x', expires_text)
      metas_read[meta_key] = {epoch, gen, offset_text, charged_text, head_text, expires_text}
      redis.call('PEXPIREAT', hist_key, expires_text)
      redis.call('PEXPIREAT', meta_key, expires_text)
      hist_commit(budget, charged, expires, expires - now, charged_text)
    else
      redis.call('HSET', meta_key, 'o', offset_text, 'b', charged_text)
      meta[3], meta[4] = offset_text, charged_text
      hist_commit(budget, charged, nil, nil, charged_text)
    end
  end
  -- Trimmed by age only: an entry stays at least the window, whatever other products append (never MAXLEN), and only
  -- every 16th entry of the shard (by its number): `~` trims whole stream nodes anyway, and the stream keeps at most
  -- 16 entries more than the window. Numbered next to the XADD, so that no number is ever taken without its entry.
  -- One call per shape of entry, the fields written out: building a table for it costs more than the XADD.
  local n = redis.call('INCR', seq_key)
  local at, number = now_str(), int(n)
  if n % 16 == 0 then
    local minid = int(now - FAN_WINDOW)
    if stored then
      redis.call('XADD', fan_key, 'MINID', '~', minid, '*', 'channel', channel, 'product', product, 'id', id, 't', at,
        'offset', offset_text, 'epoch', epoch, field, payload, 'n', number)
    elseif sender ~= '' then
      redis.call('XADD', fan_key, 'MINID', '~', minid, '*', 'channel', channel, 'product', product, 'id', id, 't', at,
        'sender', sender, field, payload, 'n', number)
    else
      redis.call('XADD', fan_key, 'MINID', '~', minid, '*', 'channel', channel, 'product', product, 'id', id, 't', at, field, payload, 'n', number)
    end
  elseif stored then
    redis.call('XADD', fan_key, '*', 'channel', channel, 'product', product, 'id', id, 't', at,
      'offset', offset_text, 'epoch', epoch, field, payload, 'n', number)
  elseif sender ~= '' then
    redis.call('XADD', fan_key, '*', 'channel', channel, 'product', product, 'id', id, 't', at,
      'sender', sender, field, payload, 'n', number)
  else
    redis.call('XADD', fan_key, '*', 'channel', channel, 'product', product, 'id', id, 't', at, field, payload, 'n', number)
  end
  return offset, epoch
end
