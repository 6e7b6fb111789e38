-- Reads the next new entries of a shard's fan-out stream for the archiver's consumer group, and counts the entries the
-- group never received because they were trimmed first (services/archiver/shard-reader.ts). Atomic, so several
-- archivers sharing the group count each gap once.
-- KEYS: 1 the shard's fan-out stream, 2 the highest sequence number `n` delivered to the group (keys.ts fanArchivedKey)
-- ARGV: 1 group, 2 consumer, 3 count
-- Returns {lost, entries}: entries as XREADGROUP gives them; lost = numbers skipped between the last delivered and these.
local reply = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', ARGV[3], 'STREAMS', KEYS[1], '>')
if not reply then return {0, {}} end
local entries = reply[1][2]
local last = tonumber(redis.call('GET', KEYS[2]) or '-1')
local lost = 0
for _, entry in ipairs(entries) do
  local fields = entry[2]
  for i = 1, #fields, 2 do
    if fields[i] == 'n' then
      local n = tonumber(fields[i + 1])
      if last >= 0 and n > last + 1 then lost = lost + n - last - 1 end
      if n > last then last = n end
      break
    end
  end
end
redis.call('SET', KEYS[2], last)
return {lost, entries}
