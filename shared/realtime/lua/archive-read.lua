-- Reads the next new entries of a shard's fan-out stream for the archiver's consumer group, and counts the entries the
-- group never received because they were trimmed first (services/archiver/shard-reader.ts). Atomic, so several
-- archivers sharing the group count each gap once.
-- KEYS: 1 the shard's fan-out stream, 2 the highest sequence number `n` delivered to the group (keys.ts fanArchivedKey)
-- ARGV: 1 group, 2 consumer, 3 count
-- Returns {lost, entries}: entries as XREADGROUP gives them; lost = numbers skipped between the last delivered and these.

local function field(list, name)
  for i = 1, #list, 2 do
    if list[i] == name then return list[i + 1] end
  end
  return nil
end

-- The `n` of the last entry the group received, when KEYS[2] is missing (a fresh Redis, a key lost): from the group's
-- own position, read before XREADGROUP moves it. Nothing delivered yet: 0 (numbers start at 1, so every number before
-- the first entry read was trimmed unread). The last delivered entry still in the stream: its `n`. Else unknown (-1):
-- this read only sets the counter, and gaps are counted from the next one.
local function group_position()
  -- No stream: XREADGROUP below answers NOGROUP, which makes the reader create the group again.
  if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
  for _, group in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
    if field(group, 'name') == ARGV[1] then
      local id = field(group, 'last-delivered-id')
      if id == '0-0' then return 0 end
      local last = redis.call('XRANGE', KEYS[1], id, id)
      local n = last[1] and field(last[1][2], 'n')
      return n and tonumber(n) or -1
    end
  end
  return -1
end

local stored = redis.call('GET', KEYS[2])
local last = stored and tonumber(stored) or group_position()
local reply = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', ARGV[3], 'STREAMS', KEYS[1], '>')
if not reply then return {0, {}} end
local entries = reply[1][2]
local lost = 0
for _, entry in ipairs(entries) do
  local n = tonumber(field(entry[2], 'n'))
  if n then
    -- Numbers only grow while the shard's counter lives: a smaller one means it restarted (its key lost while this
    -- one stayed), so gaps count from its start.
    if last >= 0 and n <= last then last = 0 end
    if last >= 0 and n > last + 1 then lost = lost + n - last - 1 end
    if n > last then last = n end
  end
end
redis.call('SET', KEYS[2], last)
return {lost, entries}
