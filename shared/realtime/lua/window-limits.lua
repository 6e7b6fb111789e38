-- Fixed-window limits counted in order before a write, in the same script (shared/realtime/limited-publish.ts): the
-- public publish's per-IP limit, then its product's quota, then publish.lua, in one round trip on one Redis.
-- Goes after the libraries and before the guarded script's body, whose KEYS/ARGV come first: this part reads the tail.
-- KEYS: after the body's own (ARGV[#ARGV] of them), one counter per limit: <prefix>:<window number>, as hitWindow names it
-- ARGV: the body's own, then per limit 2 values: limit, expiry in seconds; last, how many KEYS the body has
-- Counts each limit (INCR; the expiry, window + 5 s, set with the window's first hit, so the key outlives its window by
-- at least 5 s, as hitWindow's do) until one is past its limit: returns {-2, <its number, 1-based>, <its count>} at once, so a later
-- limit is not counted and nothing else runs. Otherwise falls through to the body.
if redis.replicate_commands then redis.replicate_commands() end
do
  local body_keys = tonumber(ARGV[#ARGV])
  local first_arg = #ARGV - 2 * (#KEYS - body_keys)
  for i = 1, #KEYS - body_keys do
    local key = KEYS[body_keys + i]
    local count = redis.call('INCR', key)
    if count == 1 then redis.call('EXPIRE', key, tonumber(ARGV[first_arg + 2 * i - 1])) end
    if count > tonumber(ARGV[first_arg + 2 * i - 2]) then return {-2, i, count} end
  end
end
