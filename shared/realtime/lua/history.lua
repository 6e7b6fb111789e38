-- Reads a channel's history (shared/realtime/broker.ts readHistory). Needs now.lua and generation.lua before it.
-- Writes nothing.
-- KEYS: 1 hist, 2 meta
-- ARGV: 1 mode ('n' last_n, 'ms' last_ms, 'c' cursor), 2 n | ms | cursor offset, 3 retention ms, 4 cursor epoch,
--       5 reply budget (bytes), 6 what each entry adds to a reply beyond its stored field values (keys, quotes, offset,
--       epoch, channel: see HISTORY_ENTRY_FRAMING_BYTES), 7 history size (entries served: the newest this many; the
--       stream holds up to an eighth more between publish.lua's batched trims)
-- Returns {epoch or '', top offset, recovered 0/1, entries, truncated 0/1}; entries newest first for 'n'/'ms',
-- ascending for 'c'. Every entry's first field is t (publish time), set by the publish script.
-- The budget bounds what one reply builds inside Redis: a cursor gap larger than it does not recover (all or nothing);
-- a window returns the newest entries that fit and says it was truncated.
local budget = tonumber(ARGV[5])
local size = tonumber(ARGV[7])
local framing = tonumber(ARGV[6]) or 0
local function entry_bytes(entry)
  local n = framing
  for j = 2, #entry[2], 2 do n = n + #entry[2][j] end
  return n
end
local now = now_ms()
local meta = redis.call('HMGET', KEYS[2], 'e', 'o', 'g')
-- An epoch of another generation (generation.lua) is as none: nothing recovers through it, nothing is read from it.
local live = meta[1] and same_generation(meta[3], generation())
local epoch = live and meta[1] or ''
local top = live and tonumber(meta[2]) or 0
local cutoff = now - tonumber(ARGV[3])
local mode = ARGV[1]
if mode == 'c' then
  local offset = tonumber(ARGV[2])
  if ARGV[4] ~= epoch or offset > top then return {epoch, top, 0, {}} end
  if offset == top then return {epoch, top, 1, {}} end
  -- The first missed entry must be among the newest `size` (offsets are contiguous within an epoch).
  if top - offset > size then return {epoch, top, 0, {}} end
  local from = string.format('%d-0', offset + 1)
  local first = redis.call('XRANGE', KEYS[1], from, from)
  -- All or nothing: the first missed entry must still be there and inside the retention window.
  if #first == 0 or tonumber(first[1][2][2]) < cutoff then return {epoch, top, 0, {}} end
  local out = {}
  local bytes = 0
  local start = from
  while true do
    local batch = redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', 500)
    for i = 1, #batch do
      bytes = bytes + entry_bytes(batch[i])
      if bytes > budget then return {epoch, top, 0, {}} end
      out[#out + 1] = batch[i]
    end
    if #batch < 500 then break end
    start = '(' .. batch[#batch][1]
  end
  return {epoch, top, 1, out}
end
if epoch == '' then return {'', 0, 1, {}} end
local count = size
if mode == 'n' then count = math.min(size, tonumber(ARGV[2]))
else cutoff = math.max(cutoff, now - tonumber(ARGV[2])) end
local out = {}
local bytes = 0
local last = '+'
while true do
  local batch = redis.call('XREVRANGE', KEYS[1], last, '-', 'COUNT', 500)
  if #batch == 0 then break end
  for i = 1, #batch do
    if tonumber(batch[i][2][2]) < cutoff then return {epoch, top, 1, out} end
    bytes = bytes + entry_bytes(batch[i])
    if bytes > budget then return {epoch, top, 1, out, 1} end
    out[#out + 1] = batch[i]
    if #out >= count then return {epoch, top, 1, out} end
  end
  if #batch < 500 then break end
  last = '(' .. batch[#batch][1]
end
return {epoch, top, 1, out}
