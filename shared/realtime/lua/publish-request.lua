-- One publish request, to one channel or a broadcast to several, in one atomic step (shared/realtime/publish-request.ts):
-- the request's IP limit, its idempotency key's claim, then per channel the key's marker, the product's publish quota
-- and publish_one (publish.lua, which comes before it with its libraries, as count_in does: shared/fixed-window.lua).
-- KEYS: 1 the quota's window counter, 2 the IP limit's window counter, then 7 per channel (publish.lua's K: hist, meta,
--       fan, fan sequence, fanb, histb, histx); with an Idempotency-Key only (each key costs Redis about 1 500
--       instructions), after them the claim and one marker per channel. Keys a run does not use (no IP limit, a claim
--       made before) are given as any key of the same slot and never touched. The channels are counted from KEYS.
-- ARGV: 1 IP limit (-1: not counted here), 2 its expiry (s), 3 quota limit (-1: not counted here), 4 its expiry (s),
--       5 the Idempotency-Key: '' without one, else `+` (claim the key here) or `=` (claimed before, a cluster's step)
--       then the request's fingerprint, then 9 per channel (publish.lua's A), then only for a broadcast the payload of
--       every channel whose own (A 8) is '' (sent once). Each argument costs Redis about 1 250 instructions, so a
--       publish without a key or a broadcast sends neither. How long a key is remembered: IDEMPOTENCY_WINDOW (ms, a
--       string), with the constants.
-- Returns {-2, count} past the IP limit (nothing else counted or written); {-3} when the key's claim names another
-- request (nothing counted but the IP limit); otherwise {0, results...}, four values per channel (one flat reply: each
-- nested table costs Redis about 2 000 instructions to write out), false where there is none: 1, id, offset, epoch
-- (offset and epoch false without history) published; 2, id, offset, epoch published before by this request under
-- this key (nothing done); -1, budget, ms, false over a byte budget; -5, count, false, false past the quota. A marker
-- is `fingerprint id offset epoch`: one another request left (its claim expired first) is not this one's, and is
-- replaced by this one's publish.
-- Counters expire with their window's first hit (window + 5 s: hitWindow's rule). The quota counts every channel the
-- request tries, refused or not, but a repeat answered from its marker. A claim made here is taken back when nothing
-- was published, so an idempotency key costs memory only beside a publication.
-- Numbers read with `+ 0`, not tonumber: a call to a C function costs more than the conversion (now.lua).
local ip_limit, keyed = ARGV[1] + 0, ARGV[5]
local fingerprint = keyed ~= '' and string.sub(keyed, 2) or ''
local channels = fingerprint ~= '' and (#KEYS - 3) / 8 or (#KEYS - 2) / 7
local claim_key = KEYS[3 + 7 * channels] -- with a key: then the markers
local shared_payload = ARGV[6 + 9 * channels] -- a broadcast's only
if ip_limit >= 0 then
  local count = count_in(KEYS[2], 1, ARGV[2])
  if count > ip_limit then return {-2, count} end
end
local claimed = false
if fingerprint ~= '' and string.byte(keyed) == 43 then -- '+'
  local claim = redis.call('GET', claim_key)
  if claim and claim ~= fingerprint then return {-3} end
  if not claim then
    redis.call('SET', claim_key, fingerprint, 'PX', IDEMPOTENCY_WINDOW)
    claimed = true
  end
end
local quota = ARGV[3] + 0
local published = false
local out, n = {0}, 1
for c = 0, channels - 1 do
  local ko, ao = 2 + 7 * c, 5 + 9 * c -- this channel's KEYS and ARGV start after these
  local id, marker_key = ARGV[ao + 6], KEYS[4 + 7 * channels + c]
  local payload = ARGV[ao + 8]
  if payload == '' then payload = shared_payload end
  local marker = fingerprint ~= '' and redis.call('GET', marker_key) or nil
  local kind, r1, r2, r3 = nil, nil, false, false -- this channel's four values
  if marker then
    -- `fingerprint id offset epoch`, or `fingerprint id` for an ephemeral channel's
    local words = {}
    for word in string.gmatch(marker, '%S+') do words[#words + 1] = word end
    if words[1] == fingerprint then
      kind, r1, r2, r3 = 2, words[2], words[3] and tonumber(words[3]) or false, words[4] or false
    end
  end
  if kind then
    published = true
  else
    local count = quota >= 0 and count_in(KEYS[1], 1, ARGV[4]) or 0
    if quota >= 0 and count > quota then kind, r1 = -5, count
    else
      local offset, epoch, wait = publish_one(KEYS, ko, ARGV, ao, payload)
      if offset == -1 then kind, r1, r2 = -1, epoch, wait
      else
        published = true
        kind, r1, r2, r3 = 1, id, offset or false, epoch or false
        if fingerprint ~= '' then
          local marked = fingerprint .. ' ' .. id
          if offset then marked = marked .. ' ' .. offset .. ' ' .. epoch end
          redis.call('SET', marker_key, marked, 'PX', IDEMPOTENCY_WINDOW)
        end
      end
    end
  end
  out[n + 1], out[n + 2], out[n + 3], out[n + 4] = kind, r1, r2, r3
  n = n + 4
end
if claimed and not published then redis.call('DEL', claim_key) end
return out
