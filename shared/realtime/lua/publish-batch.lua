-- Several publish requests in one run (shared/realtime/publish-batch.ts: the requests a worker serves in one turn of
-- its event loop), each exactly as publish-request.lua runs a request to one channel without an Idempotency-Key: its IP
-- limit, then its quota, then publish_one (publish.lua, before it with its libraries, as count_in: shared/fixed-window.lua).
-- In order, one after another: the run is what a pipeline of single runs would do, at one time (now.lua's, read once),
-- with the call's own work (its dispatch, the clock read) paid once for the batch instead of per request.
-- Each argument costs Redis about 1 250 instructions and the worker its encoding, and a batch's requests share most of
-- theirs (the product's counters and budgets, the shard's stream, a hot channel's keys), so each key and value the
-- requests share is sent once, and a request names them by their places:
-- KEYS: the batch's distinct keys, at most 127.
-- ARGV: 1 how many pooled values follow (P); 2..P+1 the batch's distinct values, at most 127; then 3 per request: its
--       references, its message id, its payload. The references are 20 characters, each a place (1-127): of its keys
--       in KEYS (the quota's window counter, the IP limit's, then publish_one's 7: hist, meta, fan, fan sequence, fanb,
--       histb, histx), then of its values among the pooled (IP limit, -1 when not counted here; its expiry (s); quota
--       limit, -1 when not counted here; its expiry (s); historySize; retention ms; the epoch a new epoch takes;
--       productId; channel; payload field; sender). A key or value a request does not use (no IP limit counted here)
--       is any of the batch's and never touched.
-- Returns three values per request, in order (one flat reply): as publish-request.lua's for its channel (1, offset,
-- epoch; -1, budget, ms; -5, count, false), -2, count, false past the IP limit, or 0, the error, false when a command
-- of the request failed (what it wrote before the failure stays, as when a single run fails): one request's failure is
-- never the others'.
-- A counter the run hits again (the product's quota, a client's IP limit: the same for most requests of a batch) is
-- counted here after its first hit and written once at the run's end (INCRBY): each request sees the count its own INCR
-- would have given, the counter ends where the INCRs would have left it, and a run is atomic, so nobody sees between.
local counted, unwritten = {}, {}
local function hit(key, expiry)
  local count = counted[key]
  if count then
    count = count + 1
    unwritten[key] = (unwritten[key] or 0) + 1
  else
    count = count_in(key, 1, expiry)
  end
  counted[key] = count
  return count
end
local function one_request(ro)
  local kq, kip, k1, k2, k3, k4, k5, k6, k7, ipl, ipe, ql, qe, vs, vt, ve, vp, vc, vf, vsd = string.byte(ARGV[ro], 1, 20)
  local ip_limit = ARGV[1 + ipl] + 0
  if ip_limit >= 0 then
    local count = hit(KEYS[kip], ARGV[1 + ipe])
    if count > ip_limit then return -2, count, false end
  end
  local quota = ARGV[1 + ql] + 0
  if quota >= 0 then
    local count = hit(KEYS[kq], ARGV[1 + qe])
    if count > quota then return -5, count, false end
  end
  local offset, epoch, wait = publish_one(KEYS[k1], KEYS[k2], KEYS[k3], KEYS[k4], KEYS[k5], KEYS[k6], KEYS[k7],
    ARGV[1 + vs] + 0, ARGV[1 + vt] + 0, ARGV[1 + ve], ARGV[1 + vp], ARGV[1 + vc], ARGV[ro + 1], ARGV[1 + vf], ARGV[ro + 2],
    ARGV[1 + vsd])
  if offset == -1 then return -1, epoch, wait end
  return 1, offset or false, epoch or false
end
local out, n = {}, 0
for ro = ARGV[1] + 2, #ARGV, 3 do
  local ok, kind, r1, r2 = pcall(one_request, ro)
  if not ok then
    -- redis.call raises a table with the error reply in `err`; anything else is the Lua error's message.
    kind, r1, r2 = 0, type(kind) == 'table' and kind.err or tostring(kind), false
  end
  out[n + 1], out[n + 2], out[n + 3] = kind, r1, r2
  n = n + 3
end
for key, amount in pairs(unwritten) do redis.call('INCRBY', key, amount) end
return out
