-- One publish request, to one channel or a broadcast to several, in one atomic step (shared/realtime/publish-request.ts):
-- the request's IP limit, its idempotency key's claim, then per channel the key's marker, the product's publish quota
-- and publish_one (publish.lua, which comes before it with its libraries).
-- KEYS: 1 the quota's window counter, 2 the idempotency claim, 3 the IP limit's window counter; then 8 per channel:
--       hist, meta, fan, fan sequence, fanb, histb, histx (publish.lua's K), and the channel's idempotency marker.
--       Keys a run does not use (no IP limit, no key) are given as any key of the same slot and never touched.
-- ARGV: 1 channels, 2 IP limit (0: not counted here), 3 its expiry (s), 4 quota limit (0: not counted here), 5 its
--       expiry (s), 6 the request's fingerprint ('' : no claim here), 7 how long a key is remembered (ms; 0: no key),
--       then 16 per channel (publish.lua's A).
-- Returns {-2, count} past the IP limit (nothing else counted or written); {-3} when the key's claim names another
-- request (nothing counted but the IP limit); otherwise {replayed, results...} with replayed 1 when the claim was this
-- request's already (a repeat), and per channel: {1, id, offset, epoch} or {1, id} published; {2, id, offset, epoch} or
-- {2, id} published before under this key (nothing done); {-1, budget, ms} over a byte budget; {-5, count} past the quota.
-- Counters expire with their window's first hit (window + 5 s: hitWindow's rule). The quota counts every channel the
-- request tries, refused or not, but a repeat answered from its marker. A claim made here is taken back when nothing
-- was published, so an idempotency key costs memory only beside a publication.
if redis.replicate_commands then redis.replicate_commands() end
local function count_in(key, expiry)
  local count = redis.call('INCR', key)
  if count == 1 then redis.call('EXPIRE', key, tonumber(expiry)) end
  return count
end
local channels = tonumber(ARGV[1])
if tonumber(ARGV[2]) > 0 then
  local count = count_in(KEYS[3], ARGV[3])
  if count > tonumber(ARGV[2]) then return {-2, count} end
end
local window = tonumber(ARGV[7])
local fingerprint = ARGV[6]
local replayed, claimed = 0, false
if fingerprint ~= '' then
  local claim = redis.call('GET', KEYS[2])
  if claim and claim ~= fingerprint then return {-3} end
  if claim then replayed = 1
  else
    redis.call('SET', KEYS[2], fingerprint, 'PX', window)
    claimed = true
  end
end
local quota = tonumber(ARGV[4])
local published = false
local out = {replayed}
for c = 0, channels - 1 do
  local K = {unpack(KEYS, 4 + 8 * c, 11 + 8 * c)}
  local A = {unpack(ARGV, 8 + 16 * c, 23 + 16 * c)}
  local marker = window > 0 and redis.call('GET', K[8]) or nil
  if marker then
    -- `id offset epoch`, or `id` for an ephemeral channel's
    local result = {2}
    for word in string.gmatch(marker, '%S+') do result[#result + 1] = word end
    if result[3] then result[3] = tonumber(result[3]) end
    out[#out + 1] = result
    published = true
  else
    local count = quota > 0 and count_in(KEYS[1], ARGV[5]) or 0
    if count > quota and quota > 0 then out[#out + 1] = {-5, count}
    else
      local reply = publish_one(K, A)
      if reply[1] == -1 then out[#out + 1] = reply
      else
        published = true
        out[#out + 1] = reply[1] and {1, A[6], reply[1], reply[2]} or {1, A[6]}
        if window > 0 then
          redis.call('SET', K[8], reply[1] and (A[6] .. ' ' .. reply[1] .. ' ' .. reply[2]) or A[6], 'PX', window)
        end
      end
    end
  end
end
if claimed and not published then redis.call('DEL', KEYS[2]) end
return out
