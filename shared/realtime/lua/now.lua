-- Library, no KEYS or ARGV. now_ms() → the Redis server clock in ms, so writers on different hosts agree (Lua's own
-- clock and randomness are never used). Read once per script run: every write of one run has the same time.
-- The scripts convert with arithmetic (`x + 0`, `x - x % n`) rather than tonumber and math.floor: in Redis' Lua a call
-- to a C function costs more than the command it guards (docs/performance.md, "What a publish costs Redis").
local now_cached = nil
local function now_ms()
  if not now_cached then
    local t = redis.call('TIME')
    local us = t[2] + 0
    now_cached = t[1] * 1000 + (us - us % 1000) / 1000
  end
  return now_cached
end
