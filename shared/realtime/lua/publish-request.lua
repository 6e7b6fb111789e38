-- One publish request, to one channel or a broadcast to several, in one atomic step (shared/realtime/publish-request.ts):
-- the request's IP limit, its idempotency key's claim, then per channel the key's marker, the product's publish quota
-- and publish_one (publish.lua, which comes before it with its libraries, as count_in does: shared/fixed-window.lua).
-- KEYS: 1 the quota's window counter, 2 the IP limit's window counter, then 7 per channel (publish_one's keys: hist, meta,
--       fan, fan sequence, fanb, histb, histx); with an Idempotency-Key only (each key costs Redis about 1 500
--       instructions), after them the claim and one marker per channel. Keys a run does not use (no IP limit, a claim
--       made before) are given as any key of the same slot and never touched. The channels are counted from KEYS.
-- ARGV: 1 IP limit (-1: not counted here), 2 its expiry (s), 3 quota limit (-1: not counted here), 4 its expiry (s),
--       5 the Idempotency-Key: '' without one, else `+` (claim the key here) or `=` (claimed before, a cluster's step)
--       then the request's fingerprint, then 9 per channel (publish_one's values), then only for a broadcast the payload of
--       every channel whose own (A 8) is '' (sent once). Each argument costs Redis about 1 250 instructions, so a
--       publish without a key or a broadcast sends neither. How long a key is remembered: IDEMPOTENCY_WINDOW (ms, a
--       string), with the constants.
-- Returns {-2, count} past the IP limit (nothing else counted or written); {-3} when the key's claim names another
-- request (nothing counted but the IP limit); otherwise three values per channel (one flat reply: each nested table
-- costs Redis about 2 000 instructions to write out, and each value about 1 500 to write and the worker to read),
-- false where there is none: 1, offset, epoch (both false without history) published with the id the caller gave;
-- 2, marker, false published before by this request under this key (nothing done); -1, budget, ms over a byte
-- budget; -5, count, false past the quota. A marker is `fingerprint id offset epoch` (`fingerprint id` for a channel
-- without history): one another request left (its claim expired first) is not this one's, and is replaced by this
-- one's publish.
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
local out, n = {}, 0
for c = 0, channels - 1 do
  local ko, ao = 2 + 7 * c, 5 + 9 * c -- this channel's KEYS and ARGV start after these
  local id, marker_key = ARGV[ao + 6], KEYS[4 + 7 * channels + c]
  local payload = ARGV[ao + 8]
  if payload == '' then payload = shared_payload or '' end
  local marker = fingerprint ~= '' and redis.call('GET', marker_key) or nil
  local kind, r1, r2 = nil, nil, false -- this channel's three values
  -- This request's marker: its fingerprint and a space first.
  if marker and string.sub(marker, 1, #fingerprint + 1) == fingerprint .. ' ' then kind, r1 = 2, marker end
  if kind then
    published = true
  else
    local count = quota >= 0 and count_in(KEYS[1], 1, ARGV[4]) or 0
    if quota >= 0 and count > quota then kind, r1 = -5, count
    else
      local offset, epoch, wait = publish_one(KEYS[ko + 1], KEYS[ko + 2], KEYS[ko + 3], KEYS[ko + 4], KEYS[ko + 5],
        KEYS[ko + 6], KEYS[ko + 7], ARGV[ao + 1] + 0, ARGV[ao + 2] + 0, ARGV[ao + 3], ARGV[ao + 4], ARGV[ao + 5], id,
        ARGV[ao + 7], payload, ARGV[ao + 9])
      if offset == -1 then kind, r1, r2 = -1, epoch, wait
      else
        published = true
        kind, r1, r2 = 1, offset or false, epoch or false
        if fingerprint ~= '' then
          local marked = fingerprint .. ' ' .. id
          if offset then marked = marked .. ' ' .. offset .. ' ' .. epoch end
          redis.call('SET', marker_key, marked, 'PX', IDEMPOTENCY_WINDOW)
        end
      end
    end
  end
  out[n + 1], out[n + 2], out[n + 3] = kind, r1, r2
  n = n + 3
end
if claimed and not published then redis.call('DEL', claim_key) end
return out
