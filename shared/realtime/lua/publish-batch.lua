-- Several publish requests in one run (shared/realtime/publish-batch.ts: the requests a worker serves in one turn of
-- its event loop), each exactly as publish-request.lua runs a request to one channel without an Idempotency-Key: its IP
-- limit, then its quota, then publish_one (publish.lua, before it with its libraries, as count_in: shared/fixed-window.lua).
-- In order, one after another: the run is what a pipeline of single runs would do, at one time (now.lua's, read once),
-- with the call's own work (its dispatch, the clock, KEYS and ARGV made) paid once for the batch instead of per request.
-- KEYS: 9 per request: the quota's window counter, the IP limit's (any key of the slot when not counted here), then
--       publish.lua's K (7)
-- ARGV: 13 per request: IP limit (-1: not counted here), its expiry (s), quota limit (-1: not counted here), its expiry
--       (s), then publish.lua's A (9)
-- Returns three values per request, in order (one flat reply): as publish-request.lua's for its channel (1, offset,
-- epoch; -1, budget, ms; -5, count, false), -2, count, false past the IP limit, or 0, the error, false when a command
-- of the request failed (what it wrote before the failure stays, as when a single run fails): one request's failure is
-- never the others'.
local function one_request(ko, ao)
  local ip_limit = ARGV[ao + 1] + 0
  if ip_limit >= 0 then
    local count = count_in(KEYS[ko + 2], 1, ARGV[ao + 2])
    if count > ip_limit then return -2, count, false end
  end
  local quota = ARGV[ao + 3] + 0
  if quota >= 0 then
    local count = count_in(KEYS[ko + 1], 1, ARGV[ao + 4])
    if count > quota then return -5, count, false end
  end
  local offset, epoch, wait = publish_one(KEYS, ko + 2, ARGV, ao + 4, ARGV[ao + 12])
  if offset == -1 then return -1, epoch, wait end
  return 1, offset or false, epoch or false
end
local out, n = {}, 0
for r = 0, #KEYS / 9 - 1 do
  local ok, kind, r1, r2 = pcall(one_request, 9 * r, 13 * r)
  if not ok then
    -- redis.call raises a table with the error reply in `err`; anything else is the Lua error's message.
    kind, r1, r2 = 0, type(kind) == 'table' and kind.err or tostring(kind), false
  end
  out[n + 1], out[n + 2], out[n + 3] = kind, r1, r2
  n = n + 3
end
return out
